// A tool call that holds a thread for 2 s delays nobody else: a node with troupe serve's
// routes (api::frontend) on loopback and a scripted mock-llm, one conversation's run
// calling a tool whose work blocks a thread of the node's blocking pool until the test
// lets it go, while the test measures /healthz and other conversations' streamed chats.
// Their p99 stays within 5 ms of the same requests' p99 on a control node where nothing is
// blocked, probed in turn with them.

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

/// Where held calls wait: the test learns that a call arrived (`entered`) and lets it go
/// (`release`, one call each); each call records how long it held its thread and whether
/// that thread was a shard.
class tool_gate {
public:
  /// Blocks the calling thread until its `release`, or 60 s at most (a test that failed
  /// before releasing must not leave the node's pool stuck).
  void hold() {
    const auto started = steady_clock::now();
    if (actors::shard_set::current().has_value()) {
      on_shard_ = true;
    }
    std::size_t mine = 0;
    {
      const std::lock_guard lock(mutex_);
      mine = ++holds_;
    }
    entered.raise();
    {
      std::unique_lock lock(mutex_);
      released_.wait_for(lock, 60s, [&] { return releases_ >= mine; });
    }
    const auto held = steady_clock::now() - started;
    const std::lock_guard lock(mutex_);
    shortest_ = holds_ == 1 ? held : std::min(shortest_, held);
  }
  /// Lets the oldest held call go.
  void release() {
    {
      const std::lock_guard lock(mutex_);
      ++releases_;
    }
    released_.notify_all();
  }
  bool held_on_shard() const {
    return on_shard_.load();
  }
  /// The shortest time a call held its thread.
  steady_clock::duration shortest_hold() const {
    const std::lock_guard lock(mutex_);
    return shortest_;
  }

  event_count entered;

private:
  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::size_t holds_ = 0;
  std::size_t releases_ = 0;
  steady_clock::duration shortest_ = steady_clock::duration::zero();
  std::atomic<bool> on_shard_{false};
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

/// Probe rounds for `span`, alternating between `held` (a node whose tool holds a thread)
/// and `control` (the same node setup with nothing held), so that whatever else the
/// machine runs meanwhile falls on both alike.
void probe_both_for(std::uint16_t held, std::uint16_t control, const std::string& held_token,
                    const std::string& control_token, steady_clock::duration span,
                    latencies& held_out, latencies& control_out) {
  const auto until = steady_clock::now() + span;
  while (steady_clock::now() < until) {
    probe_once(held, held_token, held_out);
    probe_once(control, control_token, control_out);
  }
}

double p99(std::vector<double> v) {
  REQUIRE_FALSE(v.empty());
  std::sort(v.begin(), v.end());
  const auto at = static_cast<std::size_t>(0.99 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

/// A node with troupe serve's routes and the `hold` tool, on loopback.
class serving_node {
public:
  serving_node(const mock_llm_fixture& mock, std::shared_ptr<tool_gate> gate)
      : node_(node_settings(dir_.path(), mock), api::frontend()) {
    auto source = std::make_shared<tools::dynamic_tool_source>("blocking_test");
    REQUIRE(source->add(std::make_shared<hold_tool>(std::move(gate), node_.blocking_pool())));
    node_.add_tool_source(source);
    const auto bound = node_.start();
    REQUIRE(bound);
    port_ = bound->port;
    token_ = read_file(dir_.path() / "data" / "admin.token");
    while (!token_.empty() && token_.back() == '\n') {
      token_.pop_back();
    }
    REQUIRE_FALSE(token_.empty());
  }
  ~serving_node() {
    node_.stop();
    node_.wait();
  }
  std::uint16_t port() const {
    return port_;
  }
  const std::string& token() const {
    return token_;
  }

private:
  temp_dir dir_;
  actors::node node_;
  std::uint16_t port_ = 0;
  std::string token_;
};

} // namespace

// The held node and a control node (no tool held) run side by side and are probed in
// turn, so both see the same machine. A probe's p99 is the few slowest of a few hundred:
// on a shared 2-core machine one stray stall of the test process can move it by more than
// 5 ms. So the hold is tried up to three times and the case passes on the first attempt
// within the bound; a shard blocked by the tool would add up to 2 s to every attempt.
TEST_CASE("a tool that blocks a thread for 2 s adds under 5 ms to the p99 of /healthz and of "
          "another conversation's streamed chat",
          "[integration][blocking]") {
  mock_llm_fixture mock(holding_mock());
  auto gate = std::make_shared<tool_gate>();
  auto unused_gate = std::make_shared<tool_gate>();
  serving_node held(mock, gate);
  serving_node control(mock, unused_gate);

  // Warm up (first connections, first conversations, the SQLite pages).
  latencies warm;
  for (int i = 0; i < 20; ++i) {
    probe_once(held.port(), held.token(), warm);
    probe_once(control.port(), control.token(), warm);
  }
  REQUIRE(warm.failures == 0);

  constexpr std::size_t attempts = 3;
  bool within = false;
  for (std::size_t attempt = 1; attempt <= attempts && !within; ++attempt) {
    // The held run, in the background; the probes start once its tool holds its thread.
    auto held_run = std::async(std::launch::async, [port = held.port(), token = held.token()] {
      raw_client c(port);
      c.send(request("POST", "/api/v1/chat", token,
                     R"({"agent":"worker","message":"hold the line"})"));
      return c.read_until_closed(120s);
    });
    const bool entered = gate->entered.wait_for(attempt, 30s);
    latencies with_hold;
    latencies without;
    if (entered) {
      probe_both_for(held.port(), control.port(), held.token(), control.token(), 2s, with_hold,
                     without);
    }
    gate->release();
    const auto answer = held_run.get();
    INFO("attempt " << attempt << ": " << answer);
    REQUIRE(entered);
    REQUIRE(status_of(answer) == 200);
    CHECK(json_field(body_of(answer), "content") == "let go");
    CHECK_THAT(body_of(answer), Catch::Contains(R"("name":"hold","status":"success")"));
    CHECK(with_hold.failures == 0);
    CHECK(without.failures == 0);
    REQUIRE(with_hold.health_ms.size() >= 20); // the 2 s were probed, not skipped

    const auto health_added = p99(with_hold.health_ms) - p99(without.health_ms);
    const auto stream_added = p99(with_hold.stream_ms) - p99(without.stream_ms);
    within = health_added < 5.0 && stream_added < 5.0;
    if (!within) {
      WARN("attempt " << attempt << ": healthz p99 " << p99(without.health_ms) << " ms without, "
                      << p99(with_hold.health_ms)
                      << " ms with the tool holding its thread; streamed chat p99 "
                      << p99(without.stream_ms) << " ms without, " << p99(with_hold.stream_ms)
                      << " ms with (" << with_hold.stream_ms.size() << " rounds)");
    }
  }
  CHECK(within);
  // Every call did block a thread for 2 s, and never a shard's.
  CHECK(gate->shortest_hold() >= 2s);
  CHECK_FALSE(gate->held_on_shard());
}
