#pragma once

/// \file
/// The routes every troupe server has: `GET /healthz`, `GET /version`, `GET /metrics`.

#include <functional>
#include <memory>

#include "troupe/actors/health_facade.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/metrics.hpp"

namespace troupe::api {

/// What the system routes need to answer.
struct system_route_context {
  std::shared_ptr<actors::health_facade> health;
  metrics_registry* metrics = nullptr;
  /// Wraps a route that needs a token (`/version`, and `/metrics` unless
  /// `metrics_open`); empty: no wrapping.
  std::function<net::route_handler(net::route_handler)> guard;
  /// Serve `/metrics` without a token (scrapers on a trusted network).
  bool metrics_open = false;
};

/// Adds `/healthz` (pings the actor system, 503 when it does not answer within a second;
/// never needs a token), `/version` and `/metrics` (Prometheus text) to `routes`.
void add_system_routes(net::router& routes, system_route_context context);

} // namespace troupe::api
