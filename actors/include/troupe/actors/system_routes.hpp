#pragma once

/// \file
/// The routes every troupe server has: `GET /healthz`, `GET /version`, `GET /metrics`.

#include <functional>

#include <caf/fwd.hpp>

#include "troupe/actors/health.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/metrics.hpp"

namespace troupe::actors {

/// What the system routes need to answer.
struct system_route_context {
  caf::actor_system* system = nullptr;
  health_actor health;
  metrics_registry* metrics = nullptr;
  /// Wraps a route that needs a token (`/version`, and `/metrics` unless
  /// `metrics_open`); empty: no wrapping.
  std::function<net::route_handler(net::route_handler)> guard;
  /// Serve `/metrics` without a token (scrapers on a trusted network).
  bool metrics_open = false;
};

/// Adds `/healthz` (asks the health actor, 503 when it does not answer within a second;
/// never needs a token), `/version` and `/metrics` (Prometheus text) to `routes`.
void add_system_routes(net::router& routes, system_route_context context);

} // namespace troupe::actors
