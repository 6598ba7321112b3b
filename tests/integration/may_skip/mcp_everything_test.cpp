// Agents calling the reference MCP server, @modelcontextprotocol/server-everything
// (pinned in tests/mcp/package.json, run by Node 22 from the npm package `node`), over
// stdio and over Streamable HTTP in end-to-end runs of `troupe serve`; the scripted mock
// model makes the tool calls. A stdio server killed in the middle of a call gives the
// run a classified tool error and is restarted, and the next run works. Skipped (exit
// 77) when the npm packages are not installed (make npm-deps).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include <catch2/catch.hpp>
#include <simdjson.h>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/skip.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace std::chrono_literals;
using troupe::test::api_server;
using troupe::test::body_of;
using troupe::test::json_field;
using troupe::test::mock_llm_fixture;
using troupe::test::status_of;
using troupe::test::wait_until;

namespace {

const std::filesystem::path node_modules = TROUPE_MCP_NODE_MODULES;
const std::filesystem::path node = node_modules / "node" / "bin" / "node";
const std::filesystem::path everything =
    node_modules / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js";

void skip_unless_installed() {
  if (!std::filesystem::exists(node) || !std::filesystem::exists(everything)) {
    troupe::test::skip_test("server-everything or Node 22 is not installed in " +
                            node_modules.string() + " (make npm-deps)");
  }
}

/// A port nothing listens on now.
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t size = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool accepts(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// server-everything over Streamable HTTP at http://127.0.0.1:<port>/mcp, as a child.
class everything_http {
public:
  everything_http() : port_(free_port()) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const auto port = std::to_string(port_);
      ::setenv("PORT", port.c_str(), 1);
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, STDOUT_FILENO);
      ::execl(node.c_str(), node.c_str(), everything.c_str(), "streamableHttp", nullptr);
      ::_exit(127);
    }
    REQUIRE(wait_until([this] { return accepts(port_); }, 30s));
  }
  ~everything_http() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/mcp";
  }

private:
  std::uint16_t port_;
  pid_t pid_ = -1;
};

troupe::mock::mock_llm_options scripted_model() {
  const auto script = R"([
    {"match": {"user": "echo over stdio", "has_tool_result": false},
     "reply": {"tool_calls": [
       {"name": "everything__echo", "arguments": {"message": "hello over stdio"}},
       {"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}}]}},
    {"match": {"user": "echo over http", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "web__echo", "arguments": {"message": "hello over http"}}]}},
    {"match": {"user": "run long", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "everything__trigger-long-running-operation",
                               "arguments": {"duration": 60, "steps": 60}}]}},
    {"match": {"has_tool_result": true}, "reply": {"text": "Done with the tools."}}
  ])";
  return troupe::test::scripted(script);
}

std::string catalog(const mock_llm_fixture& mock, const std::string& mcp_servers) {
  return "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
         mock.base_url() +
         "\"\n[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "timeout_s = 120\ntools = [\"finish\"]\n" +
         "[[agents]]\nname = \"other\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"finish\"]\n" +
         mcp_servers;
}

std::string stdio_server() {
  return "[[mcp_servers]]\nname = \"everything\"\ncommand = \"" + node.string() + "\"\nargs = [\"" +
         everything.string() + "\", \"stdio\"]\nagents = [\"worker\"]\n";
}

const std::string api_limits = "rate_per_second = 1000\nrate_burst = 1000\n";

/// The status object of server `name` in GET /api/v1/runtime/mcp, as text ("" when the
/// server is not listed). Parsed, not searched: the status holds names of its own (the
/// server's, in `server`), so a text search for the next "name" cut it short.
std::string server_status(const api_server& s, const std::string& name) {
  const auto body = body_of(s.call("GET", "/api/v1/runtime/mcp", s.admin()));
  simdjson::dom::parser parser;
  simdjson::dom::array servers;
  if (parser.parse(body)["servers"].get_array().get(servers) != simdjson::SUCCESS) {
    return {};
  }
  for (auto server : servers) {
    std::string_view listed;
    simdjson::dom::element status;
    if (server["name"].get_string().get(listed) == simdjson::SUCCESS && listed == name &&
        server["status"].get(status) == simdjson::SUCCESS) {
      return simdjson::minify(status);
    }
  }
  return {};
}

bool ready(const api_server& s, const std::string& name) {
  return server_status(s, name).find("\"state\":\"ready\"") != std::string::npos;
}

/// The persisted steps of run `id`.
std::string steps_of(const api_server& s, const std::string& run_id) {
  return body_of(s.call("GET", "/api/v1/runs/" + run_id + "/steps", s.admin()));
}

std::string chat(const api_server& s, const std::string& agent, const std::string& message) {
  const auto answer = s.call("POST", "/api/v1/chat", s.admin(),
                             R"({"agent":")" + agent + R"(","message":")" + message + R"("})");
  REQUIRE(status_of(answer) == 200);
  return body_of(answer);
}

} // namespace

TEST_CASE("an agent calls server-everything's tools over stdio and over Streamable HTTP",
          "[integration][mcp]") {
  skip_unless_installed();
  everything_http web;
  mock_llm_fixture mock(scripted_model());
  api_server s(api_limits, catalog(mock, stdio_server()));
  REQUIRE(wait_until([&] { return ready(s, "everything"); }, 60s));
  const auto listed = server_status(s, "everything");
  CHECK_THAT(listed, Catch::Contains("\"everything__echo\""));
  CHECK_THAT(listed, Catch::Contains("\"everything__get-sum\""));
  CHECK_THAT(listed, Catch::Contains("\"protocol_version\":\"2025-11-25\""));
  const auto pid = json_field(listed, "pid");
  REQUIRE_FALSE(pid.empty());

  // Over stdio: two calls in one round, both answered by the server.
  auto outcome = chat(s, "worker", "echo over stdio");
  CHECK(json_field(outcome, "status") == "succeeded");
  auto steps = steps_of(s, json_field(outcome, "run_id"));
  CHECK_THAT(steps, Catch::Contains("Echo: hello over stdio"));
  CHECK_THAT(steps, Catch::Contains("The sum of 2 and 3 is 5"));

  // An agent the server does not name has no such tool.
  auto refused = chat(s, "other", "echo over stdio");
  CHECK_THAT(steps_of(s, json_field(refused, "run_id")), !Catch::Contains("Echo: hello"));

  // Over Streamable HTTP, added at run time; the stdio server, unchanged, is not
  // reconnected (same process).
  const std::string servers = R"({"servers":[{"name":"everything","command":")" + node.string() +
                              R"(","args":[")" + everything.string() +
                              R"(","stdio"],"agents":["worker"]},)" + R"({"name":"web","url":")" +
                              web.url() + R"(","agents":["worker"]}]})";
  const auto put = s.call("PUT", "/api/v1/runtime/mcp", s.admin(), servers);
  REQUIRE(status_of(put) == 200);
  REQUIRE(wait_until([&] { return ready(s, "web"); }, 60s));
  CHECK(json_field(server_status(s, "everything"), "pid") == pid);
  outcome = chat(s, "worker", "echo over http");
  CHECK(json_field(outcome, "status") == "succeeded");
  CHECK_THAT(steps_of(s, json_field(outcome, "run_id")), Catch::Contains("Echo: hello over http"));

  // The set is stored: a restarted node connects to both again.
  s.restart();
  REQUIRE(wait_until([&] { return ready(s, "everything") && ready(s, "web"); }, 60s));
  outcome = chat(s, "worker", "echo over http");
  CHECK_THAT(steps_of(s, json_field(outcome, "run_id")), Catch::Contains("Echo: hello over http"));
}

TEST_CASE("a stdio MCP server killed mid-call gives a classified tool error, is restarted, and "
          "the next run works",
          "[integration][mcp]") {
  skip_unless_installed();
  mock_llm_fixture mock(scripted_model());
  api_server s(api_limits, catalog(mock, stdio_server()));
  REQUIRE(wait_until([&] { return ready(s, "everything"); }, 60s));
  const auto first_pid = std::stol(json_field(server_status(s, "everything"), "pid"));

  const auto started =
      s.call("POST", "/api/v1/runs", s.admin(), R"({"agent":"worker","message":"run long"})");
  REQUIRE(status_of(started) == 202);
  const auto run_id = json_field(body_of(started), "run_id");
  // The long operation is under way at the server.
  REQUIRE(wait_until(
      [&] { return json_field(server_status(s, "everything"), "calls_in_flight") == "1"; }, 30s));
  REQUIRE(::kill(static_cast<pid_t>(first_pid), SIGKILL) == 0);

  REQUIRE(wait_until(
      [&] {
        const auto run = body_of(s.call("GET", "/api/v1/runs/" + run_id, s.admin()));
        const auto status = json_field(run, "status");
        return status == "succeeded" || status == "failed" || status == "cancelled";
      },
      60s));
  const auto steps = steps_of(s, run_id);
  // The call failed, saying how, and the harness took it as a (recoverable) tool error.
  CHECK_THAT(steps, Catch::Contains("killed by signal 9"));
  CHECK_THAT(steps, Catch::Contains("tool_error"));

  // Restarted (a new process), and the next run works.
  REQUIRE(wait_until(
      [&] {
        const auto st = server_status(s, "everything");
        const auto pid = json_field(st, "pid");
        return st.find("\"state\":\"ready\"") != std::string::npos && !pid.empty() &&
               std::stol(pid) != first_pid;
      },
      60s));
  const auto outcome = chat(s, "worker", "echo over stdio");
  CHECK(json_field(outcome, "status") == "succeeded");
  CHECK_THAT(steps_of(s, json_field(outcome, "run_id")), Catch::Contains("Echo: hello over stdio"));
}
