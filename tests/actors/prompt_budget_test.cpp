// The run's prompt is cut to the agent's context window, end to end: what the model
// receives is told by mock-llm's rules that match on the prompt's text.

#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "actors/run_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using storage::run_status;

namespace {

/// An earlier conversation whose first turn alone takes about 10,000 tokens.
std::vector<chat_message> long_history() {
  return {chat_message{chat_role::user, "ANCIENT-MARKER " + std::string(40'000, 'x'), {}, {}, {}},
          chat_message{chat_role::assistant, "Noted.", {}, {}, {}},
          chat_message{chat_role::user, "A recent question.", {}, {}, {}},
          chat_message{chat_role::assistant, "A recent answer.", {}, {}, {}}};
}

constexpr const char* history_script = R"([
  {"match":{"prompt":"ANCIENT-MARKER"},"reply":{"text":"The ancient turn reached the model."}},
  {"match":{"prompt":"A recent answer.","user":"What now?"},
   "reply":{"text":"Only the recent turns reached the model."}}])";

} // namespace

TEST_CASE("a run leaves out the oldest history that does not fit the context window",
          "[actors][run][prompt]") {
  run_world w(history_script);
  auto spec = w.spec("What now?", {"finish"});
  spec.history = long_history();
  spec.agent.context_window = 4'000;
  auto r = w.run(std::move(spec));
  REQUIRE(r.status == run_status::succeeded);
  CHECK(r.text == "Only the recent turns reached the model.");
  const auto* step = find_step(r, "context_budget");
  REQUIRE(step);
  CHECK_THAT(step->detail, Catch::Contains(R"("dropped_messages":2)"));
  CHECK_THAT(step->detail, Catch::Contains(R"("fits":true)"));
}

TEST_CASE("a run sends the whole history when it fits the default context window",
          "[actors][run][prompt]") {
  run_world w(history_script);
  auto spec = w.spec("What now?", {"finish"});
  spec.history = long_history();
  auto r = w.run(std::move(spec));
  REQUIRE(r.status == run_status::succeeded);
  CHECK(r.text == "The ancient turn reached the model.");
  CHECK(find_step(r, "context_budget") == nullptr);
}

TEST_CASE("a run's own tool rounds are cut whole and oldest first, its objective kept",
          "[actors][run][prompt]") {
  // Two reads of about 5,000 tokens each; the window holds one of them.
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"read","arguments":{"file_path":"first.txt"}}]}},
    {"match":{"call":2},"reply":{"tool_calls":[{"name":"read","arguments":{"file_path":"second.txt"}}]}},
    {"match":{"call":3,"prompt":"FIRST-FILE"},"reply":{"text":"Both files reached the model."}},
    {"match":{"call":3,"prompt":"SECOND-FILE","user":"Read both files"},
     "reply":{"text":"Only the second file reached the model."}}])");
  for (const auto& [name, marker] :
       {std::pair{"first.txt", "FIRST-FILE"}, std::pair{"second.txt", "SECOND-FILE"}}) {
    std::ofstream out(w.workspace.path() / name);
    out << marker << '\n';
    for (int line = 0; line < 100; ++line) {
      out << std::string(200, static_cast<char>('a' + line % 26)) << '\n';
    }
  }
  auto spec = w.spec("Read both files", {"read", "finish"});
  spec.agent.context_window = 8'000;
  auto r = w.run(std::move(spec));
  REQUIRE(r.status == run_status::succeeded);
  CHECK(r.text == "Only the second file reached the model.");
  const auto* step = find_step(r, "context_budget");
  REQUIRE(step);
  // The first round's call and its result went together.
  CHECK_THAT(step->detail, Catch::Contains(R"("dropped_messages":2)"));
}
