#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <thread>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "actors/run_fixture.hpp"
#include "troupe/actors/conversation.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
using storage::run_status;

namespace {

actors::conversation_spec conversation_for(run_world& w, const std::string& id,
                                           queue_policy policy = queue_policy::followup) {
  auto run = w.spec("", {"ls"});
  actors::conversation_spec c;
  c.id = id;
  c.agent = run.agent;
  c.agent.queue = policy;
  c.provider = run.provider;
  c.workspace = run.workspace;
  c.io = run.io;
  return c;
}

/// Sends `text` to `conversation` from a fresh scoped actor and returns the result.
actors::run_result say(caf::actor_system& system, const actors::conversation_actor& conversation,
                       const std::string& text, std::chrono::seconds timeout = 60s) {
  caf::scoped_actor self{system};
  actors::run_result out;
  self->request(conversation, timeout, actors::send_atom::value, text)
      .receive([&](actors::run_result& r) { out = std::move(r); },
               [&](caf::error& e) { out.error = caf::to_string(e); });
  return out;
}

/// `spec`, ready after `delay` (a load that takes a while): what a registry's factory
/// awaits.
boost::asio::awaitable<expected<actors::conversation_spec>>
spec_after(actors::conversation_spec spec, std::chrono::milliseconds delay) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, delay);
  auto waited = timer.async_wait(boost::asio::use_awaitable);
  co_await std::move(waited);
  co_return spec;
}

/// A registry factory that loads `make(id)` on `w`'s io thread, taking `delay`, and
/// counts its loads in `loads`.
actors::conversation_factory
loading_factory(run_world& w, std::function<actors::conversation_spec(const std::string&)> make,
                std::shared_ptr<std::atomic<int>> loads,
                std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
  actors::conversation_factory f;
  f.take_prepared = [](caf::actor_system&, const std::string&) {
    return actors::conversation_actor{};
  };
  f.load = [make = std::move(make), loads, delay](std::string id) {
    ++*loads;
    return spec_after(make(id), delay);
  };
  f.executor = [&w]() -> boost::asio::any_io_executor { return w.http()->get_executor(); };
  return f;
}

} // namespace

TEST_CASE("concurrent first messages to a new conversation create one conversation actor",
          "[actors][conversation][registry]") {
  run_world w(R"([{"reply":{"text":"hello"}}])");
  auto spawned = std::make_shared<std::atomic<int>>(0);
  // The load takes 50 ms: the other requests arrive while it runs, and wait for it.
  actors::conversation_registry registry(
      w.system(),
      loading_factory(
          w, [&w](const std::string& id) { return conversation_for(w, id); }, spawned, 50ms));
  std::vector<actors::conversation_actor> seen(8);
  std::vector<std::thread> askers;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    askers.emplace_back([&, i] {
      caf::scoped_actor self{w.system()};
      self->request(registry.shard_for("c-new"), 10s, actors::get_atom::value, std::string("c-new"))
          .receive([&](actors::conversation_actor& a) { seen[i] = a; }, [](caf::error&) {});
    });
  }
  for (auto& t : askers) {
    t.join();
  }
  CHECK(spawned->load() == 1);
  for (const auto& a : seen) {
    REQUIRE(a);
    CHECK(a == seen.front());
  }
  for (const auto& a : seen) {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("a message arriving mid-run is processed after the run (followup)",
          "[actors][conversation]") {
  run_world w(R"([
    {"match":{"user":"first"},"reply":{"text":"first answer"},"ttft_ms":300},
    {"match":{"user":"second"},"reply":{"text":"second answer"}}])");
  auto conversation = actors::spawn_conversation(w.system(), conversation_for(w, "c-1"));
  auto recorder = w.system().spawn(event_recorder, w.events);
  caf::anon_send(conversation, actors::subscribe_atom::value, recorder);
  caf::scoped_actor self{w.system()};
  self->send(conversation, actors::send_atom::value, std::string("first message"));
  self->send(conversation, actors::send_atom::value, std::string("second message"));
  std::vector<std::string> answers;
  for (int i = 0; i < 2; ++i) {
    self->receive([&](actors::run_result& r) { answers.push_back(r.text); },
                  caf::after(60s) >> [] { FAIL("no answer"); });
  }
  CHECK(answers == std::vector<std::string>{"first answer", "second answer"});
  CHECK(w.llm_calls() == 2);
  // The second run started only after the first had completed.
  REQUIRE(w.events->wait_for("run.completed", 2));
  std::vector<std::string> lifecycle;
  for (const auto& e : w.events->snapshot()) {
    if (e.type == run_event_type::run_started || e.type == run_event_type::run_completed) {
      lifecycle.push_back(e.type_name() + " " + e.turn_id);
    }
  }
  CHECK(lifecycle == std::vector<std::string>{"run.started c-1.turn1", "run.completed c-1.turn1",
                                              "run.started c-1.turn2", "run.completed c-1.turn2"});
  caf::anon_send_exit(conversation, caf::exit_reason::user_shutdown);
}

TEST_CASE("messages arriving mid-run are collected into one follow-up run (collect)",
          "[actors][conversation]") {
  run_world w(R"([
    {"match":{"user":"first"},"reply":{"text":"first answer"},"ttft_ms":300},
    {"match":{"user":"third"},"reply":{"text":"second and third answered together"}}])");
  auto conversation =
      actors::spawn_conversation(w.system(), conversation_for(w, "c-2", queue_policy::collect));
  caf::scoped_actor self{w.system()};
  for (const char* text : {"first message", "second message", "third message"}) {
    self->send(conversation, actors::send_atom::value, std::string(text));
  }
  std::vector<std::string> answers;
  for (int i = 0; i < 3; ++i) {
    self->receive([&](actors::run_result& r) { answers.push_back(r.text); },
                  caf::after(60s) >> [] { FAIL("no answer"); });
  }
  CHECK(answers == std::vector<std::string>{"first answer", "second and third answered together",
                                            "second and third answered together"});
  CHECK(w.llm_calls() == 2);
  caf::anon_send_exit(conversation, caf::exit_reason::user_shutdown);
}

TEST_CASE("an idle conversation passivates and the registry spawns it again",
          "[actors][conversation][registry]") {
  run_world w(R"([{"reply":{"text":"hello"}}])");
  auto spawned = std::make_shared<std::atomic<int>>(0);
  actors::conversation_registry registry(w.system(), loading_factory(
                                                         w,
                                                         [&w](const std::string& id) {
                                                           auto spec = conversation_for(w, id);
                                                           spec.idle_ttl = 100ms;
                                                           return spec;
                                                         },
                                                         spawned));
  caf::scoped_actor self{w.system()};
  auto get = [&] {
    actors::conversation_actor out;
    self->request(registry.shard_for("c-idle"), 10s, actors::get_atom::value, std::string("c-idle"))
        .receive([&](actors::conversation_actor& a) { out = a; }, [](caf::error&) {});
    return out;
  };
  auto first = get();
  REQUIRE(first);
  CHECK(say(w.system(), first, "hi").text == "hello");
  // It quits on its own (an empty exit reason) once idle for 100 ms.
  const auto reason = wait_for_exit(w.system(), first, 10s);
  REQUIRE(reason.has_value());
  CHECK_FALSE(*reason);
  // The registry saw it go (its down message may trail ours by a moment).
  actors::conversation_actor second;
  CHECK(wait_until(
      [&] {
        second = get();
        return second && second != first;
      },
      5s));
  CHECK(second != first);
  CHECK(spawned->load() == 2);
  CHECK(say(w.system(), second, "hi again").text == "hello");
  caf::anon_send_exit(second, caf::exit_reason::user_shutdown);
}

TEST_CASE("a message arriving mid-run cancels the run and runs next (interrupt)",
          "[actors][conversation]") {
  run_world w(R"([
    {"match":{"user":"first"},"reply":{"text":"first answer"},"ttft_ms":3000},
    {"match":{"user":"second"},"reply":{"text":"second answer"}}])");
  auto conversation =
      actors::spawn_conversation(w.system(), conversation_for(w, "c-3", queue_policy::interrupt));
  caf::scoped_actor self{w.system()};
  self->send(conversation, actors::send_atom::value, std::string("first message"));
  // The second message arrives while the first run waits for its model answer.
  REQUIRE(wait_until([&] { return w.llm_calls() == 1; }, 10s));
  self->send(conversation, actors::send_atom::value, std::string("second message"));
  std::vector<actors::run_result> results;
  for (int i = 0; i < 2; ++i) {
    self->receive([&](actors::run_result& r) { results.push_back(std::move(r)); },
                  caf::after(60s) >> [] { FAIL("no answer"); });
  }
  REQUIRE(results.size() == 2);
  CHECK(results[0].status == run_status::cancelled);
  CHECK(results[1].status == run_status::succeeded);
  CHECK(results[1].text == "second answer");
  caf::anon_send_exit(conversation, caf::exit_reason::user_shutdown);
}

TEST_CASE("a message arriving mid-run steers the run's next round (steer)",
          "[actors][conversation]") {
  run_world w(R"([
    {"match":{"user":"also mention bananas"},"reply":{"text":"Fruit listed, bananas included."}},
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]},"ttft_ms":400},
    {"reply":{"text":"Fruit listed."}}])");
  auto conversation =
      actors::spawn_conversation(w.system(), conversation_for(w, "c-4", queue_policy::steer));
  caf::scoped_actor self{w.system()};
  self->send(conversation, actors::send_atom::value, std::string("list the fruit"));
  // The steer arrives while the first round waits 400 ms for its model answer.
  REQUIRE(wait_until([&] { return w.llm_calls() == 1; }, 10s));
  self->send(conversation, actors::send_atom::value, std::string("also mention bananas"));
  std::vector<std::string> answers;
  for (int i = 0; i < 2; ++i) {
    self->receive([&](actors::run_result& r) { answers.push_back(r.text); },
                  caf::after(60s) >> [] { FAIL("no answer"); });
  }
  CHECK(answers == std::vector<std::string>{"Fruit listed, bananas included.",
                                            "Fruit listed, bananas included."});
  CHECK(w.llm_calls() == 2);
  caf::anon_send_exit(conversation, caf::exit_reason::user_shutdown);
}

TEST_CASE("stopping the registry ends live conversations and cancels their runs",
          "[actors][conversation][registry]") {
  // The model stalls for a minute after its first chunk: the run is still in flight.
  run_world w(R"([{"reply":{"text":"never finished in time"},"fault":"stall:60000:1"}])");
  actors::conversation_registry registry(
      w.system(), loading_factory(
                      w, [&w](const std::string& id) { return conversation_for(w, id); },
                      std::make_shared<std::atomic<int>>(0)));
  actors::conversation_actor conversation;
  {
    caf::scoped_actor self{w.system()};
    self->request(registry.shard_for("c-stop"), 10s, actors::get_atom::value, std::string("c-stop"))
        .receive([&](actors::conversation_actor& a) { conversation = a; }, [](caf::error&) {});
  }
  REQUIRE(conversation);
  const auto baseline = w.system().registry().running();
  // The sender's promise dies with the conversation (CAF 0.17 reports no broken
  // promise), so it gives up after a short timeout of its own.
  std::thread asker([&] { (void)say(w.system(), conversation, "hello", 3s); });
  // Wait until the model call is under way.
  REQUIRE(wait_until([&] { return w.llm_calls() > 0; }, 10s));
  REQUIRE(w.llm_calls() == 1);
  const auto start = std::chrono::steady_clock::now();
  registry.stop();
  REQUIRE(wait_for_exit(w.system(), conversation, 10s).has_value());
  // The run actor ended too: nothing is left running beyond what was there before.
  CHECK(wait_until([&] { return w.system().registry().running() < baseline; }, 10s));
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  asker.join();
}
