// A tool call that holds a thread for 2 s delays nobody else: a node with troupe serve's
// routes (api::frontend) on loopback and a scripted mock-llm, one conversation's run
// calling a tool whose work blocks a thread of the node's blocking pool until the test
// lets it go, while the test measures /healthz and other conversations' streamed chats.
// Their p99 stays within 5 ms of the same requests' p99 with nothing blocked, measured
// in the same test before and after.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/event_count.hpp"
#include "support/raw_http.hpp"
#include "troupe/actors/node.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/api/routes.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/runtime/settings.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/tool_source.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
using std::chrono::steady_clock;

namespace {

/// Where a held call waits: the test learns that the call arrived (`entered`) and lets it
/// go (`release`); the call records how long it held its thread and whether that thread
/// was a shard.
class tool_gate {
public:
  /// Blocks the calling thread until `release`, or 60 s at most (a test that failed
  /// before releasing must not leave the node's pool stuck).
  void hold() {
    const auto started = steady_clock::now();
    on_shard_ = actors::shard_set::current().has_value();
    entered.raise();
    {
      std::unique_lock lock(mutex_);
      released_.wait_for(lock, 60s, [&] { return open_; });
    }
    held_ = steady_clock::now() - started;
  }
  void release() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    released_.notify_all();
  }
  bool held_on_shard() const {
    return on_shard_.load();
  }
  steady_clock::duration held() const {
    return held_.load();
  }

  event_count entered;

private:
  std::mutex mutex_;
  std::condition_variable released_;
  bool open_ = false;
  std::atomic<bool> on_shard_{false};
  std::atomic<steady_clock::duration> held_{steady_clock::duration::zero()};
};

/// `hold`: a tool whose work blocks a thread, given (as every tool's blocking work is) to
/// the node's blocking pool.
class hold_tool final : public tools::tool {
public:
  hold_tool(std::shared_ptr<tool_gate> gate, std::shared_ptr<tools::blocking_pool> pool)
      : gate_(std::move(gate)), pool_(std::move(pool)) {
    descriptor_.name = "hold";
    descriptor_.description = "holds a thread until the test lets it go";
  }
  const tools::tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  boost::asio::awaitable<tools::tool_result> invoke(std::string,
                                                    tools::tool_context) const override {
    auto pool = pool_;
    auto job = [gate = gate_](const tools::job_control&) {
      gate->hold();
      return true;
    };
    auto held = co_await pool->run(std::move(job), 90s);
    if (!held) {
      co_return tools::tool_failure("tool_error", held.error().message);
    }
    co_return tools::tool_result{true, R"({"ok":true,"held":true})", {}, {}};
  }

private:
  tools::tool_descriptor descriptor_;
  std::shared_ptr<tool_gate> gate_;
  std::shared_ptr<tools::blocking_pool> pool_;
};

troupe::mock::mock_llm_options holding_mock() {
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(R"([
    {"match": {"user": "hold the line", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "hold", "arguments": {}}]}},
    {"match": {"user": "hold the line", "has_tool_result": true},
     "reply": {"text": "let go"}}
  ])");
  REQUIRE(rules);
  o.rules = std::move(*rules);
  return o;
}

settings node_settings(const std::filesystem::path& dir, const mock_llm_fixture& mock) {
  const std::string toml = "listen = \"127.0.0.1:0\"\ndata_dir = \"" + (dir / "data").string() +
                           "\"\n"
                           "[api]\nrate_per_second = 100000\nrate_burst = 100000\n"
                           "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\n"
                           "base_url = \"" +
                           mock.base_url() +
                           "\"\n"
                           // worker lists no tools: it has every tool, `hold` included.
                           "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\n"
                           "model = \"mock-llm\"\ntimeout_s = 120\n"
                           "[[agents]]\nname = \"other\"\nprovider = \"mock\"\n"
                           "model = \"mock-llm\"\ntools = [\"finish\"]\n";
  auto s = apply_toml(settings{}, toml, "blocking_tool_test");
  REQUIRE(s);
  return std::move(*s);
}

std::string request(std::string_view method, std::string_view target, const std::string& token,
                    std::string_view body, std::string_view accept = {}) {
  std::string r = std::string(method) + " " + std::string(target) +
                  " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) {
    r += "Authorization: Bearer " + token + "\r\n";
  }
  if (!accept.empty()) {
    r += "Accept: " + std::string(accept) + "\r\n";
  }
  if (!body.empty()) {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + std::string(body);
}

/// One probe round's figures: a /healthz and another conversation's streamed chat turn,
/// each on a connection of its own, timed from connect to the last byte.
struct latencies {
  std::vector<double> health_ms;
  std::vector<double> stream_ms;
  int failures = 0;
};

double ms_since(steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(steady_clock::now() - t).count();
}

void probe_once(std::uint16_t port, const std::string& token, latencies& out) {
  {
    const auto started = steady_clock::now();
    raw_client c(port);
    c.send(request("GET", "/healthz", {}, {}));
    const auto answer = c.read_until_closed(10s);
    out.health_ms.push_back(ms_since(started));
    out.failures += status_of(answer) == 200 ? 0 : 1;
  }
  {
    const auto started = steady_clock::now();
    raw_client c(port);
    c.send(request("POST", "/api/v1/chat/stream", token,
                   R"({"agent":"other","message":"hello there"})", "text/event-stream"));
    const auto answer = c.read_until("data: [DONE]", 10s);
    out.stream_ms.push_back(ms_since(started));
    const bool whole = status_of(answer) == 200 &&
                       answer.find("event: done") != std::string::npos &&
                       answer.find("data: [DONE]") != std::string::npos;
    out.failures += whole ? 0 : 1;
  }
}

/// Probe rounds, one after another, for `span`.
void probe_for(std::uint16_t port, const std::string& token, steady_clock::duration span,
               latencies& out) {
  const auto until = steady_clock::now() + span;
  while (steady_clock::now() < until) {
    probe_once(port, token, out);
  }
}

double p99(std::vector<double> v) {
  REQUIRE_FALSE(v.empty());
  std::sort(v.begin(), v.end());
  const auto at = static_cast<std::size_t>(0.99 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

} // namespace

TEST_CASE("a tool that blocks a thread for 2 s adds under 5 ms to the p99 of /healthz and of "
          "another conversation's streamed chat",
          "[integration][blocking]") {
  mock_llm_fixture mock(holding_mock());
  temp_dir dir;
  actors::node node(node_settings(dir.path(), mock), api::frontend());
  auto gate = std::make_shared<tool_gate>();
  auto source = std::make_shared<tools::dynamic_tool_source>("blocking_test");
  REQUIRE(source->add(std::make_shared<hold_tool>(gate, node.blocking_pool())));
  node.add_tool_source(source);
  const auto bound = node.start();
  REQUIRE(bound);
  const auto port = bound->port;
  auto token = read_file(dir.path() / "data" / "admin.token");
  while (!token.empty() && token.back() == '\n') {
    token.pop_back();
  }
  REQUIRE_FALSE(token.empty());

  // Warm up (first connections, first conversations, the SQLite pages), then the
  // baseline: the same probes with nothing blocked.
  latencies warm;
  for (int i = 0; i < 20; ++i) {
    probe_once(port, token, warm);
  }
  REQUIRE(warm.failures == 0);
  latencies baseline;
  probe_for(port, token, 1s, baseline);

  // The held run, in the background; the probes start once its tool holds its thread.
  auto held_run = std::async(std::launch::async, [&] {
    raw_client c(port);
    c.send(
        request("POST", "/api/v1/chat", token, R"({"agent":"worker","message":"hold the line"})"));
    return c.read_until_closed(120s);
  });
  const bool entered = gate->entered.wait_for(1, 30s);
  if (!entered) {
    gate->release();
  }
  REQUIRE(entered);
  latencies blocked;
  probe_for(port, token, 2s, blocked);
  gate->release();
  const auto answer = held_run.get();

  // And the baseline once more, after the thread was let go.
  probe_for(port, token, 1s, baseline);

  INFO(answer);
  REQUIRE(status_of(answer) == 200);
  CHECK(json_field(body_of(answer), "content") == "let go");
  CHECK_THAT(body_of(answer), Catch::Contains(R"("name":"hold","status":"success")"));
  // The tool did block a thread for 2 s, and not a shard's.
  CHECK(gate->held() >= 2s);
  CHECK_FALSE(gate->held_on_shard());

  CHECK(baseline.failures == 0);
  CHECK(blocked.failures == 0);
  REQUIRE(blocked.health_ms.size() >= 20); // the 2 s were probed, not skipped
  const auto health_added = p99(blocked.health_ms) - p99(baseline.health_ms);
  const auto stream_added = p99(blocked.stream_ms) - p99(baseline.stream_ms);
  INFO("healthz p99 " << p99(baseline.health_ms) << " ms without, " << p99(blocked.health_ms)
                      << " ms with the tool holding its thread (" << blocked.health_ms.size()
                      << " probes)");
  INFO("streamed chat p99 " << p99(baseline.stream_ms) << " ms without, " << p99(blocked.stream_ms)
                            << " ms with (" << blocked.stream_ms.size() << " turns)");
  CHECK(health_added < 5.0);
  CHECK(stream_added < 5.0);

  node.stop();
  node.wait();
}
