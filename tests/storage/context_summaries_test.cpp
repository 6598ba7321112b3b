// Context compression's durable side (issue 16): the stored summary and the history a
// conversation is loaded back with.

#include <string>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/storage/context_summaries.hpp"
#include "troupe/storage/repositories.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

void add_message(fresh_db& f, row_id conversation, row_id run, const std::string& role,
                 const std::string& content, const std::string& tool_calls = {}) {
  message_record m;
  m.conversation_id = conversation;
  m.run_id = run;
  m.role = role;
  m.content = content;
  m.tool_calls_json = tool_calls;
  must(insert_message(f.db, m));
}

/// Turn `n` of a run: the question, a tool call and its result, the answer.
row_id add_turn(fresh_db& f, row_id conversation, row_id agent, int n) {
  const auto run = f.add_run(conversation, agent, "run-" + std::to_string(n));
  add_message(f, conversation, run, "user", "question " + std::to_string(n));
  add_message(f, conversation, run, "assistant", "", R"([{"id":"c","name":"read"}])");
  add_message(f, conversation, run, "tool", "result " + std::to_string(n));
  add_message(f, conversation, run, "assistant", "answer " + std::to_string(n));
  return run;
}

} // namespace

TEST_CASE("a conversation without a summary loads its user messages and answers",
          "[storage][compression]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conversation = f.add_conversation(user, agent, "c-1");
  for (int n = 1; n <= 4; ++n) {
    add_turn(f, conversation, agent, n);
  }
  const auto loaded = must(load_prompt_history(f.db, conversation, 100, 0));
  CHECK_FALSE(loaded.summary);
  REQUIRE(loaded.messages.size() == 8);
  CHECK(loaded.messages.front().content == "question 1");
  CHECK(loaded.messages.back().content == "answer 4");
  CHECK(loaded.estimated_tokens > 0);
  // At most the newest `max_messages`.
  const auto newest = must(load_prompt_history(f.db, conversation, 4, 0));
  REQUIRE(newest.messages.size() == 4);
  CHECK(newest.messages.front().content == "question 3");
}

TEST_CASE("a conversation with summaries loads from the newest: its head, the summary, its "
          "tail and the turns after it, every message still stored",
          "[storage][compression]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conversation = f.add_conversation(user, agent, "c-1");
  std::vector<row_id> runs;
  for (int n = 1; n <= 10; ++n) {
    runs.push_back(add_turn(f, conversation, agent, n));
  }
  context_summary_record older;
  older.conversation_id = conversation;
  older.run_id = runs[4];
  older.summary = "OLD";
  must(insert_context_summary(f.db, older));
  // Written by run 8: the head is question 1, the tail the two messages of turn 7.
  context_summary_record s;
  s.conversation_id = conversation;
  s.run_id = runs[7];
  s.summary = "## Goal\nNEW";
  s.head_messages = 1;
  s.tail_messages = 2;
  s.covered_messages = 11;
  s.model = "fast";
  must(insert_context_summary(f.db, s));
  REQUIRE(must(latest_context_summary(f.db, conversation))->summary == "## Goal\nNEW");

  const auto loaded = must(load_prompt_history(f.db, conversation, 100, 0));
  REQUIRE(loaded.summary);
  CHECK(loaded.summary->covered_messages == 11);
  std::vector<std::string> texts;
  for (const auto& m : loaded.messages) {
    texts.push_back(m.content);
  }
  const std::vector<std::string> expected = {
      "question 1",  "[Context Compression Summary]\n## Goal\nNEW",
      "question 7",  "answer 7",
      "question 8",  "answer 8",
      "question 9",  "answer 9",
      "question 10", "answer 10"};
  CHECK(texts == expected);
  CHECK(prompt::is_summary(loaded.messages[1]));
  CHECK(must(count_messages(f.db, conversation)).count == 40);

  // A message limit keeps the head and the summary and drops the oldest turns after it.
  const auto cut = must(load_prompt_history(f.db, conversation, 4, 0));
  REQUIRE(cut.messages.size() == 4);
  CHECK(cut.messages[0].content == "question 1");
  CHECK(prompt::is_summary(cut.messages[1]));
  CHECK(cut.messages[3].content == "answer 10");
  // A queued run's message is left out (it is that run's objective).
  const std::vector<row_id> queued = {runs[9]};
  const auto without = must(load_prompt_history(f.db, conversation, 100, 0, queued));
  CHECK(without.messages.back().content == "answer 9");
}

TEST_CASE("/compact and its answer never enter a loaded history", "[storage][compression]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conversation = f.add_conversation(user, agent, "c-1");
  add_turn(f, conversation, agent, 1);
  const auto run = f.add_run(conversation, agent, "compact");
  add_message(f, conversation, run, "user", "/compact");
  add_message(f, conversation, run, "assistant", "Compressed 5 earlier messages");
  add_turn(f, conversation, agent, 2);
  const auto loaded = must(load_prompt_history(f.db, conversation, 100, 0));
  REQUIRE(loaded.messages.size() == 4);
  CHECK(loaded.messages[2].content == "question 2");
}
