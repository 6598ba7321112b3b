// Context compression with the real `troupe serve` binary and mock-llm on loopback
// (issue 16): the mock records every request body, so the tests read what the model saw
// on every round — the budget, whole tool groups, the summary that stands for earlier
// turns, which model wrote it and how the next pass updates it.

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/storage/database.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

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
  return "[compression]\ntrigger = 0.5\nprotect_head = 1\nprotect_tail = 6\nmin_middle = 3\n" +
         mock_provider_toml(mock) +
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

/// One turn through the streaming route: the run's events as they were sent, and the
/// outcome the `done` event carried.
struct streamed_turn {
  int status = 0;
  std::string conversation;
  /// The `done` event's data.
  std::string outcome;
  /// The whole event stream.
  std::string events;
};

streamed_turn stream_chat(const api_server& s, const std::string& token,
                          const std::string& conversation, const std::string& message) {
  std::string body = R"({"agent":"long","message":")" + message + "\"";
  if (!conversation.empty()) {
    body += R"(,"conversation_id":")" + conversation + "\"";
  }
  const auto raw = s.call("POST", "/api/v1/chat/stream", token, body + "}");
  streamed_turn out;
  out.status = status_of(raw);
  out.conversation = header_value(raw, "X-Troupe-Conversation-Id");
  out.events = dechunked_body_of(raw);
  const auto done = out.events.find("event: done\n");
  if (done != std::string::npos) {
    const auto data = out.events.find("data: ", done);
    const auto end = out.events.find('\n', data);
    out.outcome = out.events.substr(data + 6, end - data - 6);
  }
  return out;
}

/// Every page of the conversation's messages with each run's steps.
std::string all_steps(const api_server& s, const std::string& token,
                      const std::string& conversation) {
  std::string out;
  for (int offset = 0;; offset += 200) {
    const auto page =
        body_of(s.call("GET",
                       "/api/v1/conversations/" + conversation +
                           "/messages?steps=true&limit=200&offset=" + std::to_string(offset),
                       token));
    out += page;
    if (offset + 200 >= std::stoi(json_field(page, "total"))) {
      return out;
    }
  }
}

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
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

  // Every turn through the streaming route: its events say when it compressed.
  std::string conversation;
  std::size_t compressed_turns = 0;
  std::size_t compressed_events = 0;
  for (int turn = 1; turn <= 60; ++turn) {
    INFO("turn " << turn);
    const auto answer = stream_chat(s, ann, conversation, question(turn));
    REQUIRE(answer.status == 200);
    CHECK(json_field(answer.outcome, "status") == "succeeded");
    conversation = answer.conversation;
    compressed_events += occurrences(answer.events, R"("type":"context.compressed")");
    if (const auto at = answer.events.find(R"("type":"context.compressed")");
        at != std::string::npos) {
      ++compressed_turns;
      // The event carries its sizes.
      const auto line = answer.events.substr(at, answer.events.find('\n', at) - at);
      for (const auto* field : {"tokens_before", "tokens_after", "messages_covered"}) {
        INFO(field);
        CHECK(std::regex_search(line, std::regex("\"" + std::string(field) + "\":[1-9]")));
      }
    }
  }
  // The context.compressed event reached the stream of every turn that compressed (the
  // first summary and the updates).
  CHECK(compressed_turns >= 2);

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
  // The system note, said once; the summary message, once.
  CHECK(occurrences(last, "Earlier turns of this conversation were compressed") == 1);
  CHECK(occurrences(last, "[Context Compression Summary]\\n") == 1);
  CHECK_THAT(last, !Catch::Contains(question(2)));
  // The head (the first message) stays.
  CHECK_THAT(last, Catch::Contains(question(1)));

  // Only the prompt was compressed: every message is stored and listed.
  const auto messages =
      s.call("GET", "/api/v1/conversations/" + conversation + "/messages?limit=1", ann);
  REQUIRE(status_of(messages) == 200);
  CHECK(json_field(body_of(messages), "total") == "240"); // 60 x question, call, result, answer

  // The run steps say so, under the event's name; no round dropped a message to fit.
  const auto steps = all_steps(s, ann, conversation);
  CHECK(occurrences(steps, R"("name":"context.compressed")") == compressed_events);
  CHECK_THAT(steps, Catch::Contains(R"("updated_previous":true)"));
  CHECK_THAT(steps, !Catch::Contains(R"("name":"context_budget")"));

  // What the next prompt would contain: the summary, then the kept messages.
  const auto context = s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann);
  REQUIRE(status_of(context) == 200);
  const auto view = body_of(context);
  CHECK_THAT(view, Catch::Contains("UPDATED SUMMARY"));
  CHECK_THAT(view, Catch::Contains(question(60)));
  CHECK_THAT(view, !Catch::Contains(question(2)));
  CHECK(std::stoul(json_field(view, "estimated_tokens")) < window);
  // Asked of the live conversation, with every fixed part of the prompt counted.
  CHECK(json_field(view, "source") == "live");
  CHECK(std::stoul(json_field(view, "system_tokens")) > 0);
  CHECK(std::stoul(json_field(view, "tool_tokens")) > 0);
  CHECK(std::stoul(json_field(view, "estimated_tokens")) ==
        std::stoul(json_field(view, "history_tokens")) +
            std::stoul(json_field(view, "system_tokens")) +
            std::stoul(json_field(view, "tool_tokens")));
  CHECK(json_field(view, "context_window") == std::to_string(window));
  CHECK(std::stoul(json_field(view, "tokens_after")) > 0);

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
  // The answer carries the sizes, as numbers: the prompt shrank.
  std::smatch sizes;
  const auto said = json_field(body_of(compact), "content");
  REQUIRE(std::regex_match(said, sizes,
                           std::regex(R"(Compressed ([0-9]+) earlier messages into a summary of )"
                                      R"(([0-9]+) tokens \(([0-9]+) characters\); the prompt went )"
                                      R"(from ([0-9]+) to ([0-9]+) estimated tokens\.)")));
  CHECK(std::stoul(sizes[1].str()) >= 3);
  CHECK(std::stoul(sizes[2].str()) > 0);
  CHECK(std::stoul(sizes[3].str()) ==
        std::string("## Goal\nFIRST SUMMARY of the numbered questions.").size());
  CHECK(std::stoul(sizes[5].str()) < std::stoul(sizes[4].str()));
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

namespace {

/// A blocking chat allowed `bound` to answer (a run of many rounds on a loaded machine
/// takes longer than `http_exchange`'s minute).
std::string long_chat(const api_server& s, const std::string& token, const std::string& agent,
                      const std::string& conversation, const std::string& message,
                      std::chrono::seconds bound) {
  std::string body = R"({"agent":")" + agent + R"(","message":")" + message + "\"";
  if (!conversation.empty()) {
    body += R"(,"conversation_id":")" + conversation + "\"";
  }
  body += "}";
  raw_client c(s.port());
  c.send("POST /api/v1/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
         "Authorization: Bearer " +
         token + "\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body);
  return c.read_until_closed(bound);
}

const std::string long_task = "the long task: read notes.txt again and again";

/// mock-llm for one long run: the summariser, short turns, then a read per round (a
/// different offset each time, so the loop guard lets them be) until call 160.
troupe::mock::mock_llm_options long_run_mock(std::shared_ptr<request_log> log) {
  std::string script = R"([
    {"match": {"prompt": "<previous_summary>"},
     "reply": {"text": "## Goal\nRUN SUMMARY UPDATED"}},
    {"match": {"prompt": ")" +
                       summariser_words + R"("},
     "reply": {"text": "## Goal\nRUN SUMMARY"}},
    {"match": {"user": "short turn"}, "reply": {"text": "Noted."}},)";
  for (int call = 1; call <= 160; ++call) {
    script += R"({"match": {"user": "the long task", "call": )" + std::to_string(call) +
              R"(}, "reply": {"tool_calls": [{"name": "read", "arguments": {"file_path": )"
              R"("notes.txt", "offset": )" +
              std::to_string(call) + R"(, "limit": 30}}]}},)";
  }
  script += R"({"match": {"user": "the long task"}, "reply": {"text": "The long task is done."}}])";
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(script);
  REQUIRE(rules);
  o.rules = std::move(*rules);
  o.observe = [log](const std::string& body) { log->add(body); };
  return o;
}

} // namespace

TEST_CASE("a single run of many tool rounds stays under a small context window by compressing "
          "its own earlier rounds, its objective kept, no tool group split and nothing dropped",
          "[integration][compression]") {
  auto log = std::make_shared<request_log>();
  mock_llm_fixture mock(long_run_mock(log));
  constexpr unsigned window = 4096;
  api_server s(api_limits,
               "[compression]\ntrigger = 0.5\nprotect_head = 1\nprotect_tail = 6\nmin_middle = 3\n"
               "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
                   mock.base_url() +
                   "\"\n[[agents]]\nname = \"runner\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
                   "fast_model = \"mock-fast\"\ntimeout_s = 600\nmax_rounds = 200\nmemory = false\n"
                   "tools = [\"read\"]\ncontext_window = " +
                   std::to_string(window) + "\n");
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");

  // Three short turns first: the long run's objective then sits after earlier history,
  // in the middle that compression summarises, and must stay.
  std::string conversation;
  for (int i = 1; i <= 3; ++i) {
    const auto answer =
        long_chat(s, ann, "runner", conversation, "short turn " + std::to_string(i), 60s);
    REQUIRE(status_of(answer) == 200);
    conversation = json_field(body_of(answer), "conversation_id");
  }
  // The file the run reads, 250 lines of 60 characters, in the conversation's workspace.
  {
    const auto workspace = s.data_dir() / "workspaces" / conversation;
    std::filesystem::create_directories(workspace);
    std::ofstream notes(workspace / "notes.txt");
    for (int i = 0; i < 250; ++i) {
      notes << "line " << i << " " << std::string(50, 'n') << "\n";
    }
  }
  const auto answer = long_chat(s, ann, "runner", conversation, long_task, 600s);
  REQUIRE(status_of(answer) == 200);
  CHECK(json_field(body_of(answer), "status") == "succeeded");
  CHECK_THAT(json_field(body_of(answer), "content"), Catch::StartsWith("The long task is done."));

  std::vector<std::string> rounds;
  for (const auto& body : log->containing(long_task)) {
    if (is_main_round(body)) {
      rounds.push_back(body);
    }
  }
  // At least 60 reads, one round each, and the final answer.
  CHECK(rounds.size() >= 61);
  bool pruned_seen = false;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    INFO("round " << i + 1);
    const auto& body = rounds[i];
    CHECK(body.size() / 4 <= window);
    CHECK(tool_groups_whole(body));
    // The objective is in every round, once.
    CHECK(occurrences(body, long_task) == 1);
    pruned_seen = pruned_seen || body.find("tool output pruned cut:") != std::string::npos;
  }
  CHECK(pruned_seen);
  // Late rounds stand on the summary of the run's own earlier rounds, the objective after it.
  const auto& last = rounds.back();
  const auto summary_at = last.find("[Context Compression Summary]");
  REQUIRE(summary_at != std::string::npos);
  CHECK(last.find(long_task) > summary_at);
  CHECK_THAT(last, Catch::Contains("RUN SUMMARY UPDATED"));
  CHECK_THAT(last, !Catch::Contains("short turn 2"));
  // The summariser saw the run's own rounds and the objective, marked as kept.
  const auto summaries = log->containing(summariser_words);
  REQUIRE_FALSE(summaries.empty());
  CHECK_THAT(summaries.back(), Catch::Contains("[tool result of read]"));

  // The run's steps: pruning, compression, and no message dropped to fit the window.
  const auto steps = all_steps(s, ann, conversation);
  CHECK_THAT(steps, Catch::Contains(R"("name":"context_pruned")"));
  CHECK_THAT(steps, Catch::Contains(R"("name":"context.compressed")"));
  CHECK_THAT(steps, !Catch::Contains(R"("name":"context_budget")"));

  // Loaded back after a restart, the conversation starts from the summary: the first
  // question (the head), the summary, the long task (kept after it) and its answer.
  s.restart();
  const auto view =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  CHECK(json_field(view, "source") == "stored");
  CHECK(json_field(view, "first_message_id") != "0");
  const auto context = view.substr(view.find(R"("messages":[)"));
  const auto head = context.find("short turn 1");
  const auto summary = context.find("RUN SUMMARY");
  const auto objective = context.find(long_task);
  const auto done = context.find("The long task is done.");
  REQUIRE(head != std::string::npos);
  REQUIRE(summary != std::string::npos);
  REQUIRE(objective != std::string::npos);
  REQUIRE(done != std::string::npos);
  CHECK(head < summary);
  CHECK(summary < objective);
  CHECK(objective < done);
  CHECK(context.find("short turn 2") == std::string::npos);
  CHECK(context.find("short turn 3") == std::string::npos);
}

TEST_CASE("a troupe killed after the summary is committed and before the turn ends continues "
          "from the summary after the restart",
          "[integration][compression]") {
  auto log = std::make_shared<request_log>();
  auto events = std::make_shared<turn_events>();
  // The summariser answers; the first main round that carries the summary is held.
  auto holding_mock = recording_mock(log, summariser::answers);
  auto held_rule = troupe::mock::parse_mock_script(
      R"([{"match": {"prompt": "[Context Compression Summary]"}, "ttft_ms": 600000}])");
  REQUIRE(held_rule);
  // After the summariser's rules (which also hold the marker only in their answers).
  holding_mock.rules.insert(holding_mock.rules.begin() + 2, held_rule->begin(), held_rule->end());
  holding_mock.observe = [log, events](const std::string& body) {
    log->add(body);
    if (is_main_round(body) && body.find("[Context Compression Summary]") != std::string::npos) {
      events->note(false);
    }
  };
  auto mock = std::make_unique<mock_llm_fixture>(std::move(holding_mock));
  const auto port = mock->port();
  api_server s(api_limits, config(*mock, 2048));
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");

  // Turns until one's round waits with the summary in its prompt.
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
  const auto messages_path = "/api/v1/conversations/" + conversation + "/messages?limit=1";
  const auto before = std::stoi(json_field(body_of(s.call("GET", messages_path, ann)), "total"));

  s.restart(SIGKILL, [&] {
    mock.reset();
    mock = std::make_unique<mock_llm_fixture>(recording_mock(log, summariser::answers), port);
  });
  held.wait();

  // The summary was committed: the stored context starts from it, every message is kept.
  const auto after = std::stoi(json_field(body_of(s.call("GET", messages_path, ann)), "total"));
  CHECK(after >= before);
  const auto context =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  CHECK(json_field(context, "source") == "stored");
  CHECK_THAT(context, Catch::Contains("FIRST SUMMARY"));
  CHECK_THAT(context, !Catch::Contains(question(2)));
  CHECK(json_field(context, "first_message_id") != "0");

  // The next turn starts from the summary.
  const auto next = chat(s, ann, conversation, question(turn + 1));
  REQUIRE(status_of(next) == 200);
  CHECK(json_field(body_of(next), "status") == "succeeded");
  const auto rounds = log->containing(question(turn + 1));
  REQUIRE_FALSE(rounds.empty());
  CHECK_THAT(rounds.front(), Catch::Contains("[Context Compression Summary]\\n## Goal\\n"));
  CHECK_THAT(rounds.front(), !Catch::Contains(question(2)));
  CHECK_THAT(rounds.front(), Catch::Contains(question(1)));
}

TEST_CASE("a summary that cannot be stored leaves the history intact, as a recorded step",
          "[integration][compression]") {
  auto log = std::make_shared<request_log>();
  mock_llm_fixture mock(recording_mock(log, summariser::answers));
  api_server s(api_limits, config(mock, 6144));
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");
  // The database refuses every summary from now on.
  {
    auto db = troupe::storage::open_writer(troupe::storage::database_path(s.data_dir()),
                                           troupe::storage::sync_mode::normal);
    REQUIRE(db);
    REQUIRE(db->exec("CREATE TRIGGER refuse_summaries BEFORE INSERT ON context_summaries "
                     "BEGIN SELECT RAISE(ABORT, 'summaries are refused here'); END;"));
  }
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
  // The summariser answered, and its summary was not kept.
  REQUIRE_FALSE(log->containing(summariser_words).empty());
  const auto steps = all_steps(s, ann, conversation);
  CHECK_THAT(steps, Catch::Contains(R"("name":"context_compression","status":"failed")"));
  CHECK_THAT(steps, Catch::Contains("the summary could not be stored"));
  CHECK_THAT(steps, Catch::Contains(R"("history_kept":true)"));
  CHECK_THAT(steps, !Catch::Contains(R"("name":"context.compressed")"));
  // Every round after it still carries the whole history, with no summary.
  const auto last = log->containing(question(24)).back();
  for (int turn = 1; turn <= 23; ++turn) {
    INFO("turn " << turn);
    CHECK_THAT(last, Catch::Contains(question(turn)));
  }
  CHECK_THAT(last, !Catch::Contains("[Context Compression Summary]"));
  const auto context =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  CHECK_THAT(context, Catch::Contains(R"("summary":null)"));
}

TEST_CASE("a long conversation's context brought back after a restart holds its newest three "
          "turns in full, the five before them cut and older ones as question and answer",
          "[integration][compression]") {
  auto log = std::make_shared<request_log>();
  mock_llm_fixture mock(recording_mock(log, summariser::answers));
  api_server s(api_limits, config(mock, 2048));
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");
  // Questions of 900 characters and more: a cut turn keeps 500 of them.
  const auto long_question = [](int n) {
    return "question " + std::to_string(n) + " " + std::string(900, 'q');
  };
  std::string conversation;
  for (int turn = 1; turn <= 10; ++turn) {
    const auto answer = chat(s, ann, conversation, long_question(turn), "roomy");
    REQUIRE(status_of(answer) == 200);
    if (conversation.empty()) {
      conversation = json_field(body_of(answer), "conversation_id");
    }
  }
  // In memory, the conversation holds every turn in full.
  auto live = body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  CHECK(json_field(live, "source") == "live");
  CHECK(occurrences(live, "message cut:") == 0);

  s.restart();
  const auto stored =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/context", ann));
  CHECK(json_field(stored, "source") == "stored");
  REQUIRE(status_of(chat(s, ann, conversation, long_question(11), "roomy")) == 200);
  const auto rounds = log->containing(long_question(11));
  REQUIRE_FALSE(rounds.empty());
  const auto& prompt = rounds.front();
  for (const auto* seen : {&prompt, &stored}) {
    const auto& text = *seen;
    // The newest three turns in full, and the oldest two (as question and answer: their
    // stored turns hold nothing else once the run's own tool rounds stay with it).
    for (const int turn : {1, 2, 8, 9, 10}) {
      INFO("turn " << turn);
      CHECK_THAT(text, Catch::Contains(long_question(turn)));
    }
    // The five before the newest three: their first 500 characters, then the marker.
    for (int turn = 3; turn <= 7; ++turn) {
      INFO("turn " << turn);
      CHECK_THAT(text, !Catch::Contains(long_question(turn)));
      CHECK_THAT(text, Catch::Contains(long_question(turn).substr(0, 480)));
    }
    CHECK(occurrences(text, "message cut:") == 5);
  }
  // No tool group of an earlier run came back with them, and no summary was needed.
  CHECK(occurrences(prompt, "\"tool_call_id\"") == 0);
  CHECK_THAT(prompt, !Catch::Contains("[Context Compression Summary]"));
}
