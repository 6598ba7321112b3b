// Runs the real `troupe serve` binary on an ephemeral loopback port.

#include <csignal>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "support/raw_http.hpp"
#include "support/troupe_process.hpp"
#include "support/wait_until.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> serve_args(const temp_dir& dir) {
  return {"serve", "--listen", "127.0.0.1:0", "--data-dir", (dir.path() / "data").string()};
}

// The header carrying the admin token troupe wrote on its first start.
std::string admin_auth(const temp_dir& dir) {
  std::ifstream in(dir.path() / "data" / "admin.token");
  std::string token;
  std::getline(in, token);
  return "Authorization: Bearer " + token + "\r\n";
}

} // namespace

TEST_CASE("troupe serve answers healthz, version and metrics", "[integration]") {
  temp_dir dir;
  troupe_process troupe(serve_args(dir));
  const auto port = troupe.wait_for_port();
  REQUIRE(port);

  const auto health = http_exchange(*port, "GET", "/healthz");
  CHECK(status_of(health) == 200);
  CHECK(body_of(health) == R"({"status":"ok"})");

  // /version and /metrics need a token; /healthz does not.
  CHECK(status_of(http_exchange(*port, "GET", "/version")) == 401);
  const auto version = http_exchange(*port, "GET", "/version", {}, admin_auth(dir));
  CHECK(status_of(version) == 200);
  CHECK_THAT(body_of(version), Catch::Contains(R"("name":"troupe","version":")"));

  const auto metrics = http_exchange(*port, "GET", "/metrics", {}, admin_auth(dir));
  CHECK(status_of(metrics) == 200);
  CHECK_THAT(metrics, Catch::Contains("text/plain; version=0.0.4"));
  CHECK_THAT(metrics,
             Catch::Contains(
                 R"(troupe_http_requests_total{route="/healthz",method="GET",status="200"} 1)"));
  CHECK_THAT(metrics,
             Catch::Contains(
                 "troupe_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"+Inf\"} 1"));
  CHECK_THAT(metrics, Catch::Contains("troupe_actors_live "));
  CHECK_THAT(metrics, Catch::Contains("troupe_http_open_connections 1"));
  CHECK_THAT(metrics, Catch::Contains("troupe_http_open_streams 0"));

  troupe.signal(SIGTERM);
  CHECK(troupe.wait_exit() == 0);
}

TEST_CASE("troupe serve rejects bad requests with JSON errors and keeps serving", "[integration]") {
  temp_dir dir;
  troupe_process troupe(serve_args(dir));
  const auto port = troupe.wait_for_port();
  REQUIRE(port);

  SECTION("413 for a body over the default 1 MiB limit") {
    raw_client c(*port);
    c.send("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n");
    const auto r = c.read_until_closed();
    CHECK(status_of(r) == 413);
    CHECK_THAT(body_of(r), Catch::Contains(R"({"error":{"code":"payload_too_large")"));
  }
  SECTION("400 for garbage bytes") {
    raw_client c(*port);
    c.send(std::string("\x00\x01\x02 garbage \xff\r\n\r\n", 17));
    const auto r = c.read_until_closed();
    CHECK(status_of(r) == 400);
    CHECK_THAT(body_of(r), Catch::Contains(R"({"error":{"code":"bad_request")"));
  }
  SECTION("404 with the JSON error body") {
    const auto r = http_exchange(*port, "GET", "/no/such/route");
    CHECK(status_of(r) == 404);
    CHECK(body_of(r) ==
          R"({"error":{"code":"not_found","message":"no route for /no/such/route"}})");
  }
  CHECK(status_of(http_exchange(*port, "GET", "/healthz")) == 200);
  troupe.signal(SIGTERM);
  CHECK(troupe.wait_exit() == 0);
}

TEST_CASE("SIGTERM during a slow request lets it finish, then troupe exits 0", "[integration]") {
  temp_dir dir;
  troupe_process troupe(serve_args(dir));
  const auto port = troupe.wait_for_port();
  REQUIRE(port);

  raw_client slow(*port);
  slow.send("GET /healthz HTTP/1.1\r\n"); // the request has begun...
  // troupe accepts connections in the order they arrived: once a later one is answered,
  // the slow one is accepted too.
  REQUIRE(status_of(http_exchange(*port, "GET", "/healthz")) == 200);
  troupe.signal(SIGTERM);
  // ...and is still arriving while troupe drains.
  REQUIRE(wait_until([&] { return troupe.output().find("draining:") != std::string::npos; }, 10s));
  CHECK_FALSE(troupe.wait_exit(0ms).has_value());
  slow.send("Host: x\r\n\r\n");
  const auto answer = slow.read_until_closed();
  CHECK(status_of(answer) == 200);
  CHECK(body_of(answer) == R"({"status":"ok"})");
  CHECK_THAT(answer, Catch::Contains("Connection: close"));
  CHECK(troupe.wait_exit() == 0);
  CHECK_THAT(troupe.output(), Catch::Contains("received SIGTERM"));
}

TEST_CASE("troupe serve refuses an unknown config key, naming it and the file", "[integration]") {
  temp_dir dir;
  const auto config = dir.path() / "troupe.toml";
  std::ofstream(config) << "listen = \"127.0.0.1:0\"\n[server]\nmystery_knob = 3\n";
  troupe_process troupe({"serve", "--config", config.string()});
  CHECK(troupe.wait_exit() == 2);
  CHECK_THAT(troupe.output(), Catch::Contains("server.mystery_knob"));
  CHECK_THAT(troupe.output(), Catch::Contains(config.string()));
}

TEST_CASE("troupe serve takes its settings from TROUPE_ variables below flags", "[integration]") {
  temp_dir dir;
  ::setenv("TROUPE_LOG_FORMAT", "json", 1);
  ::setenv("TROUPE_LISTEN", "127.0.0.1:1", 1); // overridden by --listen below
  troupe_process troupe(serve_args(dir));
  ::unsetenv("TROUPE_LOG_FORMAT");
  ::unsetenv("TROUPE_LISTEN");
  const auto port = troupe.wait_for_port();
  REQUIRE(port);
  CHECK(*port != 1);
  CHECK_THAT(troupe.output(), Catch::Contains(R"("level":"info","msg":"troupe listening)"));
  troupe.signal(SIGINT);
  CHECK(troupe.wait_exit() == 0);
}

TEST_CASE("a second troupe on the same data directory is refused", "[integration]") {
  temp_dir dir;
  troupe_process first(serve_args(dir));
  REQUIRE(first.wait_for_port());
  troupe_process second(serve_args(dir));
  CHECK(second.wait_exit() == 1);
  CHECK_THAT(second.output(), Catch::Contains("in use by another troupe process"));
  first.signal(SIGTERM);
  CHECK(first.wait_exit() == 0);
}

TEST_CASE("troupe version and help describe the commands", "[integration]") {
  troupe_process version({"version"});
  CHECK(version.wait_exit() == 0);
  CHECK_THAT(version.output(), Catch::StartsWith("troupe 0."));
  troupe_process help({"serve", "--help"});
  CHECK(help.wait_exit() == 0);
  for (const char* flag : {"--config", "--listen", "--data-dir", "--log-level", "--log-format"}) {
    CHECK_THAT(help.output(), Catch::Contains(flag));
  }
}

TEST_CASE("troupe serve refuses an agent with an unknown tool, naming the agent", "[integration]") {
  temp_dir dir;
  const auto config = dir.path() / "troupe.toml";
  std::ofstream(config) << "[[providers]]\nname = \"local\"\ntype = \"openai-compatible\"\n"
                           "base_url = \"http://127.0.0.1:9/v1\"\n\n"
                           "[[agents]]\nname = \"helper\"\nprovider = \"local\"\nmodel = \"m\"\n"
                           "tools = [\"read\", \"teleport\"]\n";
  auto args = serve_args(dir);
  args.insert(args.end(), {"--config", config.string()});
  troupe_process troupe(args);
  CHECK(troupe.wait_exit() == 1);
  CHECK_THAT(troupe.output(), Catch::Contains("agent 'helper': unknown tool 'teleport'"));
}

TEST_CASE("with no provider configured troupe says plainly it serves the scripted demo model",
          "[integration]") {
  temp_dir dir;
  ::unsetenv("OPENAI_API_KEY");
  troupe_process troupe(serve_args(dir));
  REQUIRE(troupe.wait_for_port());
  CHECK_THAT(troupe.output(), Catch::Contains("SCRIPTED DEMO model"));
  troupe.signal(SIGTERM);
  CHECK(troupe.wait_exit() == 0);
}
