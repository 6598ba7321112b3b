#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "chat_messages.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/runtime/prompt/token_estimate.hpp"

using namespace troupe;
using namespace troupe::prompt;
using namespace troupe::test_messages;

namespace {

/// `turns` turns of a user question, a tool call with `results` results and an answer.
std::vector<chat_message> tool_turns(std::size_t turns, std::size_t results = 1,
                                     std::size_t output_chars = 40) {
  std::vector<chat_message> out;
  for (std::size_t t = 0; t < turns; ++t) {
    out.push_back(user("question " + std::to_string(t) + std::string(40, 'q')));
    std::vector<std::string> ids;
    for (std::size_t r = 0; r < results; ++r) {
      ids.push_back("c" + std::to_string(t) + "_" + std::to_string(r));
    }
    out.push_back(calls(ids));
    for (const auto& id : ids) {
      out.push_back(result(id, std::string(output_chars, 'o')));
    }
    out.push_back(assistant("answer " + std::to_string(t) + std::string(40, 'a')));
  }
  return out;
}

/// True when no tool message starts a part (head, middle or tail) of the split.
bool groups_whole(const std::vector<chat_message>& h, const compression_plan& p) {
  const auto starts_group = [&](std::size_t i) {
    return i >= h.size() || h[i].role != chat_role::tool;
  };
  return starts_group(p.head_end) && starts_group(p.tail_begin);
}

compression_input input_for(const std::vector<chat_message>& h, std::size_t window = 2048) {
  compression_input in;
  in.history = h;
  in.context_window = window;
  return in;
}

} // namespace

TEST_CASE("compression waits until the prompt reaches the trigger share of the window",
          "[runtime][compression]") {
  const auto h = tool_turns(10);
  std::size_t tokens = 0;
  for (const auto& m : h) {
    tokens += estimate_tokens(m);
  }
  auto in = input_for(h, tokens * 2 + 10); // 0.5 x window is above the estimate
  auto plan = plan_compression(in);
  CHECK_FALSE(plan.acts());
  CHECK(plan.skipped.find("under the trigger") != std::string::npos);

  in.context_window = tokens * 2; // 0.5 x window is the estimate: compress
  plan = plan_compression(in);
  CHECK(plan.acts());
  CHECK(plan.summarise);
  CHECK(plan.estimated_tokens == tokens);
  CHECK(plan.trigger_tokens == tokens);
}

TEST_CASE("compression needs more messages than head, tail and the minimum middle",
          "[runtime][compression]") {
  // 26 messages = 1 + 20 + 5: not more than that, so nothing happens however large.
  std::vector<chat_message> h;
  for (int i = 0; i < 13; ++i) {
    h.push_back(user(std::string(4000, 'u')));
    h.push_back(assistant(std::string(4000, 'a')));
  }
  auto plan = plan_compression(input_for(h));
  CHECK_FALSE(plan.acts());
  CHECK(plan.skipped.find("needs more than 26") != std::string::npos);

  h.push_back(user("one more"));
  plan = plan_compression(input_for(h));
  REQUIRE(plan.acts());
  CHECK(plan.head_end == 1);
  CHECK(plan.tail_begin == h.size() - 20);
  CHECK(plan.middle_size() == 6);
}

TEST_CASE("compression never splits a tool call from its results at the head or the tail",
          "[runtime][compression]") {
  // Every turn is user, call, 3 results, answer (6 messages): some cut points land on results.
  for (std::size_t turns = 6; turns < 14; ++turns) {
    const auto h = tool_turns(turns, 3, 2000);
    for (std::size_t head = 1; head < 5; ++head) {
      for (std::size_t tail = 3; tail < 23; ++tail) {
        auto in = input_for(h, 1024);
        in.settings.protect_head = head;
        in.settings.protect_tail = tail;
        in.settings.min_middle = 1;
        const auto plan = plan_compression(in);
        INFO("turns " << turns << " head " << head << " tail " << tail);
        CHECK(groups_whole(h, plan));
        CHECK(plan.head_end >= std::min(head, h.size()));
        CHECK(h.size() - plan.tail_begin >= std::min(tail, h.size() - plan.head_end));
      }
    }
  }
}

TEST_CASE("the head widens over the results of a tool call it starts", "[runtime][compression]") {
  std::vector<chat_message> h;
  h.push_back(calls({"a", "b"}));
  h.push_back(result("a", "x"));
  h.push_back(result("b", "y"));
  for (int i = 0; i < 40; ++i) {
    h.push_back(i % 2 == 0 ? user(std::string(400, 'u')) : assistant(std::string(400, 'a')));
  }
  const auto plan = plan_compression(input_for(h));
  REQUIRE(plan.acts());
  CHECK(plan.head_end == 3);
}

TEST_CASE("a long run's own earlier tool rounds are compressed around its objective, which "
          "stays after the summary",
          "[runtime][compression]") {
  auto h = tool_turns(12, 1, 40);
  const auto objective = h.size();
  h.push_back(user("the objective"));
  // A long run after it: 30 tool rounds, more than the tail.
  for (int r = 0; r < 30; ++r) {
    h.push_back(calls({"r" + std::to_string(r)}));
    h.push_back(result("r" + std::to_string(r), std::string(400, 'o')));
  }
  auto in = input_for(h, 2048);
  in.pinned = objective;
  const auto plan = plan_compression(in);
  REQUIRE(plan.acts());
  // The middle reaches past the objective into the run's rounds; the objective is kept.
  CHECK(plan.tail_begin > objective);
  REQUIRE(plan.kept);
  CHECK(*plan.kept == objective);
  CHECK(plan.covered() == plan.middle_size() - 1);
  CHECK(groups_whole(h, plan));
  // The run's own tool outputs in the middle are pruned.
  std::size_t own_pruned = 0;
  for (const auto i : plan.prune) {
    CHECK(i != objective);
    own_pruned += i > objective ? 1 : 0;
  }
  CHECK(own_pruned > 0);

  // Compressed: head, summary, the objective, then the tail as it was.
  const auto compressed = compressed_history(h, plan, "## Goal\nS");
  REQUIRE(compressed.size() == plan.head_end + 2 + (h.size() - plan.tail_begin));
  CHECK(is_summary(compressed[plan.head_end]));
  CHECK(compressed[plan.head_end + 1].content == "the objective");
  CHECK(compressed_index(plan, objective) == plan.head_end + 1);
  CHECK(compressed_index(plan, plan.tail_begin) == plan.head_end + 2);
  CHECK(compressed_index(plan, h.size() - 1) == compressed.size() - 1);
  CHECK(compressed_index(plan, 0) == 0);
  CHECK_FALSE(compressed_index(plan, plan.head_end));
  // The summariser sees the objective, marked as kept.
  const auto request = summary_request(h, plan, "m", 8192);
  CHECK(request.messages[1].content.find("[the current request, kept in full after the summary] "
                                         "[user] the objective") != std::string::npos);
}

TEST_CASE("one turn of many tool rounds is compressed whatever result its cut points fall on, "
          "never splitting a call from its results",
          "[runtime][compression]") {
  // One question, then rounds of a call with three results: most cut points land on a
  // result, which the plan moves to the call that made it.
  std::vector<chat_message> h;
  h.push_back(user("do the long task"));
  for (int r = 0; r < 40; ++r) {
    const auto id = "r" + std::to_string(r);
    h.push_back(calls({id + "a", id + "b", id + "c"}));
    for (const auto* part : {"a", "b", "c"}) {
      h.push_back(result(id + part, std::string(600, 'o')));
    }
  }
  for (std::size_t tail = 3; tail < 30; ++tail) {
    for (std::size_t head = 1; head < 4; ++head) {
      auto in = input_for(h, 4096);
      in.pinned = 0;
      in.settings.protect_head = head;
      in.settings.protect_tail = tail;
      in.settings.min_middle = 3;
      const auto plan = plan_compression(in);
      INFO("head " << head << " tail " << tail);
      REQUIRE(plan.acts());
      CHECK(groups_whole(h, plan));
      CHECK_FALSE(plan.prune.empty());
      // The objective is the head's: never summarised, never pruned.
      CHECK(plan.head_end >= 1);
      CHECK_FALSE(plan.kept);
      const auto compressed = compressed_history(h, plan, "S");
      CHECK(compressed.front().content == "do the long task");
      // Every result in the compressed history follows the call that made it.
      for (std::size_t i = 0; i < compressed.size(); ++i) {
        if (compressed[i].role != chat_role::tool) {
          continue;
        }
        std::size_t k = i;
        while (k > 0 && compressed[k - 1].role == chat_role::tool) {
          --k;
        }
        REQUIRE(k > 0);
        const auto& call = compressed[k - 1];
        const bool made =
            std::any_of(call.tool_calls.begin(), call.tool_calls.end(),
                        [&](const tool_call& c) { return c.id == compressed[i].tool_call_id; });
        CHECK(made);
      }
    }
  }
}

TEST_CASE("long tool outputs in the middle are pruned first, and pruning alone may be enough",
          "[runtime][compression]") {
  auto h = tool_turns(12, 1, 3000);
  std::size_t tokens = 0;
  for (const auto& m : h) {
    tokens += estimate_tokens(m);
  }
  auto in = input_for(h, tokens * 2);
  auto plan = plan_compression(in);
  REQUIRE(plan.acts());
  CHECK_FALSE(plan.prune.empty());
  for (const auto i : plan.prune) {
    CHECK(i >= plan.head_end);
    CHECK(i < plan.tail_begin);
    CHECK(h[i].role == chat_role::tool);
  }
  CHECK(plan.pruned_tokens < plan.estimated_tokens);
  // The pruned estimate is under the trigger: nothing is summarised.
  CHECK_FALSE(plan.summarise);

  auto pruned = h;
  apply_pruning(pruned, plan);
  const auto& cut = pruned[plan.prune.front()].content;
  CHECK(cut.size() < 300);
  CHECK(cut.find("tool output pruned") != std::string::npos);
  CHECK(cut.substr(0, 200) == std::string(200, 'o'));

  // The plan's pruned estimate is what the pruned history costs, message by message.
  REQUIRE(plan.message_tokens.size() == h.size());
  std::size_t after = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    CHECK(plan.message_tokens[i] == estimate_tokens(h[i]));
    after += estimate_tokens(pruned[i]);
  }
  CHECK(plan.pruned_tokens == after);
}

TEST_CASE("a pruned tool output counts what it cut in characters, not bytes",
          "[runtime][compression]") {
  CHECK(prune_tool_output(std::string(200, 'o')) == std::string(200, 'o'));
  // 300 two-byte and 50 three-byte characters: 200 are kept, 150 counted as cut.
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += "\xc3\xa9"; // é
  }
  for (int i = 0; i < 50; ++i) {
    text += "\xe4\xbd\xa0"; // 你
  }
  const auto cut = prune_tool_output(text);
  CHECK(cut.starts_with(text.substr(0, 400)));
  CHECK(cut.find("150 more characters") != std::string::npos);
  // A stray byte counts as one character; the ASCII tail is counted eight at a time.
  const auto odd = std::string(199, 'a') + "\xff" + std::string(37, 'b');
  CHECK(prune_tool_output(odd).find(": 37 more characters") != std::string::npos);
}

TEST_CASE("a forced compression summarises below the trigger", "[runtime][compression]") {
  const auto h = tool_turns(10);
  auto in = input_for(h, 1'000'000);
  in.force = true;
  const auto plan = plan_compression(in);
  CHECK(plan.acts());
  CHECK(plan.summarise);
}

TEST_CASE("the summary request names every section and updates a previous summary",
          "[runtime][compression]") {
  auto h = tool_turns(12, 1, 3000);
  auto in = input_for(h, 1024);
  auto plan = plan_compression(in);
  REQUIRE(plan.summarise);
  auto request = summary_request(h, plan, "fast-model", 4096);
  CHECK(request.model == "fast-model");
  CHECK(request.temperature == Approx(0.3));
  REQUIRE(request.messages.size() == 2);
  for (const auto s : summary_sections()) {
    CHECK(request.messages[0].content.find(std::string("## ") + std::string(s)) !=
          std::string::npos);
  }
  for (const auto s : {"### Completed", "### In Progress", "### Blocked"}) {
    CHECK(request.messages[0].content.find(s) != std::string::npos);
  }
  CHECK(request.messages[0].content.find("previous summary") == std::string::npos);
  CHECK(request.messages[1].content.find("question 1") != std::string::npos);
  // Tool outputs reach the summariser pruned.
  CHECK(request.messages[1].content.find(std::string(300, 'o')) == std::string::npos);

  const auto compressed = compressed_history(h, plan, "## Goal\nfirst summary");
  CHECK(compressed.size() == plan.head_end + 1 + (h.size() - plan.tail_begin));
  REQUIRE(is_summary(compressed[plan.head_end]));
  CHECK(summary_text(compressed[plan.head_end]) == "## Goal\nfirst summary");

  // Grow it again: the next plan finds the summary in its middle and updates it.
  auto longer = compressed;
  const auto more = tool_turns(8, 1, 40);
  longer.insert(longer.end(), more.begin(), more.end());
  auto again = plan_compression(input_for(longer, 1024));
  REQUIRE(again.summarise);
  REQUIRE(again.previous_summary);
  CHECK(*again.previous_summary == plan.head_end);
  request = summary_request(longer, again, "fast-model", 4096);
  CHECK(request.messages[0].content.find("previous summary") != std::string::npos);
  CHECK(request.messages[1].content.find("<previous_summary>\n## Goal\nfirst summary") !=
        std::string::npos);
  // The summary is not among the messages to summarise.
  CHECK(request.messages[1].content.find("[user] [Context Compression Summary]") ==
        std::string::npos);
}

TEST_CASE("the summary request fits the window by leaving out the oldest messages",
          "[runtime][compression]") {
  auto h = tool_turns(60, 1, 40);
  auto in = input_for(h, 1024);
  auto plan = plan_compression(in);
  REQUIRE(plan.summarise);
  const auto request = summary_request(h, plan, "m", 1024);
  std::size_t tokens = *request.max_tokens;
  for (const auto& m : request.messages) {
    tokens += estimate_tokens(m);
  }
  CHECK(tokens <= 1024);
  CHECK(request.messages[1].content.find("older messages do not fit") != std::string::npos);
  // The newest middle message is there.
  CHECK(request.messages[1].content.find(h[plan.tail_begin - 1].content) != std::string::npos);
}

TEST_CASE("a loaded conversation keeps its newest turns whole and older ones as question and "
          "answer",
          "[runtime][compression]") {
  std::vector<stored_turn> turns;
  for (int t = 0; t < 12; ++t) {
    stored_turn turn;
    turn.row = t + 100;
    turn.messages.push_back(user("q" + std::to_string(t) + std::string(900, 'q')));
    turn.messages.push_back(calls({"c" + std::to_string(t)}));
    turn.messages.push_back(result("c" + std::to_string(t), std::string(900, 'o')));
    turn.messages.push_back(assistant("a" + std::to_string(t) + std::string(900, 'a')));
    turns.push_back(std::move(turn));
  }
  // A turn whose tool call has no stored result: the call is left out.
  turns[11].messages.insert(turns[11].messages.begin() + 1, calls({"lost"}));

  for (auto& turn : turns) {
    for (std::size_t i = 0; i < turn.messages.size(); ++i) {
      turn.tags.push_back(turn.row * 10 + static_cast<std::int64_t>(i));
    }
  }
  const auto loaded = shape_loaded_history(turns, 0);
  REQUIRE(loaded.messages.size() == loaded.rows.size());
  REQUIRE(loaded.messages.size() == loaded.tags.size());
  // Each message keeps its own tag: turn 0 (older) is its question and its answer.
  CHECK(loaded.tags[0] == 1000);
  CHECK(loaded.tags[1] == 1003);
  // 4 older turns x 2 + 8 newer turns x 4.
  CHECK(loaded.messages.size() == 4 * 2 + 8 * 4);
  CHECK(loaded.messages[0].content.starts_with("q0"));
  CHECK(loaded.messages[1].content.starts_with("a0"));
  CHECK(loaded.rows[0] == 100);
  // Turn 4 (one of the 5 truncated): its messages are cut.
  const auto& t4_question = loaded.messages[8];
  CHECK(t4_question.content.starts_with("q4"));
  CHECK(t4_question.content.size() < 600);
  CHECK(loaded.messages[10].content.size() < 300); // its tool output
  // Turns 9-11 are whole.
  const auto& t9_question = loaded.messages[8 + 5 * 4];
  CHECK(t9_question.content.starts_with("q9"));
  CHECK(t9_question.content.size() == 902);
  for (const auto& m : loaded.messages) {
    for (const auto& c : m.tool_calls) {
      CHECK(c.id != "lost");
    }
  }

  // Under a budget, the oldest turns go first and the newest stays.
  const auto small = shape_loaded_history(turns, 1500);
  std::size_t tokens = 0;
  for (const auto& m : small.messages) {
    tokens += estimate_tokens(m);
  }
  CHECK(tokens <= 1500);
  REQUIRE_FALSE(small.messages.empty());
  CHECK(small.messages.back().content.starts_with("a11"));
  CHECK(small.rows.back() == 111);
}

TEST_CASE("a tool output pruned by an earlier round is not pruned again",
          "[runtime][compression]") {
  auto h = tool_turns(12, 1, 3000);
  std::size_t tokens = 0;
  for (const auto& m : h) {
    tokens += estimate_tokens(m);
  }
  auto in = input_for(h, tokens * 2);
  const auto first = plan_compression(in);
  REQUIRE_FALSE(first.prune.empty());
  apply_pruning(h, first);
  in.history = h;
  in.force = true;
  const auto second = plan_compression(in);
  CHECK(second.prune.empty());
  CHECK(second.pruned_tokens == second.estimated_tokens);
}
