#include <catch2/catch.hpp>

#include "troupe/net/http_server.hpp"

using namespace troupe::net;

namespace {

route_handler dummy() {
  return [](request_context&) -> asio::awaitable<http_response> { co_return http_response{}; };
}

} // namespace

TEST_CASE("router extracts percent-decoded path parameters", "[net][router]") {
  router r;
  r.add(http_method::get, "/api/v1/runs/{id}/events", dummy());
  auto m = r.find(http_method::get, "/api/v1/runs/run%201/events");
  REQUIRE(m.handler != nullptr);
  CHECK(m.pattern == "/api/v1/runs/{id}/events");
  REQUIRE(m.params.size() == 1);
  CHECK(m.params[0].first == "id");
  CHECK(m.params[0].second == "run 1");
}

TEST_CASE("router prefers literal segments over parameters", "[net][router]") {
  router r;
  r.add(http_method::get, "/runs/{id}", dummy());
  r.add(http_method::get, "/runs/active", dummy());
  CHECK(r.find(http_method::get, "/runs/active").pattern == "/runs/active");
  CHECK(r.find(http_method::get, "/runs/42").pattern == "/runs/{id}");
}

TEST_CASE("router reports the allowed methods when only the method is wrong", "[net][router]") {
  router r;
  r.add(http_method::get, "/things", dummy());
  r.add(http_method::post, "/things", dummy());
  auto m = r.find(http_method::del, "/things");
  CHECK(m.handler == nullptr);
  CHECK(m.allowed.size() == 2);
  auto none = r.find(http_method::get, "/other");
  CHECK(none.handler == nullptr);
  CHECK(none.allowed.empty());
}

TEST_CASE("router answers HEAD with the GET route and ignores trailing slashes", "[net][router]") {
  router r;
  r.add(http_method::get, "/healthz", dummy());
  CHECK(r.find(http_method::head, "/healthz").handler != nullptr);
  CHECK(r.find(http_method::get, "/healthz/").handler != nullptr);
  CHECK(r.find(http_method::get, "/healthz/extra").handler == nullptr);
}

TEST_CASE("query parameters are decoded by name", "[net][http]") {
  http_request req;
  req.query = "a=1&name=hello+world%21&empty=&flag";
  CHECK(req.query_param("name") == "hello world!");
  CHECK(req.query_param("a") == "1");
  CHECK(req.query_param("empty").empty());
  CHECK(req.query_param("missing").empty());
  CHECK(percent_decode("%zz%4") == "%zz%4");
}
