// Context compression's durable side (issue 16): the stored summary and the history a
// conversation is loaded back with.

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/storage/context_summaries.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/schema.hpp"

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

namespace {

/// Stores a message and returns its row.
row_id stored(fresh_db& f, row_id conversation, row_id run, const std::string& role,
              const std::string& content, const std::string& tool_calls = {}) {
  message_record m;
  m.conversation_id = conversation;
  m.run_id = run;
  m.role = role;
  m.content = content;
  m.tool_calls_json = tool_calls;
  return must(insert_message(f.db, m));
}

std::vector<std::string> texts_of(const prompt_history& h) {
  std::vector<std::string> out;
  for (const auto& m : h.messages) {
    out.push_back(m.content);
  }
  return out;
}

} // namespace

TEST_CASE("a summary stored with its message range loads in its place whatever failed runs and "
          "limits left around it, its kept objective follows it",
          "[storage][compression]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conversation = f.add_conversation(user, agent, "c-1");
  std::vector<row_id> runs;
  for (int n = 1; n <= 6; ++n) {
    runs.push_back(add_turn(f, conversation, agent, n));
    if (n == 2) {
      // A failed run: its question is stored, with no answer. The prompt the summary was
      // made from never held it, so counting messages would go wrong by one.
      const auto failed = f.add_run(conversation, agent, "failed", run_status::failed);
      stored(f, conversation, failed, "user", "a question that failed");
    }
  }
  // Run 7, long: its objective, three tool rounds; it summarised questions 2-6 and its
  // own first two rounds, keeping its objective after the summary.
  const auto run7 = f.add_run(conversation, agent, "run-7");
  const auto objective = stored(f, conversation, run7, "user", "question 7");
  stored(f, conversation, run7, "assistant", "", R"([{"id":"a","name":"read"}])");
  stored(f, conversation, run7, "tool", "round a");
  stored(f, conversation, run7, "assistant", "", R"([{"id":"b","name":"read"}])");
  const auto last_covered = stored(f, conversation, run7, "tool", "round b");
  stored(f, conversation, run7, "assistant", "", R"([{"id":"c","name":"read"}])");
  stored(f, conversation, run7, "tool", "round c");
  stored(f, conversation, run7, "assistant", "answer 7");
  const auto messages = must(list_messages(f.db, conversation));
  // The first covered message: question 1's answer (the head is question 1).
  row_id first_covered = 0;
  for (const auto& m : messages) {
    if (m.content == "answer 1") {
      first_covered = m.id;
    }
  }
  REQUIRE(first_covered != 0);

  context_summary_record s;
  s.conversation_id = conversation;
  s.run_id = run7;
  s.summary = "## Goal\nRANGE";
  s.head_messages = 1;
  s.first_message_id = first_covered;
  s.last_message_id = last_covered;
  s.kept_message_ids = {objective};
  s.tokens_after = 321;
  must(insert_context_summary(f.db, s));
  const auto read_back = must(latest_context_summary(f.db, conversation));
  REQUIRE(read_back);
  CHECK(read_back->first_message_id == first_covered);
  CHECK(read_back->last_message_id == last_covered);
  CHECK(read_back->kept_message_ids == std::vector<row_id>{objective});
  CHECK(read_back->tokens_after == 321);

  const auto loaded = must(load_prompt_history(f.db, conversation, 100, 0));
  const std::vector<std::string> expected = {
      "question 1", "[Context Compression Summary]\n## Goal\nRANGE", "question 7", "answer 7"};
  CHECK(texts_of(loaded) == expected);
  // Each message says which rows it stands for; the summary its range.
  REQUIRE(loaded.spans.size() == loaded.messages.size());
  CHECK(loaded.spans[1].first == first_covered);
  CHECK(loaded.spans[1].last == last_covered);
  CHECK(loaded.spans[2].first == objective);
  CHECK(loaded.spans[2].last == objective);

  // Later turns follow; the head count bounds what loads before the range.
  add_turn(f, conversation, agent, 8);
  const auto later = must(load_prompt_history(f.db, conversation, 100, 0));
  CHECK(texts_of(later).size() == 6);
  CHECK(texts_of(later).back() == "answer 8");
}

TEST_CASE("a summary's write reads the rows its prompt messages were stored as, and hands its "
          "range to the next summary",
          "[storage][compression]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conversation = f.add_conversation(user, agent, "c-1");
  const auto run = f.add_run(conversation, agent, "r");
  const auto span_of = [](row_id id) { return std::make_shared<stored_span>(stored_span{id, id}); };
  std::vector<row_id> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(
        stored(f, conversation, run, i % 2 == 0 ? "user" : "assistant", "m" + std::to_string(i)));
  }
  // Covered: m1, m2 and m4 (a message unknown to storage in between is ignored); m3 is
  // the kept objective; m0 and m5 are head and tail.
  std::vector<message_span> covered = {span_of(ids[1]), span_of(ids[2]), nullptr, span_of(ids[4])};
  std::vector<message_span> uncovered = {span_of(ids[0]), span_of(ids[3]), span_of(ids[5])};
  auto summary_span = std::make_shared<stored_span>();
  context_summary_record r;
  r.conversation_id = conversation;
  r.run_id = run;
  r.summary = "S1";
  auto op = insert_context_summary_op(r, covered, uncovered, summary_span);
  REQUIRE(op.apply(f.db));
  const auto first = must(latest_context_summary(f.db, conversation));
  REQUIRE(first);
  CHECK(first->first_message_id == ids[1]);
  CHECK(first->last_message_id == ids[4]);
  CHECK(first->kept_message_ids == std::vector<row_id>{ids[3]});
  CHECK(summary_span->first == ids[1]);
  CHECK(summary_span->last == ids[4]);

  // A later summary covering the first one and m5 covers everything the first did.
  std::vector<message_span> covered2 = {summary_span, span_of(ids[3]), span_of(ids[5])};
  std::vector<message_span> uncovered2 = {span_of(ids[0])};
  r.summary = "S2";
  REQUIRE(insert_context_summary_op(r, covered2, uncovered2, nullptr).apply(f.db));
  const auto second = must(latest_context_summary(f.db, conversation));
  CHECK(second->first_message_id == ids[1]);
  CHECK(second->last_message_id == ids[5]);
  CHECK(second->kept_message_ids.empty());
}

TEST_CASE("a summary written before ranges were stored still loads by its counts after the "
          "migration",
          "[storage][compression]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conversation = f.add_conversation(user, agent, "c-1");
  std::vector<row_id> runs;
  for (int n = 1; n <= 5; ++n) {
    runs.push_back(add_turn(f, conversation, agent, n));
  }
  context_summary_record s;
  s.conversation_id = conversation;
  s.run_id = runs[4];
  s.summary = "OLD STYLE";
  s.head_messages = 1;
  s.tail_messages = 2;
  must(insert_context_summary(f.db, s));
  // Back to version 10: the range columns go, as in a database written before them.
  for (const auto* column : {"first_message_id", "last_message_id", "kept_message_ids"}) {
    must(f.db.exec(std::string("ALTER TABLE context_summaries DROP COLUMN ") + column));
  }
  must(f.db.exec("PRAGMA user_version = 10"));
  CHECK(must(migrate(f.db)) == latest_schema_version());
  CHECK(latest_schema_version() >= 13);
  const auto migrated = must(latest_context_summary(f.db, conversation));
  REQUIRE(migrated);
  CHECK(migrated->first_message_id == 0);
  CHECK(migrated->kept_message_ids.empty());
  const auto loaded = must(load_prompt_history(f.db, conversation, 100, 0));
  const std::vector<std::string> expected = {
      "question 1", "[Context Compression Summary]\nOLD STYLE",
      "question 4", "answer 4",
      "question 5", "answer 5"};
  CHECK(texts_of(loaded) == expected);
}

TEST_CASE("a long conversation loads its newest three turns in full, the five before cut and "
          "older ones as question and answer, the oldest left out past the budget",
          "[storage][compression]") {
  fresh_db f;
  const auto user = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto conversation = f.add_conversation(user, agent, "c-1");
  constexpr int turns = 14;
  for (int n = 1; n <= turns; ++n) {
    const auto run = f.add_run(conversation, agent, "run-" + std::to_string(n));
    const auto tag = std::to_string(n) + " ";
    stored(f, conversation, run, "user", "question " + tag + std::string(2000, 'q'));
    stored(f, conversation, run, "assistant", "", R"([{"id":"c","name":"read"}])");
    stored(f, conversation, run, "tool", "result " + tag + std::string(2000, 'r'));
    stored(f, conversation, run, "assistant", "answer " + tag + std::string(2000, 'a'));
  }
  const auto loaded = must(load_prompt_history(f.db, conversation, 1000, 0));
  REQUIRE(loaded.messages.size() == 2 * turns);
  for (int n = 1; n <= turns; ++n) {
    INFO("turn " << n);
    const auto& question = loaded.messages[static_cast<std::size_t>(2 * (n - 1))];
    const auto& answer = loaded.messages[static_cast<std::size_t>(2 * (n - 1) + 1)];
    CHECK(question.content.starts_with("question " + std::to_string(n) + " "));
    CHECK(answer.content.starts_with("answer " + std::to_string(n) + " "));
    // Tool rounds stay with their run.
    CHECK(question.content.find("result") == std::string::npos);
    const auto age = turns - n;
    if (age < 3 || age >= 8) {
      // The newest three in full; older ones as their question and answer, whole.
      CHECK(question.content.size() > 2000);
      CHECK(answer.content.size() > 2000);
    } else {
      // The five before them cut, saying how much.
      CHECK(question.content.size() < 700);
      CHECK(answer.content.size() < 700);
      CHECK(answer.content.find("more characters]") != std::string::npos);
    }
  }
  // Within a budget (the agent's context window, say), the oldest turns go first and the
  // estimate stays under it.
  constexpr std::size_t budget = 4096;
  const auto cut = must(load_prompt_history(f.db, conversation, 1000, budget));
  CHECK(cut.estimated_tokens <= budget);
  REQUIRE(cut.messages.size() >= 2);
  CHECK(cut.messages.size() < loaded.messages.size());
  CHECK(cut.messages.back().content.starts_with("answer 14 "));
  CHECK(cut.messages[cut.messages.size() - 2].content.starts_with("question 14 "));
  // What stays is the newest turns, whole turns, in order.
  CHECK(cut.messages.front().content.starts_with("question "));
  REQUIRE(cut.spans.size() == cut.messages.size());
  for (const auto& span : cut.spans) {
    CHECK(span.first != 0);
  }
}
