#pragma once

/// \file
/// The routes every troupe server has: `GET /healthz`, `GET /version`, `GET /metrics`.

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
};

/// Adds `/healthz` (asks the health actor, 503 when it does not answer within a second),
/// `/version` and `/metrics` (Prometheus text) to `routes`.
void add_system_routes(net::router& routes, system_route_context context);

} // namespace troupe::actors
