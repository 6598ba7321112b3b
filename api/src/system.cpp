#include "troupe/api/system.hpp"

#include <chrono>

#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/version.hpp"

namespace troupe::api {

namespace {

namespace asio = boost::asio;

constexpr auto health_timeout = std::chrono::milliseconds(1000);

// Route coroutines take their context by value: a capturing coroutine lambda would
// dangle after its first suspension (stack.md).

asio::awaitable<net::http_response> healthz(system_route_context context) {
  if (!context.health) {
    co_return net::http_response::error(503, "unavailable", "the actor system is not running");
  }
  auto pinging = context.health->ping(health_timeout);
  auto answer = co_await std::move(pinging);
  if (!answer) {
    co_return net::http_response::error(
        503, "unavailable", "the actor system did not answer: " + answer.error().message);
  }
  co_return net::http_response::json(200, R"({"status":"ok"})");
}

asio::awaitable<net::http_response> version_info() {
  json_writer w;
  w.begin_object();
  w.key("name").value("troupe");
  w.key("version").value(version());
  w.key("build").value(build_info());
  w.end_object();
  co_return net::http_response::json(200, std::move(w).str());
}

asio::awaitable<net::http_response> metrics_text(system_route_context context) {
  co_return net::http_response::text(200, context.metrics->render(),
                                     "text/plain; version=0.0.4; charset=utf-8");
}

} // namespace

void add_system_routes(net::router& routes, system_route_context context) {
  routes.add(net::http_method::get, "/healthz",
             [context](net::request_context&) { return healthz(context); });
  auto guarded = [&context](net::route_handler h, bool open) {
    return context.guard && !open ? context.guard(std::move(h)) : h;
  };
  routes.add(net::http_method::get, "/version",
             guarded([](net::request_context&) { return version_info(); }, false));
  routes.add(net::http_method::get, "/metrics",
             guarded([context](net::request_context&) { return metrics_text(context); },
                     context.metrics_open));
}

} // namespace troupe::api
