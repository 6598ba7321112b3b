#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <thread>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "actors/run_fixture.hpp"
#include "troupe/actors/store_writer.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
using storage::run_status;

namespace {

std::string tool_output(const actors::run_result& r, std::string_view tool) {
  for (const auto& s : r.steps) {
    if (s.kind == "tool" && s.name == tool) {
      return s.detail;
    }
  }
  return {};
}

void put_file(const std::filesystem::path& p, std::string_view text) {
  std::ofstream out(p);
  out << text;
}

/// A concurrency-safe tool that waits `ms` milliseconds and answers with its tag.
class slow_tool final : public tools::tool {
public:
  slow_tool() {
    descriptor_.name = "slow";
    descriptor_.description = "Waits, then echoes the tag.";
    descriptor_.input_schema =
        R"({"type":"object","properties":{"ms":{"type":"integer"},"tag":{"type":"string"}},"required":["ms","tag"]})";
    descriptor_.concurrency_safe = true;
  }
  const tools::tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  boost::asio::awaitable<tools::tool_result> invoke(std::string arguments,
                                                    tools::tool_context) const override {
    const auto at = arguments.find("\"ms\":");
    const auto ms = std::atoi(arguments.c_str() + at + 5);
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor,
                                    std::chrono::milliseconds(ms));
    co_await timer.async_wait(boost::asio::use_awaitable);
    const auto tag_at = arguments.find("\"tag\":\"") + 7;
    co_return tools::tool_result{
        true, "tag " + arguments.substr(tag_at, arguments.find('"', tag_at) - tag_at), {}, {}};
  }

private:
  tools::tool_descriptor descriptor_;
};

/// True when a process's command line matches `pattern`. Write the pattern so that it does
/// not match itself ("[s]leep 1"): the shell running pgrep carries it in its own command.
bool process_running(const std::string& pattern) {
  const std::string cmd = "pgrep -f '" + pattern + "' > /dev/null";
  return std::system(cmd.c_str()) == 0;
}

} // namespace

TEST_CASE("the finish tool ends a run after one LLM call", "[actors][run]") {
  run_world w(R"([{"match":{"call":1},"reply":{"tool_calls":[{"name":"finish",
      "arguments":{"answer":"The capital of France is Paris."}}]}}])");
  auto r = w.run(w.spec("What is the capital of France?", {"finish"}));
  CHECK(r.status == run_status::succeeded);
  CHECK(r.text == "The capital of France is Paris.");
  CHECK(w.llm_calls() == 1);
  CHECK(r.llm_calls == 1);
}

TEST_CASE("an empty final answer is rejected and then corrected in three LLM calls",
          "[actors][run][harness]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"text":""}},
    {"match":{"call":2},"reply":{"tool_calls":[{"name":"finish","arguments":{"answer":""}}]}},
    {"match":{"call":3},"reply":{"text":"The answer is 42."}}])");
  auto r = w.run(w.spec("What is six times seven?", {"finish"}));
  CHECK(r.status == run_status::succeeded);
  CHECK(r.text == "The answer is 42.");
  CHECK(w.llm_calls() == 3);
  CHECK(has_step(r, "recover_llm_round"));
  const auto* gate = find_step(r, "correct_pre_final");
  REQUIRE(gate);
  CHECK_THAT(gate->detail, Catch::Contains("final_answer_empty"));
}

TEST_CASE("a progress-only final answer is rejected and the run continues",
          "[actors][run][harness]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"text":"I will now compute the sum and get back to you."}},
    {"match":{"call":2},"reply":{"text":"The sum is 10."}}])");
  auto r = w.run(w.spec("What is 4 + 6?"));
  CHECK(r.status == run_status::succeeded);
  CHECK(r.text == "The sum is 10.");
  CHECK(w.llm_calls() == 2);
  CHECK(has_step(r, "continue_execution"));
  // The candidate was streamed, so subscribers were told to discard it.
  CHECK(w.events->wait_for("model.correction", 1));
}

TEST_CASE("a claimed file without an artifact is rejected", "[actors][run][harness]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"text":"Done: I saved the summary to report.md."}},
    {"match":{"call":2},"reply":{"tool_calls":[{"name":"write",
        "arguments":{"path":"report.md","content":"# Summary\nAll good.\n"}}]}},
    {"match":{"call":3},"reply":{"text":"Done: the summary is in report.md."}}])");
  auto r = w.run(w.spec("Write a short summary and save it to report.md", {"write", "finish"}));
  const auto* first = find_step(r, "validate_pre_final");
  REQUIRE(first);
  CHECK_THAT(first->detail, Catch::Contains("required_artifact_missing"));
  CHECK(r.status == run_status::succeeded);
  CHECK(w.llm_calls() == 3);
  REQUIRE(r.artifacts.size() == 1);
  CHECK_THAT(r.artifacts[0].path, Catch::Contains("report.md"));
}

TEST_CASE("a failed plan item counts as terminal for the final answer", "[actors][run][harness]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]}},
    {"match":{"call":2},"reply":{"tool_calls":[{"name":"plan","arguments":{"action":"set",
        "items":[{"id":"1","title":"Inspect the workspace","status":"completed"},
                 {"id":"2","title":"Fix the build","status":"failed","reason":"no compiler"},
                 {"id":"3","title":"Deliver the answer","status":"completed"}]}}]}},
    {"match":{"call":3},"reply":{"text":"I inspected the workspace; fixing the build failed because there is no compiler."}}])");
  auto spec = w.spec("Investigate and fix the failing build, then run tests",
                     {"ls", "exec", "plan", "finish"});
  auto r = w.run(std::move(spec));
  CHECK(has_step(r, "bootstrap_plan"));
  CHECK(r.status == run_status::succeeded);
  CHECK(w.llm_calls() == 3);
  const auto* gate = find_step(r, "validate_pre_final");
  REQUIRE(gate);
  CHECK_THAT(gate->detail, !Catch::Contains("plan_not_terminal"));
}

TEST_CASE("corrections stop at the budget with an explicit failure message",
          "[actors][run][harness]") {
  run_world w(R"([{"reply":{"text":"I will now start working on it."}}])");
  auto r = w.run(w.spec("What is 2 + 2?"));
  CHECK(r.status == run_status::failed);
  // Two corrections are sent (the default budget); the third rejection fails the run.
  CHECK(w.llm_calls() == 3);
  CHECK_THAT(r.error, Catch::Contains("final_answer_incomplete_progress"));
  CHECK(w.events->wait_for("run.failed", 1));
}

TEST_CASE("a truncated tool call is never executed", "[actors][run][harness]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"write",
        "arguments":{"path":"cut.txt","content":"should not exist"}}],"finish_reason":"length"}},
    {"match":{"call":2},"reply":{"text":"Hello there."}}])");
  auto r = w.run(w.spec("Say hello", {"write"}));
  CHECK(r.status == run_status::succeeded);
  CHECK(w.llm_calls() == 2);
  CHECK(has_step(r, "recover_llm_round"));
  CHECK(step_names(r, "tool").empty());
  CHECK_FALSE(std::filesystem::exists(w.workspace.path() / "cut.txt"));
}

TEST_CASE("a transient provider error switches to the fallback model and keeps it",
          "[actors][run]") {
  run_world w(R"([
    {"match":{"call":1},"fault":"500"},
    {"match":{"call":2},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]}},
    {"match":{"call":3},"reply":{"text":"The workspace is empty."}}])");
  auto spec = w.spec("List the workspace", {"ls"});
  spec.agent.fallback_model = "m-fallback";
  auto r = w.run(std::move(spec));
  CHECK(r.status == run_status::succeeded);
  CHECK(w.llm_calls() == 3);
  CHECK(r.model == "m-fallback");
  REQUIRE(has_step(r, "switch_to_fallback_model"));
  std::vector<std::string> models;
  for (const auto& s : r.steps) {
    if (s.name == "llm_round" && s.status == "done") {
      CHECK_THAT(s.detail, Catch::Contains(R"("model":"m-fallback")"));
      models.push_back(s.detail);
    }
  }
  CHECK(models.size() == 2);
}

TEST_CASE("a call of an unknown tool is answered with the tools that exist", "[actors][run]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"teleport","arguments":{}}]}},
    {"match":{"call":2},"reply":{"text":"There is no teleport tool, so I cannot do that."}}])");
  auto r = w.run(w.spec("Teleport me", {"ls", "finish"}));
  CHECK(r.status == run_status::succeeded);
  CHECK(w.llm_calls() == 2);
  REQUIRE(r.steps.size() > 1);
  const auto* step = find_step(r, "teleport");
  REQUIRE(step);
  CHECK(step->status == "blocked");
  CHECK_THAT(step->detail, Catch::Contains("unknown tool 'teleport'"));
  CHECK_THAT(step->detail, Catch::Contains("ls"));
}

TEST_CASE("a run goes through several tool rounds before its answer", "[actors][run]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]}},
    {"match":{"call":2},"reply":{"tool_calls":[{"name":"read","arguments":{"file_path":"notes.txt"}}]}},
    {"match":{"call":3},"reply":{"text":"The notes say: remember the milk."}}])");
  put_file(w.workspace.path() / "notes.txt", "remember the milk\n");
  auto r = w.run(w.spec("What do my notes say?", {"ls", "read"}));
  CHECK(r.status == run_status::succeeded);
  CHECK(r.rounds == 3);
  CHECK(step_names(r, "tool") == std::vector<std::string>{"ls", "read"});
  CHECK_THAT(tool_output(r, "read"), Catch::Contains("remember the milk"));
  // Every gate decision is a step, clean passes included: one pre- and one post-tool
  // decision per tool round, then the final gates.
  CHECK(step_names(r, "harness") ==
        std::vector<std::string>{"validate_pre_tool", "validate_post_tool", "validate_pre_tool",
                                 "validate_post_tool", "validate_pre_final", "validate_pre_save"});
}

TEST_CASE("every event has the version, run id, turn id, a sequence and a timestamp",
          "[actors][run][events]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]}},
    {"match":{"call":2},"reply":{"text":"Nothing here."}}])");
  auto spec = w.spec("List the workspace", {"ls"});
  const auto run_id = spec.run_id;
  const auto turn_id = spec.turn_id;
  auto r = w.run(std::move(spec));
  REQUIRE(r.status == run_status::succeeded);
  REQUIRE(w.events->wait_for("run.completed", 1));
  auto events = w.events->snapshot();
  REQUIRE(events.size() >= 5);
  CHECK(events.front().type_name() == "run.started");
  CHECK(events.back().type_name() == "run.completed");
  std::uint64_t seq = 0;
  for (const auto& e : events) {
    CHECK(e.version == run_event_version);
    CHECK(e.run_id == run_id);
    CHECK(e.turn_id == turn_id);
    CHECK(e.created_at > 1'600'000'000'000);
    CHECK(e.seq == seq + 1);
    seq = e.seq;
  }
  CHECK(w.events->has("model.delta"));
  CHECK(w.events->has("action.started"));
  CHECK(w.events->has("action.finished"));
  CHECK(w.events->has("harness.validate_pre_final"));
}

TEST_CASE("parallel tool calls run together and their results stay in call order",
          "[actors][run]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[
        {"name":"slow","arguments":{"ms":400,"tag":"a"}},
        {"name":"slow","arguments":{"ms":10,"tag":"b"}},
        {"name":"slow","arguments":{"ms":150,"tag":"c"}}]}},
    {"match":{"call":2},"reply":{"text":"Tags a, b and c came back."}}])");
  auto registry = std::make_shared<tools::tool_registry>();
  REQUIRE(registry->add(std::make_shared<slow_tool>()));
  auto spec = w.spec("Collect the tags", {"slow"});
  spec.io.tools = registry;
  auto r = w.run(std::move(spec));
  REQUIRE(r.status == run_status::succeeded);
  // Results (steps and tool messages) in call order …
  std::vector<std::string> outputs;
  for (const auto& s : r.steps) {
    if (s.kind == "tool") {
      outputs.push_back(s.detail);
    }
  }
  CHECK(outputs == std::vector<std::string>{"tag a", "tag b", "tag c"});
  // … while the calls finished in the order their waits ended: they ran in parallel.
  REQUIRE(w.events->wait_for("action.finished", 3));
  std::vector<std::string> finished;
  for (const auto& e : w.events->snapshot()) {
    if (e.type_name() == "action.finished") {
      finished.push_back(e.data_json);
    }
  }
  REQUIRE(finished.size() == 3);
  CHECK_THAT(finished[0], Catch::Contains("tag b"));
  CHECK_THAT(finished[1], Catch::Contains("tag c"));
  CHECK_THAT(finished[2], Catch::Contains("tag a"));
}

TEST_CASE("a sub-agent call is refused at the depth limit", "[actors][run][sub_agent]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"sub_agent",
        "arguments":{"tasks":[{"objective":"look around"}]}}]}},
    {"match":{"call":2},"reply":{"text":"I could not delegate, so here is my own answer: nothing."}}])");
  auto spec = w.spec("Delegate a look around", {"sub_agent", "ls"});
  spec.depth = actors::max_run_depth;
  auto r = w.run(std::move(spec));
  CHECK(r.status == run_status::succeeded);
  CHECK(w.llm_calls() == 2);
  const auto* step = find_step(r, "sub_agent");
  REQUIRE(step);
  CHECK(step->status == "blocked");
  CHECK_THAT(step->detail, Catch::Contains("may not nest deeper than 3"));
}

TEST_CASE("sub-agent tasks run as child runs and their answers return in task order",
          "[actors][run][sub_agent]") {
  run_world w(R"([
    {"match":{"user":"child task alpha"},"reply":{"text":"alpha result"}},
    {"match":{"user":"child task beta"},"reply":{"text":"beta result"}},
    {"match":{"has_tool_result":false},"reply":{"tool_calls":[{"name":"sub_agent",
        "arguments":{"tasks":[{"objective":"child task alpha","mode":"explore","model":"fast"},
                              {"objective":"child task beta"}]}}]}},
    {"match":{"has_tool_result":true},"reply":{"text":"Both sub-agents reported back."}}])");
  auto spec = w.spec("Split the work in two", {"sub_agent", "ls"});
  spec.agent.fast_model = "m1-mini";
  auto r = w.run(std::move(spec));
  CHECK(r.status == run_status::succeeded);
  CHECK(w.llm_calls() == 4);
  const auto out = tool_output(r, "sub_agent");
  CHECK_THAT(out, Catch::Contains("alpha result"));
  CHECK_THAT(out, Catch::Contains("beta result"));
  CHECK(out.find("alpha result") < out.find("beta result"));
}

TEST_CASE("cancelling a run mid-tool stops the tool and its sandboxed process",
          "[actors][run][sandbox]") {
  // A command that would run for 47 s: the cancellation must stop it and its process.
  const std::string long_command = "sleep 47.25";
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"exec",
        "arguments":{"command":")" +
                  long_command + R"("}}]}},
    {"match":{"call":2},"reply":{"text":"unreachable"}}])",
              true);
  auto run = w.spawn(w.spec("Sleep for a while", {"exec"}));
  caf::scoped_actor self{w.system()};
  std::optional<actors::run_result> result;
  // A plain send: the result comes back as an ordinary message, received below.
  self->send(run, actors::run_atom::value);
  REQUIRE(wait_until([] { return process_running("[s]leep 47.25"); }, 10s));
  self->send(run, actors::cancel_atom::value);
  self->receive([&](actors::run_result& r) { result = std::move(r); },
                [&](caf::error& e) { FAIL(caf::to_string(e)); },
                caf::after(std::chrono::seconds(60)) >> [&] { FAIL("no result"); });
  REQUIRE(result);
  CHECK(result->status == run_status::cancelled);
  CHECK(wait_until([] { return !process_running("[s]leep 47.25"); }, 10s));
  CHECK(w.llm_calls() == 1);
}

TEST_CASE("a run persists its messages, one step per round and call, and its status",
          "[actors][run][storage]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]}},
    {"match":{"call":2},"reply":{"text":"The workspace is empty."}}])");
  storage::testing::fresh_db db;
  const auto user = db.add_user("ann");
  const auto agent = db.add_agent();
  const auto conversation = db.add_conversation(user, agent, "c-1");
  storage::run_record row;
  row.uuid = "r-1";
  row.conversation_id = conversation;
  row.agent_id = agent;
  const auto run_row = storage::testing::must(storage::insert_run(db.db, row));
  auto writer = actors::spawn_store_writer(
      w.system(),
      std::make_shared<storage::connection>(
          storage::testing::must(storage::open_writer(db.dir.db(), storage::sync_mode::normal))),
      {});
  auto spec = w.spec("List the workspace", {"ls"});
  spec.run_row = run_row;
  spec.conversation_row = conversation;
  spec.io.writer = writer;
  auto r = w.run(std::move(spec));
  REQUIRE(r.status == run_status::succeeded);
  auto stored = storage::testing::must(storage::find_run(db.db, run_row));
  CHECK(stored.status == run_status::succeeded);
  auto messages = storage::testing::must(storage::list_messages(db.db, conversation));
  std::vector<std::string> roles;
  for (const auto& m : messages) {
    roles.push_back(m.role);
  }
  CHECK(roles == std::vector<std::string>{"user", "assistant", "tool", "assistant"});
  CHECK(messages.back().content == "The workspace is empty.");
  auto steps = storage::testing::must(storage::list_steps(db.db, run_row));
  std::size_t llm = 0;
  std::size_t tool = 0;
  for (const auto& s : steps) {
    llm += s.kind == "llm" ? 1u : 0u;
    tool += s.kind == "tool" ? 1u : 0u;
  }
  CHECK(llm == 2);
  CHECK(tool == 1);
  CHECK(steps.size() == r.steps.size());
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
}

TEST_CASE("a tool that outlives its timeout is stopped and reported as timed out",
          "[actors][run]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"slow","arguments":{"ms":30000,"tag":"late"}}]}},
    {"match":{"call":2},"reply":{"text":"The slow tool timed out, so I have no tag."}}])");
  auto registry = std::make_shared<tools::tool_registry>();
  REQUIRE(registry->add(std::make_shared<slow_tool>()));
  auto spec = w.spec("Collect the tag", {"slow"});
  spec.io.tools = registry;
  spec.tool_timeout = 200ms;
  auto r = w.run(std::move(spec));
  CHECK(r.status == run_status::succeeded);
  const auto* step = find_step(r, "slow");
  REQUIRE(step);
  CHECK(step->status == "error");
  CHECK_THAT(step->detail, Catch::Contains("did not finish within 200 ms"));
}
