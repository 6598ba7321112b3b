#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "chat_messages.hpp"
#include "troupe/runtime/harness/plan_state.hpp"
#include "troupe/runtime/harness/task_contract.hpp"
#include "troupe/runtime/prompt/prompt_assembly.hpp"
#include "troupe/runtime/prompt/token_estimate.hpp"

using namespace troupe;
using namespace troupe::prompt;
using namespace troupe::test_messages;

namespace {

std::vector<std::string> contents(const std::vector<chat_message>& messages) {
  std::vector<std::string> out;
  for (const auto& m : messages) {
    out.push_back(m.content.empty() && !m.tool_calls.empty() ? "calls:" + m.tool_calls[0].id
                                                             : m.content);
  }
  return out;
}

std::size_t tokens_of(const std::vector<chat_message>& messages) {
  std::size_t n = 0;
  for (const auto& m : messages) {
    n += estimate_tokens(m);
  }
  return n;
}

/// A text of `tokens` estimated tokens (four ASCII characters each).
std::string text_of(std::size_t tokens, char c) {
  return std::string(tokens * 4, c);
}

} // namespace

TEST_CASE("the token estimate counts ASCII characters as a quarter token each",
          "[runtime][prompt]") {
  CHECK(estimate_tokens(std::string_view{}) == 0);
  CHECK(estimate_tokens("abcd") == 1);
  CHECK(estimate_tokens(std::string(400, 'x')) == 100);
  // Partial tokens round up: a budget errs on the safe side.
  CHECK(estimate_tokens("abcde") == 2);
}

TEST_CASE("the token estimate counts CJK characters as two thirds of a token each",
          "[runtime][prompt]") {
  // Six Han characters: 18 bytes of UTF-8, 6 code points, 4 tokens.
  CHECK(estimate_tokens("你好世界你好") == 4);
  // Kana and Hangul are CJK too.
  CHECK(estimate_tokens("こんにちは") == 4); // 5 * 2/3 = 3.33 -> 4
  CHECK(estimate_tokens("안녕하세요") == 4);
  // Mixed: 3 CJK (2 tokens) + 8 ASCII (2 tokens).
  CHECK(estimate_tokens("abcdefgh中文字") == 4);
  CHECK(is_cjk(U'中'));
  CHECK(is_cjk(U'。'));
  CHECK_FALSE(is_cjk(U'a'));
  CHECK_FALSE(is_cjk(U'é'));
}

TEST_CASE("the token estimate counts code points, not bytes", "[runtime][prompt]") {
  // "é" is two bytes and one character; twelve of them are three tokens, not six.
  std::string accented;
  for (int i = 0; i < 12; ++i) {
    accented += "é";
  }
  CHECK(accented.size() == 24);
  CHECK(estimate_tokens(accented) == 3);
  // An emoji (four bytes) is one character.
  CHECK(estimate_tokens("😀😀😀😀") == 1);
  // Bytes that are not UTF-8 count one character each.
  CHECK(estimate_tokens("\xff\xfe\xfd\xfc") == 1);
}

TEST_CASE("a message's estimate includes its tool calls and a fixed overhead",
          "[runtime][prompt]") {
  CHECK(estimate_tokens(user("abcd")) == 1 + message_overhead_tokens);
  chat_message m{chat_role::assistant, "", {{"c1", "read", "{\"file_path\":\"a\"}"}}, {}, {}};
  CHECK(estimate_tokens(m) ==
        estimate_tokens("c1read{\"file_path\":\"a\"}") + message_overhead_tokens);
}

TEST_CASE("the system message holds the prompt, then the memory block, then the plan state",
          "[runtime][prompt]") {
  context_blocks blocks;
  REQUIRE(blocks.set(plan_block, "<plan_state>\nplan\n</plan_state>"));
  REQUIRE(blocks.set(memory_block, "<memory_context>\nfacts\n</memory_context>"));
  std::vector<chat_message> history{user("hi"), assistant("hello"), user("again")};
  auto p = assemble_prompt({"You are a test agent.", &blocks, history, {}, {}});
  REQUIRE(p.messages.size() == 4);
  CHECK(p.messages[0].role == chat_role::system);
  CHECK(p.messages[0].content == "You are a test agent.\n\n<memory_context>\nfacts\n"
                                 "</memory_context>\n\n<plan_state>\nplan\n</plan_state>");
  CHECK(contents({p.messages.begin() + 1, p.messages.end()}) ==
        std::vector<std::string>{"hi", "hello", "again"});
  CHECK(p.dropped_messages == 0);
  CHECK(p.estimated_tokens == tokens_of(p.messages));
  CHECK(p.fits());
}

TEST_CASE("absent blocks leave no trace in the system message", "[runtime][prompt]") {
  context_blocks blocks;
  std::vector<chat_message> history{user("hi")};
  SECTION("only the system prompt") {
    auto p = assemble_prompt({"Be brief.", &blocks, history, {}, {}});
    CHECK(p.messages[0].content == "Be brief.");
  }
  SECTION("only the plan state, without a system prompt") {
    REQUIRE(blocks.set(plan_block, "<plan_state>x</plan_state>"));
    auto p = assemble_prompt({"", &blocks, history, {}, {}});
    CHECK(p.messages[0].content == "<plan_state>x</plan_state>");
  }
  SECTION("nothing at all: no system message") {
    auto p = assemble_prompt({"", nullptr, history, {}, {}});
    REQUIRE(p.messages.size() == 1);
    CHECK(p.messages[0].role == chat_role::user);
  }
  SECTION("a cleared block is absent again") {
    REQUIRE(blocks.set(memory_block, "<memory_context>m</memory_context>"));
    blocks.clear(memory_block);
    auto p = assemble_prompt({"Be brief.", &blocks, history, {}, {}});
    CHECK(p.messages[0].content == "Be brief.");
  }
}

TEST_CASE("the system text is the one the run built inline for a prompt and a plan",
          "[runtime][prompt]") {
  // What run.cpp concatenated before prompt assembly existed: the prompt, a blank line and
  // the rendered plan, or the plan alone.
  harness::task_contract contract;
  contract.require_plan = true;
  auto plan = harness::plan_state::bootstrap(contract);
  REQUIRE_FALSE(plan.render().empty());
  context_blocks blocks;
  REQUIRE(blocks.set(plan_block, plan.render()));
  CHECK(render_system_text("You are a test agent.", blocks) ==
        "You are a test agent.\n\n" + plan.render());
  CHECK(render_system_text("", blocks) == plan.render());
}

TEST_CASE("context block slots are named and ordered", "[runtime][prompt]") {
  context_blocks blocks;
  REQUIRE(blocks.slots().size() == 2);
  CHECK(blocks.slots()[0].name == "memory_context");
  CHECK(blocks.slots()[1].name == "plan_state");
  REQUIRE(blocks.declare("channel_context"));
  REQUIRE(blocks.set("channel_context", "<channel_context>c</channel_context>"));
  REQUIRE(blocks.set(memory_block, "<memory_context>m</memory_context>"));
  CHECK(render_system_text("S", blocks) ==
        "S\n\n<memory_context>m</memory_context>\n\n<channel_context>c</channel_context>");
  auto twice = blocks.declare("plan_state");
  REQUIRE_FALSE(twice);
  CHECK_THAT(twice.error().message, Catch::Contains("plan_state"));
  auto unknown = blocks.set("scratch", "x");
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error().message, Catch::Contains("'scratch'"));
  CHECK(blocks.text("scratch").empty());
}

TEST_CASE("a tool message belongs to the group of the assistant call before it",
          "[runtime][prompt]") {
  std::vector<chat_message> history{user("u1"),        calls({"a", "b"}), result("a", "ra"),
                                    result("b", "rb"), assistant("done"), user("u2"),
                                    calls({"c"}),      result("c", "rc")};
  auto groups = group_history(history);
  REQUIRE(groups.size() == 5);
  CHECK(groups[0].first == 0);
  CHECK(groups[0].count == 1);
  CHECK(groups[1].first == 1);
  CHECK(groups[1].count == 3);
  CHECK(groups[2].first == 4);
  CHECK(groups[3].first == 5);
  CHECK(groups[4].first == 6);
  CHECK(groups[4].count == 2);
  CHECK(groups[1].tokens ==
        estimate_tokens(history[1]) + estimate_tokens(history[2]) + estimate_tokens(history[3]));
}

TEST_CASE("history within the budget is sent whole", "[runtime][prompt]") {
  std::vector<chat_message> history{user(text_of(100, 'a')), assistant(text_of(100, 'b')),
                                    user(text_of(100, 'c'))};
  prompt_budget budget{tokens_of(history) + 20, 0};
  auto p = assemble_prompt({"", nullptr, history, {}, budget});
  CHECK(p.messages.size() == 3);
  CHECK(p.dropped_messages == 0);
  CHECK(p.dropped_tokens == 0);
  CHECK(p.budget_tokens == budget.context_window);
}

TEST_CASE("history over the budget is cut from the oldest side at group boundaries",
          "[runtime][prompt]") {
  // u1 | calls(a,b) ra rb | answer | u2 (newest user message)
  std::vector<chat_message> history{user(text_of(50, 'u')),         calls({"a", "b"}),
                                    result("a", text_of(200, 'r')), result("b", text_of(200, 's')),
                                    assistant(text_of(50, 'x')),    user(text_of(50, 'v'))};
  const std::size_t system_tokens =
      estimate_tokens(chat_message{chat_role::system, "Be brief.", {}, {}, {}});
  const std::size_t tail =
      estimate_tokens(history[4]) + estimate_tokens(history[5]) + system_tokens;
  SECTION("a budget that cuts into the tool group drops the whole group") {
    // Room for everything but one of the tool results: the group goes whole, never half.
    prompt_budget budget{tokens_of(history) + system_tokens - 100, 0};
    auto p = assemble_prompt({"Be brief.", nullptr, history, {}, budget});
    // u1 goes first (oldest); then the tool group, whole; the answer that is now first
    // has lost its question and goes with the cut.
    CHECK(contents(p.messages) == std::vector<std::string>{"Be brief.", text_of(50, 'v')});
    CHECK(p.dropped_groups == 3);
    CHECK(p.dropped_messages == 5);
    CHECK(p.fits());
    for (const auto& m : p.messages) {
      CHECK(m.role != chat_role::tool);
    }
  }
  SECTION("answers and tool rounds whose question was cut go with it") {
    prompt_budget budget{tokens_of(history) + system_tokens - estimate_tokens(history[0]), 0};
    auto p = assemble_prompt({"Be brief.", nullptr, history, {}, budget});
    // Dropping u1 was enough, but it leaves the tool round and the answer first.
    CHECK(p.dropped_groups == 3);
    CHECK(contents(p.messages) == std::vector<std::string>{"Be brief.", text_of(50, 'v')});
  }
  SECTION("the estimate and the dropped tokens add up") {
    prompt_budget budget{tail, 0};
    auto p = assemble_prompt({"Be brief.", nullptr, history, {}, budget});
    CHECK(p.estimated_tokens == tokens_of(p.messages));
    CHECK(p.estimated_tokens + p.dropped_tokens == tokens_of(history) + system_tokens);
  }
}

TEST_CASE("a cut keeps later turns from their user message on", "[runtime][prompt]") {
  std::vector<chat_message> history{user(text_of(100, 'a')), assistant(text_of(100, 'b')),
                                    user(text_of(10, 'c')), assistant(text_of(10, 'd')),
                                    user(text_of(10, 'e'))};
  prompt_budget budget{tokens_of(history) - 150, 0};
  auto p = assemble_prompt({"", nullptr, history, {}, budget});
  CHECK(contents(p.messages) ==
        std::vector<std::string>{text_of(10, 'c'), text_of(10, 'd'), text_of(10, 'e')});
  CHECK(p.dropped_messages == 2);
}

TEST_CASE("the pinned message and the system message stay even when they exceed the budget",
          "[runtime][prompt]") {
  context_blocks blocks;
  REQUIRE(blocks.set(plan_block, "<plan_state>" + text_of(100, 'p') + "</plan_state>"));
  std::vector<chat_message> history{user("old"), assistant("older answer"),
                                    user(text_of(300, 'o'))};
  prompt_budget budget{50, 0};
  auto p = assemble_prompt({"System.", &blocks, history, {}, budget});
  REQUIRE(p.messages.size() == 2);
  CHECK(p.messages[0].role == chat_role::system);
  CHECK_THAT(p.messages[0].content, Catch::Contains("<plan_state>"));
  CHECK(p.messages[1].content == text_of(300, 'o'));
  CHECK_FALSE(p.fits());
  CHECK(p.dropped_messages == 2);
}

TEST_CASE("a pinned objective survives while later tool rounds are cut oldest first",
          "[runtime][prompt]") {
  // Earlier turn | objective (pinned) | round 1 | correction prompt | round 2
  std::vector<chat_message> history{
      user(text_of(40, 'e')), assistant(text_of(40, 'f')),     user(text_of(20, 'g')),
      calls({"r1"}),          result("r1", text_of(300, 'h')), user(text_of(10, 'i')),
      calls({"r2"}),          result("r2", text_of(30, 'j'))};
  const std::size_t pinned = 2;
  const std::size_t keep = estimate_tokens(history[2]) + estimate_tokens(history[5]) +
                           estimate_tokens(history[6]) + estimate_tokens(history[7]);
  prompt_budget budget{keep + 5, 0};
  auto p = assemble_prompt({"", nullptr, history, pinned, budget});
  CHECK(contents(p.messages) ==
        std::vector<std::string>{text_of(20, 'g'), text_of(10, 'i'), "calls:r2", text_of(30, 'j')});
  CHECK(p.dropped_groups == 3);
  CHECK(p.fits());
  SECTION("without the pin the newest user message is the one kept") {
    auto q = assemble_prompt({"", nullptr, history, {}, {keep - estimate_tokens(history[2]), 0}});
    CHECK(contents(q.messages) ==
          std::vector<std::string>{text_of(10, 'i'), "calls:r2", text_of(30, 'j')});
  }
}

TEST_CASE("reserved tokens shrink the room for messages", "[runtime][prompt]") {
  std::vector<chat_message> history{user(text_of(100, 'a')), assistant(text_of(100, 'b')),
                                    user(text_of(10, 'c'))};
  const auto all = tokens_of(history);
  auto whole = assemble_prompt({"", nullptr, history, {}, {all, 0}});
  CHECK(whole.dropped_messages == 0);
  auto reserved = assemble_prompt({"", nullptr, history, {}, {all, 50}});
  CHECK(reserved.budget_tokens == all - 50);
  CHECK(reserved.dropped_messages == 2);
  CHECK(prompt_budget{10, 20}.limit() == 0);
}

TEST_CASE("the default budget is a 128,000-token context window", "[runtime][prompt]") {
  CHECK(prompt_budget{}.context_window == 128'000);
  CHECK(default_context_window == 128'000);
}

TEST_CASE("the history window cuts earlier turns to history_max_tokens, oldest whole groups "
          "first, keeping the system prompt and the objective",
          "[runtime][prompt]") {
  // Earlier turns: a long question, a tool round, three short messages | the objective.
  std::vector<chat_message> history{user(text_of(100, 'a')),         calls({"c1"}),
                                    result("c1", text_of(100, 'b')), assistant(text_of(10, 'c')),
                                    user(text_of(20, 'd')),          assistant(text_of(20, 'e')),
                                    user(text_of(500, 'f'))};
  prompt_budget budget;
  budget.history_max_tokens = 60;
  auto p = assemble_prompt({"System rules.", nullptr, history, {}, budget});
  // The newest earlier messages that fit in 60 tokens (24 + 24), cut to start at a user
  // message; the 504-token objective stays although it alone exceeds the window's cap.
  CHECK(contents(p.messages) == std::vector<std::string>{"System rules.", text_of(20, 'd'),
                                                         text_of(20, 'e'), text_of(500, 'f')});
  CHECK(p.dropped_messages == 4);
  CHECK(p.dropped_groups == 3);
  CHECK(p.earlier_tokens == estimate_tokens(history[4]) + estimate_tokens(history[5]));
  CHECK(p.earlier_tokens <= 60);
  CHECK(p.fits());

  SECTION("a tool call and its result go together or stay together") {
    // Room for the tool round and what follows it, not for the question before it.
    budget.history_max_tokens = tokens_of({history.begin() + 1, history.begin() + 6});
    auto q = assemble_prompt({"", nullptr, history, {}, budget});
    const auto kept = contents(q.messages);
    // A cut history starts at a user message, so the tool round goes with its question.
    CHECK(kept == std::vector<std::string>{text_of(20, 'd'), text_of(20, 'e'), text_of(500, 'f')});
    for (const auto& m : q.messages) {
      CHECK(m.role != chat_role::tool);
    }
  }
  SECTION("a cap the earlier turns fit in drops nothing") {
    budget.history_max_tokens = tokens_of({history.begin(), history.end() - 1});
    CHECK(assemble_prompt({"", nullptr, history, {}, budget}).dropped_messages == 0);
  }
  SECTION("no cap: only the window bounds the history") {
    budget.history_max_tokens = 0;
    CHECK(assemble_prompt({"", nullptr, history, {}, budget}).dropped_messages == 0);
  }
}

TEST_CASE("the history window never drops the run's own rounds after the objective",
          "[runtime][prompt]") {
  std::vector<chat_message> history{user(text_of(50, 'a')), assistant(text_of(50, 'b')),
                                    user(text_of(10, 'c')), calls({"r1"}),
                                    result("r1", text_of(400, 'd'))};
  prompt_budget budget;
  budget.history_max_tokens = 20;
  auto p = assemble_prompt({"", nullptr, history, std::size_t{2}, budget});
  CHECK(contents(p.messages) ==
        std::vector<std::string>{text_of(10, 'c'), "calls:r1", text_of(400, 'd')});
  CHECK(p.earlier_tokens == 0);
}
