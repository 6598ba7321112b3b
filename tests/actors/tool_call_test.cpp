// The tool_call actor: one per tool call; its timeout, cancellation, and the call's
// fate when its run goes away.

#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "support/event_count.hpp"
#include "troupe/actors/run.hpp"
#include "troupe/actors/tool_call.hpp"

using namespace troupe;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

/// What the tool saw: each call it started and each time it was cancelled.
struct tool_signals {
  test::event_count started;
  test::event_count cancelled;
};

/// Waits `wait` on a timer and answers "woke"; reports when it starts and when it is
/// cancelled instead.
class sleepy_tool final : public tools::tool {
public:
  explicit sleepy_tool(std::chrono::milliseconds wait, tool_signals& signals)
      : wait_(wait), signals_(signals) {
    descriptor_.name = "sleepy";
    descriptor_.input_schema = R"({"type":"object"})";
  }
  const tools::tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  asio::awaitable<tools::tool_result> invoke(std::string, tools::tool_context) const override {
    asio::steady_timer timer(co_await asio::this_coro::executor, wait_);
    signals_.started.raise();
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      signals_.cancelled.raise();
      co_return tools::tool_failure("cancelled", "stopped");
    }
    co_return tools::tool_result{true, "woke", {}, {}};
  }

private:
  tools::tool_descriptor descriptor_;
  std::chrono::milliseconds wait_;
  tool_signals& signals_;
};

struct world {
  world() : guard(io.get_executor()), system(config) {
    thread = std::thread([this] { io.run(); });
  }
  ~world() {
    guard.reset();
    io.stop();
    thread.join();
  }
  actors::tool_call_spec spec(std::chrono::milliseconds wait, std::chrono::milliseconds timeout) {
    actors::tool_call_spec s;
    s.impl = std::make_shared<sleepy_tool>(wait, signals);
    s.arguments = "{}";
    s.executor = io.get_executor();
    s.timeout = timeout;
    return s;
  }
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  std::thread thread;
  caf::actor_system_config config;
  caf::actor_system system;
  tool_signals signals;
};

tools::tool_result call(world& w, const actors::tool_call_actor& actor) {
  caf::scoped_actor self{w.system};
  tools::tool_result out;
  self->request(actor, std::chrono::seconds(10), actors::run_atom::value)
      .receive([&](tools::tool_result& r) { out = std::move(r); },
               [&](caf::error& e) { out = tools::tool_failure("error", caf::to_string(e)); });
  return out;
}

} // namespace

TEST_CASE("a tool_call answers with the tool's result", "[actors][tool_call]") {
  world w;
  auto actor = actors::spawn_tool_call(w.system, w.spec(10ms, 5s), caf::actor_addr{});
  auto r = call(w, actor);
  CHECK(r.ok);
  CHECK(r.content == "woke");
}

TEST_CASE("a tool_call past its timeout cancels the tool and says so", "[actors][tool_call]") {
  world w;
  auto actor = actors::spawn_tool_call(w.system, w.spec(10s, 50ms), caf::actor_addr{});
  auto r = call(w, actor);
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "timeout");
  CHECK(w.signals.cancelled.wait_for(1, 5s));
  CHECK(w.signals.cancelled.value() == 1);
}

TEST_CASE("a tool_call whose run goes away cancels its tool", "[actors][tool_call]") {
  world w;
  auto owner =
      w.system.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](int) {}}; });
  auto actor = actors::spawn_tool_call(w.system, w.spec(10s, 10s), owner.address());
  caf::anon_send(actor, actors::run_atom::value);
  REQUIRE(w.signals.started.wait_for(1, 5s)); // the tool is under way
  caf::anon_send_exit(owner, caf::exit_reason::kill);
  CHECK(w.signals.cancelled.wait_for(1, 5s));
  CHECK(w.signals.cancelled.value() == 1);
}
