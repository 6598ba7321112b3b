#pragma once

// A run actor's world for tests: mock-llm on loopback with a script, an io thread with
// an http client, the built-in tools, a real sandbox, a workspace directory, a CAF
// actor system and a subscriber that records every event.

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "storage/storage_fixture.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/run.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/tools/builtin_tools.hpp"

namespace troupe::test {

/// Every event a subscriber received, thread-safe.
struct event_log {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<run_event> events;

  void add(run_event e) {
    {
      std::lock_guard lock(mutex);
      events.push_back(std::move(e));
    }
    arrived.notify_all();
  }

  std::vector<run_event> snapshot() {
    std::lock_guard lock(mutex);
    return events;
  }
  std::size_t count(const std::string& type_name) {
    std::lock_guard lock(mutex);
    return count_locked(type_name);
  }
  /// Waits (up to 5 s) until `n` events of the type arrived: events travel through other
  /// actors and may trail a run's result.
  bool wait_for(const std::string& type_name, std::size_t n) {
    std::unique_lock lock(mutex);
    return arrived.wait_for(lock, std::chrono::seconds(5),
                            [&] { return count_locked(type_name) >= n; });
  }
  bool has(const std::string& type_name) {
    std::lock_guard lock(mutex);
    return count_locked(type_name) > 0;
  }

private:
  std::size_t count_locked(const std::string& type_name) const {
    std::size_t n = 0;
    for (const auto& e : events) {
      n += e.type_name() == type_name ? 1u : 0u;
    }
    return n;
  }
};

inline actors::run_event_sink::behavior_type event_recorder(std::shared_ptr<event_log> log) {
  return {[log](actors::event_atom, run_event& e) { log->add(std::move(e)); }};
}

inline mock::mock_llm_options script(std::string_view json) {
  mock::mock_llm_options options;
  auto rules = mock::parse_mock_script(json);
  if (!rules) {
    throw std::runtime_error(rules.error().message);
  }
  options.rules = std::move(*rules);
  return options;
}

class run_world {
public:
  explicit run_world(std::string_view mock_script, bool with_sandbox = false)
      : mock(script(mock_script)), guard_(io_.get_executor()),
        http_(std::make_unique<net::http_client>(io_.get_executor())), system_(config_) {
    auto registry = std::make_shared<tools::tool_registry>();
    if (auto ok = tools::register_builtin_tools(*registry); !ok) {
      throw std::runtime_error(ok.error().message);
    }
    tools = registry;
    if (with_sandbox) {
      sandbox = std::make_shared<tools::sandbox_runner>();
    }
    thread_ = std::thread([this] { io_.run(); });
  }
  ~run_world() {
    // Actors of the test may still be ending and use the client (a run a refused message
    // started, a conversation told to stop): they end first, as the node's do.
    system_.await_all_actors_done();
    // The client lives on the io thread: destroy it there.
    std::promise<void> gone;
    asio::post(io_, [this, &gone] {
      http_.reset();
      gone.set_value();
    });
    gone.get_future().wait();
    guard_.reset();
    io_.stop();
    thread_.join();
  }
  run_world(const run_world&) = delete;
  run_world& operator=(const run_world&) = delete;

  /// A spec for agent "tester" on the mock with the given tools.
  actors::run_spec spec(std::string objective, std::vector<std::string> agent_tools = {}) {
    actors::run_spec s;
    s.run_id = "run-" + std::to_string(++runs_);
    s.turn_id = "turn-" + std::to_string(runs_);
    s.agent.name = "tester";
    s.agent.provider = "mock";
    s.agent.model = "m1";
    s.agent.system_prompt = "You are a test agent.";
    s.agent.tools = std::move(agent_tools);
    s.agent.timeout = std::chrono::seconds(60);
    s.provider.type = net::provider_type::openai_compatible;
    s.provider.base_url = mock.base_url();
    s.provider.api_key = "test";
    s.provider.retry.max_attempts = 1;
    s.objective = std::move(objective);
    s.workspace = workspace.path();
    s.io.http = http_.get();
    s.io.tools = tools;
    s.io.sandbox = sandbox;
    return s;
  }

  /// Spawns a run with an event recorder.
  actors::run_actor spawn(actors::run_spec s) {
    auto recorder = system_.spawn(event_recorder, events);
    return actors::spawn_run(system_, std::move(s), recorder);
  }

  /// Starts `run` and waits for its result.
  actors::run_result await(const actors::run_actor& run,
                           std::chrono::seconds timeout = std::chrono::seconds(60)) {
    caf::scoped_actor self{system_};
    std::optional<actors::run_result> out;
    self->request(run, timeout, actors::run_atom::value)
        .receive([&](actors::run_result& r) { out = std::move(r); },
                 [&](caf::error& e) { FAIL("the run did not answer: " << caf::to_string(e)); });
    return std::move(*out);
  }

  actors::run_result run(actors::run_spec s) {
    return await(spawn(std::move(s)));
  }

  std::uint64_t llm_calls() const {
    return mock.stats().completion_requests;
  }

  caf::actor_system& system() {
    return system_;
  }
  net::http_client* http() {
    return http_.get();
  }

  mock_llm_fixture mock;
  storage::testing::temp_dir workspace;
  std::shared_ptr<const tools::tool_registry> tools;
  std::shared_ptr<const tools::sandbox_runner> sandbox;
  std::shared_ptr<event_log> events = std::make_shared<event_log>();

private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::unique_ptr<net::http_client> http_;
  std::thread thread_;
  caf::actor_system_config config_;
  caf::actor_system system_;
  int runs_ = 0;
};

/// Waits up to `deadline` for `actor` to end: its exit reason (an empty error when it quit
/// on its own), or nullopt when it is still alive at the deadline.
template <class Handle>
std::optional<caf::error> wait_for_exit(caf::actor_system& system, const Handle& actor,
                                        std::chrono::milliseconds deadline) {
  caf::scoped_actor self{system};
  self->monitor(actor);
  std::optional<caf::error> reason;
  self->receive([&](caf::down_msg& down) { reason = std::move(down.reason); },
                caf::after(deadline) >> [] {});
  return reason;
}

/// Names of the steps of kind `kind`, in order.
inline std::vector<std::string> step_names(const actors::run_result& r, std::string_view kind) {
  std::vector<std::string> out;
  for (const auto& s : r.steps) {
    if (s.kind == kind) {
      out.push_back(s.name);
    }
  }
  return out;
}

inline bool has_step(const actors::run_result& r, std::string_view name) {
  for (const auto& s : r.steps) {
    if (s.name == name) {
      return true;
    }
  }
  return false;
}

inline const actors::run_step* find_step(const actors::run_result& r, std::string_view name) {
  for (const auto& s : r.steps) {
    if (s.name == name) {
      return &s;
    }
  }
  return nullptr;
}

} // namespace troupe::test
