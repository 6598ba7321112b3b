// Context compression with the real `troupe serve` binary and mock-llm on loopback
// (issue 16): the mock records every request body, so the tests read what the model saw
// on every round — the budget, whole tool groups, the summary that stands for earlier
// turns, which model wrote it and how the next pass updates it.

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

troupe::mock::mock_llm_options recording_mock(std::shared_ptr<request_log> log,
                                              bool summariser_fails) {
  // The summariser's rules first: its request's last user message holds the turns.
  std::string script = "[";
  if (summariser_fails) {
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
  mock_llm_fixture mock(recording_mock(log, false));
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
  mock_llm_fixture mock(recording_mock(log, true));
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
