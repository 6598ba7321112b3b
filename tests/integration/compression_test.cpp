// Context compression with the real `troupe serve` binary and mock-llm on loopback
// (issue 16): the mock records every request body, so the tests read what the model saw
// on every round — the budget, whole tool groups, the summary that stands for earlier
// turns, which model wrote it and how the next pass updates it.

#include <condition_variable>
#include <future>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;

namespace {

/// Every completion request the mock received, in order.
class request_log {
public:
  void add(const std::string& body) {
    std::lock_guard lock(mutex_);
    bodies_.push_back(body);
  }
  std::vector<std::string> all() const {
    std::lock_guard lock(mutex_);
    return bodies_;
  }
  /// The requests whose text contains `needle`.
  std::vector<std::string> containing(const std::string& needle) const {
    std::vector<std::string> out;
    for (const auto& b : all()) {
      if (b.find(needle) != std::string::npos) {
        out.push_back(b);
      }
    }
    return out;
  }

private:
  mutable std::mutex mutex_;
  std::vector<std::string> bodies_;
};

/// What only the summariser's requests contain (runtime/src/prompt/compression.cpp).
const std::string summariser_words = "You compress the earlier part of a conversation";

/// How the mock answers the summariser.
enum class summariser { answers, fails, holds };

troupe::mock::mock_llm_options recording_mock(std::shared_ptr<request_log> log,
                                              summariser behaviour) {
  // The summariser's rules first: its request's last user message holds the turns.
  std::string script = "[";
  if (behaviour == summariser::holds) {
    // Answers in ten minutes: long after the test has killed the troupe waiting for it.
    script += R"({"match": {"prompt": ")" + summariser_words + R"("}, "ttft_ms": 600000},)";
  } else if (behaviour == summariser::fails) {
    script += R"({"match": {"prompt": ")" + summariser_words + R"("}, "fault": "401"},)";
  } else {
    script += R"({"match": {"prompt": "<previous_summary>"},
                  "reply": {"text": "## Goal\nUPDATED SUMMARY of the numbered questions."}},
                 {"match": {"prompt": ")" +
              summariser_words + R"("},
                  "reply": {"text": "## Goal\nFIRST SUMMARY of the numbered questions."}},)";
  }
  script += R"(
    {"match": {"user": "question", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "session_search", "arguments": {"query": "zebra"}}]}},
    {"match": {"has_tool_result": true}, "tokens": 40}
  ])";
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(script);
  REQUIRE(rules);
  o.rules = std::move(*rules);
  o.observe = [log](const std::string& body) { log->add(body); };
  return o;
}

std::string config(const mock_llm_fixture& mock, unsigned context_window) {
  return "[compression]\ntrigger = 0.5\nprotect_head = 1\nprotect_tail = 6\nmin_middle = 3\n"
         "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
         mock.base_url() +
         "\"\n"
         "[[agents]]\nname = \"long\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "fast_model = \"mock-fast\"\ntimeout_s = 60\nmemory = false\n"
         "tools = [\"session_search\"]\ncontext_window = " +
         std::to_string(context_window) +
         "\n"
         // The same agent with a window nothing fills: only /compact compresses.
         "[[agents]]\nname = \"roomy\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "fast_model = \"mock-fast\"\ntimeout_s = 60\nmemory = false\n"
         "tools = [\"session_search\"]\ncontext_window = 100000\n";
}

const std::string api_limits = "rate_per_second = 1000\nrate_burst = 1000\n";

/// Turn `n`'s message: long enough that a few turns fill the small window.
std::string question(int n) {
  return "question " + std::to_string(n) + " " + std::string(160, 'q');
}

std::string chat(const api_server& s, const std::string& token, const std::string& conversation,
                 const std::string& message, const std::string& agent = "long") {
  std::string body = R"({"agent":")" + agent + R"(","message":")" + message + "\"";
  if (!conversation.empty()) {
    body += R"(,"conversation_id":")" + conversation + "\"";
  }
  return s.call("POST", "/api/v1/chat", token, body + "}");
}

bool is_main_round(const std::string& body) {
  return body.find(R"("model":"mock-llm")") != std::string::npos;
}

/// Every tool result of a request follows the assistant message that made its call.
bool tool_groups_whole(const std::string& body) {
  static const std::regex result_id(R"re("tool_call_id":"([^"]+)")re");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), result_id);
       it != std::sregex_iterator(); ++it) {
    const auto call = body.find("\"id\":\"" + (*it)[1].str() + "\"");
    if (call == std::string::npos || call > static_cast<std::size_t>(it->position())) {
      return false;
    }
  }
  return true;
}

} // namespace

TEST_CASE("a 60-turn conversation with tool calls stays under a small context window: the fast "
          "model summarises the middle, a later pass updates the summary, tool groups stay "
          "whole, and the summary is what a reloaded conversation starts from",
          "[integration][compression]") {
  auto log = std::make_shared<request_log>();
  mock_llm_fixture mock(recording_mock(log, summariser::answers));
  constexpr unsigned window = 2048;
  api_server s(api_limits, config(mock, window));
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");

  std::string conversation;
  for (int turn = 1; turn <= 60; ++turn) {
    INFO("turn " << turn);
    const auto answer = chat(s, ann, conversation, question(turn));
    REQUIRE(status_of(answer) == 200);
    CHECK(json_field(body_of(answer), "status") == "succeeded");
    if (conversation.empty()) {
      conversation = json_field(body_of(answer), "conversation_id");
    }
  }

  const auto requests = log->all();
  std::size_t main_rounds = 0;
  for (const auto& body : requests) {
    if (!is_main_round(body)) {
      continue;
    }
    ++main_rounds;
    // Under the window on every round: the body's characters / 4 (more than the estimate:
    // JSON quoting and keys count too) stay at or under it.
    CHECK(body.size() / 4 <= window);
    CHECK(tool_groups_whole(body));
  }
  CHECK(main_rounds >= 120); // a tool call and an answer per turn

  // The summaries: asked of the fast model, the later ones updating the first.
  const auto summaries = log->containing(summariser_words);
  REQUIRE(summaries.size() >= 2);
  for (const auto& body : summaries) {
    CHECK_THAT(body, Catch::Contains(R"("model":"mock-fast")"));
    CHECK_THAT(body, !Catch::Contains(R"("stream":true)"));
  }
  CHECK_THAT(summaries[0], !Catch::Contains("<previous_summary>"));
  CHECK_THAT(summaries[1], Catch::Contains("<previous_summary>\\n## Goal\\nFIRST SUMMARY"));
  // The last rounds carry the updated summary and the note, not the first turns.
  const auto& last = requests.back();
  CHECK_THAT(last, Catch::Contains("[Context Compression Summary]\\n## Goal\\nUPDATED SUMMARY"));
  CHECK_THAT(last, Catch::Contains("Earlier turns of this conversation were compressed"));
  CHECK_THAT(last, !Catch::Contains(question(2)));
  // The head (the first message) stays.
  CHECK_THAT(last, Catch::Contains(question(1)));

  // Only the prompt was compressed: every message is stored and listed.
  const auto messages =
      s.call("GET", "/api/v1/conversations/" + conversation + "/messages?limit=1", ann);
  REQUIRE(status_of(messages) == 200);
  CHECK(json_field(body_of(messages), "total") == "240"); // 60 x question, call, result, answer

  // The run events and steps say so.
  const auto steps = body_of(s.call(
      "GET", "/api/v1/conversations/" + conversation + "/messages?steps=true&limit=200", ann));
  CHECK_THAT(steps, Catch::Contains(R"("name":"context_compressed")"));
  CHECK_THAT(steps, Catch::Contains(R"("updated_previous":true)"));

  // What the next prompt would contain: the summary, then the kept messages.
  const auto context = s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann);
  REQUIRE(status_of(context) == 200);
  const auto view = body_of(context);
  CHECK_THAT(view, Catch::Contains("UPDATED SUMMARY"));
  CHECK_THAT(view, Catch::Contains(question(60)));
  CHECK_THAT(view, !Catch::Contains(question(2)));
  CHECK(std::stoul(json_field(view, "estimated_tokens")) < window);

  // Brought back from the database, the conversation starts from its newest summary.
  s.restart();
  const auto ann_again = ann;
  const auto resumed = chat(s, ann_again, conversation, question(61));
  REQUIRE(status_of(resumed) == 200);
  const auto resumed_rounds = log->containing(question(61));
  REQUIRE_FALSE(resumed_rounds.empty());
  CHECK_THAT(resumed_rounds.front(), Catch::Contains("[Context Compression Summary]"));
  CHECK_THAT(resumed_rounds.front(), !Catch::Contains(question(2)));
  CHECK(resumed_rounds.front().size() / 4 <= window);

  // `/compact` compresses now, below the trigger, and answers with the summary's size
  // without a main round: six turns are more than head + tail + middle (an agent whose
  // window they do not fill, so no round compressed them already).
  std::string fresh;
  for (int turn = 101; turn <= 106; ++turn) {
    const auto answer = chat(s, ann_again, fresh, question(turn), "roomy");
    REQUIRE(status_of(answer) == 200);
    if (fresh.empty()) {
      fresh = json_field(body_of(answer), "conversation_id");
    }
  }
  const auto before = log->all().size();
  const auto compact = chat(s, ann_again, fresh, "/compact", "roomy");
  REQUIRE(status_of(compact) == 200);
  CHECK_THAT(json_field(body_of(compact), "content"), Catch::StartsWith("Compressed "));
  const auto after_compact = log->all();
  REQUIRE(after_compact.size() == before + 1);
  CHECK_THAT(after_compact.back(), Catch::Contains(summariser_words));
  CHECK_THAT(after_compact.back(), Catch::Contains(question(102)));
  // The next round starts from the summary; `/compact` itself is not part of the prompt.
  REQUIRE(status_of(chat(s, ann_again, fresh, question(107), "roomy")) == 200);
  const auto next = log->containing(question(107));
  REQUIRE_FALSE(next.empty());
  CHECK_THAT(next.front(), Catch::Contains("[Context Compression Summary]"));
  CHECK_THAT(next.front(), !Catch::Contains(question(102)));
  CHECK_THAT(next.front(), !Catch::Contains("/compact"));
}

TEST_CASE("a summariser that fails leaves the history intact, as a recorded step",
          "[integration][compression]") {
  auto log = std::make_shared<request_log>();
  mock_llm_fixture mock(recording_mock(log, summariser::fails));
  // A window the whole history fits in, so nothing but the summariser would leave it
  // (24 turns of about 150 tokens pass the trigger, half of it, near turn 20).
  api_server s(api_limits, config(mock, 6144));
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");

  std::string conversation;
  for (int turn = 1; turn <= 24; ++turn) {
    INFO("turn " << turn);
    const auto answer = chat(s, ann, conversation, question(turn));
    REQUIRE(status_of(answer) == 200);
    CHECK(json_field(body_of(answer), "status") == "succeeded");
    if (conversation.empty()) {
      conversation = json_field(body_of(answer), "conversation_id");
    }
  }
  REQUIRE_FALSE(log->containing(summariser_words).empty());
  // Every round after the failure still carries the whole history, with no summary.
  const auto last = log->containing(question(24)).back();
  for (int turn = 1; turn <= 23; ++turn) {
    INFO("turn " << turn);
    CHECK_THAT(last, Catch::Contains(question(turn)));
  }
  CHECK_THAT(last, !Catch::Contains("[Context Compression Summary]"));
  const auto steps = body_of(s.call(
      "GET", "/api/v1/conversations/" + conversation + "/messages?steps=true&limit=200", ann));
  CHECK_THAT(steps, Catch::Contains(R"("name":"context_compression","status":"failed")"));
  const auto context =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  CHECK_THAT(context, Catch::Contains(R"("summary":null)"));
}

namespace {

/// Set from the mock's thread when the summariser's request arrives, or from the test's
/// own thread when a chat it started came back: whichever happens first ends a wait.
struct turn_events {
  std::mutex mutex;
  std::condition_variable changed;
  bool summariser_asked = false;
  bool chat_done = false;

  void note(bool turn_done) {
    {
      std::lock_guard lock(mutex);
      (turn_done ? chat_done : summariser_asked) = true;
    }
    changed.notify_all();
  }
};

} // namespace

TEST_CASE("a troupe killed while the fast model summarises loses nothing: after the restart "
          "the history is whole, with no summary, and the next turn answers from it",
          "[integration][compression]") {
  auto log = std::make_shared<request_log>();
  auto events = std::make_shared<turn_events>();
  auto holding_mock = recording_mock(log, summariser::holds);
  holding_mock.observe = [log, events](const std::string& body) {
    log->add(body);
    if (body.find(summariser_words) != std::string::npos) {
      events->note(false);
    }
  };
  auto mock = std::make_unique<mock_llm_fixture>(std::move(holding_mock));
  const auto port = mock->port();
  api_server s(api_limits, config(*mock, 2048));
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");

  // Turns until one waits on the summariser.
  std::string conversation;
  int turn = 0;
  std::future<std::string> held;
  while (!held.valid()) {
    ++turn;
    REQUIRE(turn <= 40);
    {
      std::lock_guard lock(events->mutex);
      events->chat_done = false;
    }
    auto answer = std::async(std::launch::async, [&s, &ann, conversation, turn, events] {
      auto r = chat(s, ann, conversation, question(turn));
      events->note(true);
      return r;
    });
    std::unique_lock lock(events->mutex);
    REQUIRE(events->changed.wait_for(lock, std::chrono::seconds(60), [&] {
      return events->chat_done || events->summariser_asked;
    }));
    if (events->summariser_asked) {
      held = std::move(answer);
      break;
    }
    lock.unlock();
    const auto done = answer.get();
    REQUIRE(status_of(done) == 200);
    REQUIRE(json_field(body_of(done), "status") == "succeeded");
    if (conversation.empty()) {
      conversation = json_field(body_of(done), "conversation_id");
    }
  }
  REQUIRE_FALSE(conversation.empty());
  const int completed = turn - 1;
  const auto messages_path = "/api/v1/conversations/" + conversation + "/messages?limit=1";
  const auto before = std::stoi(json_field(body_of(s.call("GET", messages_path, ann)), "total"));
  CHECK(before >= 4 * completed);

  // SIGKILL while the summary is being written; the model server that held it is
  // replaced by one that answers, at the same address.
  s.restart(SIGKILL, [&] {
    mock.reset();
    mock = std::make_unique<mock_llm_fixture>(recording_mock(log, summariser::answers), port);
  });
  held.wait(); // the connection died with the troupe

  // Nothing was lost: every stored message is there, with no summary committed, and the
  // context is the whole history.
  const auto after = std::stoi(json_field(body_of(s.call("GET", messages_path, ann)), "total"));
  CHECK(after >= before);
  // Besides: the held turn's question, and its tool call and result when it had made
  // them before the summariser was asked.
  CHECK(after <= 4 * completed + 3);
  const auto context =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  CHECK_THAT(context, Catch::Contains(R"("summary":null)"));
  for (int n = 1; n <= completed; ++n) {
    INFO("turn " << n);
    CHECK_THAT(context, Catch::Contains(question(n)));
  }

  // The conversation goes on from the old history (reloaded, older turns shaped to their
  // question and answer, it may fit the window without a summary) or from a summary a
  // new pass wrote: either way every earlier turn reaches the model after the restart.
  const auto first_after = log->all().size();
  const auto next = chat(s, ann, conversation, question(turn + 1));
  REQUIRE(status_of(next) == 200);
  CHECK(json_field(body_of(next), "status") == "succeeded");
  const auto rounds = log->containing(question(turn + 1));
  REQUIRE_FALSE(rounds.empty());
  const auto since = log->all();
  std::string seen_after;
  for (auto i = first_after; i < since.size(); ++i) {
    seen_after += since[i];
  }
  for (int n = 1; n <= completed; ++n) {
    INFO("turn " << n);
    CHECK_THAT(seen_after, Catch::Contains(question(n)));
  }
  // The round holds each turn itself or the summary that stands for it.
  const bool summarised = rounds.front().find("[Context Compression Summary]") != std::string::npos;
  if (!summarised) {
    for (int n = 1; n <= completed; ++n) {
      INFO("turn " << n);
      CHECK_THAT(rounds.front(), Catch::Contains(question(n)));
    }
  }
  const auto context_after =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  // A later round of that turn may have summarised (the tool result added to it): the
  // summary now is the one written after the restart, or none.
  CHECK_THAT(context_after,
             Catch::Contains("FIRST SUMMARY") || Catch::Contains(R"("summary":null)"));
  if (summarised) {
    CHECK_THAT(context_after, Catch::Contains("FIRST SUMMARY"));
  }
}
