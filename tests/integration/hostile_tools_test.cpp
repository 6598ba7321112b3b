// Hostile tool calls against the real `troupe serve` binary with a scripted mock-llm: a
// catastrophic grep pattern, a FIFO read, and `mkfifo p; cat p` in the sandbox. While
// they run, /healthz and another conversation keep answering within 100 ms; the calls
// end with clear errors and the node keeps serving.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/raw_http.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/runtime/json_writer.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

// The haystack: a 30-character run of a's and a 20,000-character one, each ending in b.
// `(a+)+$` over the short one alone took a backtracking engine minutes.
std::string haystack() {
  return std::string(30, 'a') + "b\n" + std::string(20'000, 'a') + "b\n";
}

troupe::mock::mock_llm_options hostile_mock() {
  troupe::json_writer write_args;
  write_args.begin_object().key("path").value("hay.txt").key("content").value(haystack());
  write_args.end_object();
  const std::string script = R"([
    {"match": {"user": "make the haystack", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "write", "arguments": )" +
                             std::move(write_args).str() + R"(}]}},
    {"match": {"user": "make the haystack", "has_tool_result": true},
     "reply": {"text": "haystack written"}},
    {"match": {"user": "hostile", "has_tool_result": false},
     "reply": {"tool_calls": [
       {"name": "grep", "arguments": {"pattern": "(a+)+$", "path": "hay.txt"}},
       {"name": "read", "arguments": {"file_path": "p"}},
       {"name": "exec", "arguments": {"command": "mkfifo p; cat p", "timeout_s": 2}}]}},
    {"match": {"has_tool_result": true, "prompt": "p is a FIFO"},
     "reply": {"text": "the FIFO was refused"}},
    {"match": {"has_tool_result": true, "prompt": "hostile"},
     "reply": {"text": "the tools answered without saying why"}}
  ])";
  return scripted(script);
}

std::string config(const mock_llm_fixture& mock) {
  return mock_provider_toml(mock) +
         "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"write\", \"read\", \"grep\", \"exec\", \"finish\"]\ntimeout_s = 60\n"
         "[[agents]]\nname = \"other\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n";
}

// One exchange, waiting up to `timeout` for the whole answer.
std::string exchange(std::uint16_t port, const std::string& method, const std::string& target,
                     const std::string& token, const std::string& body,
                     std::chrono::milliseconds timeout) {
  raw_client c(port);
  std::string request =
      method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) {
    request += "Authorization: Bearer " + token + "\r\n";
  }
  if (!body.empty()) {
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  c.send(request + "\r\n" + body);
  return c.read_until_closed(timeout);
}

struct timed_answer {
  int status = 0;
  std::chrono::milliseconds took{0};
};

timed_answer timed(std::uint16_t port, const std::string& method, const std::string& target,
                   const std::string& token, const std::string& body = {}) {
  const auto started = std::chrono::steady_clock::now();
  const auto answer = exchange(port, method, target, token, body, 5s);
  return {status_of(answer), std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - started)};
}

// The conversation's workspace: the directory under workspaces/ holding `file`.
std::filesystem::path workspace_with(const std::filesystem::path& data_dir,
                                     const std::string& file) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir / "workspaces", ec)) {
    if (std::filesystem::exists(e.path() / file)) {
      return e.path();
    }
  }
  return {};
}

} // namespace

TEST_CASE("hostile tool calls freeze nothing: healthz and another conversation answer within "
          "100 ms while they run",
          "[integration][hostile]") {
  mock_llm_fixture mock(hostile_mock());
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", config(mock));
  REQUIRE(s.port() != 0);

  // The conversation gets its haystack through the write tool.
  const auto made = s.call("POST", "/api/v1/chat", s.admin(),
                           R"({"agent":"worker","message":"make the haystack"})");
  REQUIRE(status_of(made) == 200);
  const auto conversation = json_field(body_of(made), "conversation_id");
  REQUIRE_FALSE(conversation.empty());
  const auto ws = workspace_with(s.data_dir(), "hay.txt");
  REQUIRE_FALSE(ws.empty());
  // A FIFO in the workspace (as code run on an older node could have left): `read p` and
  // `cat p` in the sandbox would wait for a writer that never comes.
  REQUIRE(::mkfifo((ws / "p").c_str(), 0666) == 0);
  REQUIRE((::chown((ws / "p").c_str(), 65534, 65534) == 0 || ::geteuid() != 0));

  // The hostile turn, in the background.
  const auto port = s.port();
  const auto token = s.admin();
  const std::string hostile_body =
      R"({"agent":"worker","message":"hostile","conversation_id":")" + conversation + R"("})";
  std::atomic<bool> hostile_done{false};
  auto hostile = std::async(std::launch::async, [&] {
    auto answer = exchange(port, "POST", "/api/v1/chat", token, hostile_body, 60s);
    hostile_done = true;
    return answer;
  });

  // Meanwhile: /healthz again and again, and another conversation's whole chat turn.
  std::vector<timed_answer> health;
  std::vector<timed_answer> chats;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (!hostile_done && std::chrono::steady_clock::now() < give_up) {
    health.push_back(timed(port, "GET", "/healthz", {}));
    if (chats.size() < 3) {
      chats.push_back(
          timed(port, "POST", "/api/v1/chat", token, R"({"agent":"other","message":"hello"})"));
    }
  }
  const auto answer = hostile.get();
  INFO(answer);
  REQUIRE(status_of(answer) == 200);
  REQUIRE(health.size() >= 3); // the hostile turn lasted long enough to be probed
  for (const auto& h : health) {
    CHECK(h.status == 200);
    CHECK(h.took < 100ms);
  }
  REQUIRE_FALSE(chats.empty());
  for (const auto& c : chats) {
    CHECK(c.status == 200);
    CHECK(c.took < 100ms);
  }

  // The tool calls ended, each with a clear answer: grep found nothing (at once), read was
  // refused naming the FIFO (the model saw it), exec hit its own timeout in the sandbox.
  const auto body = body_of(answer);
  CHECK(json_field(body, "status") == "succeeded");
  CHECK(json_field(body, "content") == "the FIFO was refused");
  CHECK_THAT(body, Catch::Contains(R"("name":"grep","status":"success")"));
  CHECK_THAT(body, Catch::Contains(R"("name":"read","status":"error")") ||
                       Catch::Contains(R"("name":"read","status":"failed")"));
  CHECK_THAT(body, !Catch::Contains(R"("name":"exec","status":"success")"));
  CHECK(std::filesystem::is_fifo(ws / "p"));

  // The node keeps serving.
  CHECK(status_of(s.call("GET", "/healthz", "")) == 200);
  const auto after =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"other","message":"still there?"})");
  CHECK(status_of(after) == 200);
}
