// Slash commands of a channel end to end, with the real `troupe serve` binary, a scripted
// mock-llm and a local receiver standing in for the generic webhook's callback_url: each
// command answered without the model (its reply through the outbox, once), /new and
// /continue moving the thread between conversations and archives, /stop cancelling a run
// the mock model holds, /compact through the compaction path, an unknown /x reaching the
// model, archives written from the conversation's messages, and the notice of a reply
// that ended dead-lettered.

#include <csignal>
#include <regex>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/callback_receiver.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "support/webhook_channel.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/database.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}},
    {"match": {"user": "slow"}, "reply": {"text": "Too late"}, "ttft_ms": 60000},
    {"match": {"user": "/frobnicate"}, "reply": {"text": "The model saw the command"}},
    {"match": {"user": "look around", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "ls", "arguments": {}}]}},
    {"match": {"user": "look around", "has_tool_result": true},
     "reply": {"text": "Looked around the workspace"}}
  ])";
  return scripted(script);
}

std::string config(const mock_llm_fixture& mock, const callback_receiver& receiver) {
  return webhook_channel_config(mock.base_url(), receiver.url(), R"(["ls", "finish"])", 120);
}

/// A reply's text: json_field's raw JSON string with its escapes (\n, \", \\) read.
std::string text_of(const std::string& body) {
  const auto raw = json_field(body, "text");
  std::string out;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\\' && i + 1 < raw.size()) {
      const char next = raw[++i];
      out += next == 'n' ? '\n' : next;
    } else {
      out += raw[i];
    }
  }
  return out;
}

struct channel_node {
  mock_llm_fixture mock{scripted_mock()};
  callback_receiver receiver;
  api_server server{"rate_per_second = 1000\nrate_burst = 1000\n", config(mock, receiver)};

  std::string deliver(const std::string& message_id, const std::string& text,
                      const std::string& sender = "alice",
                      const std::string& thread = "t-1") const {
    return deliver_webhook(server.port(), thread, sender, message_id, text);
  }
  /// Delivers a message, waits for the receiver to have accepted `replies` in all, and
  /// returns the text of the last request it got.
  std::string ask(const std::string& message_id, const std::string& text, std::size_t replies,
                  const std::string& sender = "alice", const std::string& thread = "t-1") const {
    REQUIRE(status_of(deliver(message_id, text, sender, thread)) == 200);
    REQUIRE(wait_until([&] { return receiver.accepted() >= replies; }, 30s));
    return text_of(receiver.requests().back().body);
  }
  std::string channel() const {
    return body_of(server.call("GET", "/api/v1/channels/hooks", server.admin()));
  }
  /// The texts the receiver got, in order.
  std::vector<std::string> texts() const {
    std::vector<std::string> out;
    for (const auto& r : receiver.requests()) {
      out.push_back(text_of(r.body));
    }
    return out;
  }
  /// The conversation the thread `thread` is bound to now.
  std::string conversation_of(const std::string& thread = "t-1") const {
    const auto body = body_of(server.call("GET", "/api/v1/channels/hooks/threads", server.admin()));
    const std::regex pattern("\"thread_key\":\"" + thread +
                             "\"[^}]*\"conversation_id\":\"([^\"]*)\"");
    std::smatch m;
    return std::regex_search(body, m, pattern) ? m[1].str() : std::string();
  }
};

/// Every archive in the data directory's database: title and summary.
std::vector<std::pair<std::string, std::string>>
stored_archives(const std::filesystem::path& data_dir) {
  auto c = troupe::storage::connection::open(troupe::storage::database_path(data_dir),
                                             {.read_only = true});
  REQUIRE(c);
  auto st = c->prepare("SELECT title, summary FROM channel_archives ORDER BY id");
  REQUIRE(st);
  std::vector<std::pair<std::string, std::string>> out;
  while (true) {
    auto row = st->step();
    REQUIRE(row);
    if (!*row) {
      break;
    }
    out.emplace_back(st->text(0), st->text(1));
  }
  return out;
}

} // namespace

TEST_CASE("/help is answered without the model, once, also when delivered again after a restart",
          "[integration][channels][commands]") {
  channel_node node;
  for (int i = 0; i < 3; ++i) {
    CHECK(status_of(node.deliver("m-1", "/help")) == 200);
  }
  REQUIRE(wait_until([&] { return node.receiver.accepted() == 1; }, 30s));
  const auto reply = node.receiver.requests().front();
  const auto text = json_field(reply.body, "text");
  CHECK_THAT(text, Catch::Contains("/continue N"));
  CHECK_THAT(text, Catch::Contains("/stop"));
  // Keyed by the message's journaled run id, part 0.
  CHECK(reply.header("X-Troupe-Idempotency-Key") == json_field(reply.body, "run_id") + ":0");
  // Recorded sent before the stop (else the part is sent again after it, by design).
  REQUIRE(wait_until([&] { return json_field(node.channel(), "sent") == "1"; }, 30s));
  node.server.restart(SIGTERM);
  REQUIRE(node.server.port() != 0);
  CHECK(status_of(node.deliver("m-1", "/help")) == 200);
  // A later message of the thread is answered after it: a second /help reply would be in.
  CHECK(node.ask("m-2", "hello", 2) == "Hi there");
  CHECK(node.texts().size() == 2);
  CHECK(node.mock.stats().completion_requests == 1);
}

TEST_CASE("/new archives the conversation and starts a fresh one, and /reset does the same",
          "[integration][channels][commands]") {
  channel_node node;
  CHECK(node.ask("m-1", "hello", 1) == "Hi there");
  const auto first = node.conversation_of();
  REQUIRE_FALSE(first.empty());
  CHECK(node.ask("m-2", "/new", 2) ==
        "Started a new conversation. The previous one is archived: /continue lists it.");
  const auto second = node.conversation_of();
  CHECK_FALSE(second.empty());
  CHECK(second != first);
  // The old conversation's archive, written without the model.
  const auto archives = stored_archives(node.server.data_dir());
  REQUIRE(archives.size() == 1);
  CHECK(archives[0].first == "hello");
  CHECK_THAT(archives[0].second, Catch::StartsWith("# hello\n"));
  CHECK_THAT(archives[0].second, Catch::Contains("## Recent decisions\n- Hi there"));
  // The new conversation takes the next message.
  CHECK(node.ask("m-3", "second", 3) == "Second answer");
  CHECK(node.conversation_of() == second);
  CHECK(node.ask("m-4", "/RESET", 4) ==
        "Started a new conversation. The previous one is archived: /continue lists it.");
  CHECK(node.conversation_of() != second);
  // An empty conversation is replaced, but nothing is archived.
  CHECK_THAT(node.ask("m-5", "/reset", 5), Catch::Contains("nothing was archived"));
  CHECK(stored_archives(node.server.data_dir()).size() == 2);
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("/continue lists the sender's archives and /continue N resumes one",
          "[integration][channels][commands]") {
  channel_node node;
  CHECK(status_of(node.deliver("m-1", "/continue")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.accepted() == 1; }, 30s));
  CHECK_THAT(node.texts()[0], Catch::StartsWith("No archived conversations yet."));
  CHECK(node.ask("m-2", "hello", 2) == "Hi there");
  const auto first = node.conversation_of();
  CHECK(node.ask("m-3", "/new", 3) != "");
  CHECK(node.ask("m-4", "second", 4) == "Second answer");
  CHECK(node.ask("m-5", "/new", 5) != "");
  // Newest first: `N. title — MM-DD HH:MM`.
  const auto listing = node.ask("m-6", "/continue", 6);
  const std::regex line1("^1\\. second \xE2\x80\x94 [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}\n"
                         "2\\. hello \xE2\x80\x94 [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}\n");
  CHECK(std::regex_search(listing, line1));
  CHECK(node.ask("m-7", "/archives", 7) == listing);
  // Out of range, or not a number: a clear message, nothing changes.
  const auto fresh = node.conversation_of();
  CHECK(node.ask("m-8", "/continue 3", 8) ==
        "There is no archive 3: pick a number from 1 to 2. /continue lists them.");
  CHECK(node.ask("m-9", "/continue abc", 9) ==
        "There is no archive abc: pick a number from 1 to 2. /continue lists them.");
  CHECK(node.conversation_of() == fresh);
  // Resume the older one: the thread is bound to it again, and it takes the next message.
  CHECK(node.ask("m-10", "/continue 2", 10) ==
        "Resumed \xE2\x80\x9Chello\xE2\x80\x9D. Carry on where you left off.");
  CHECK(node.conversation_of() == first);
  CHECK(node.ask("m-11", "second", 11) == "Second answer");
  CHECK(node.conversation_of() == first);
  // Another sender sees none of alice's archives.
  CHECK_THAT(node.ask("b-1", "/archives", 12, "bob", "t-2"),
             Catch::StartsWith("No archived conversations yet."));
  CHECK(node.mock.stats().completion_requests == 3);
}

TEST_CASE("/status and /stop while the mock model holds a run, and /stop with none active",
          "[integration][channels][commands]") {
  channel_node node;
  CHECK(node.ask("m-1", "/stop", 1) == "No answer is in progress: nothing to stop.");
  CHECK_THAT(node.ask("m-2", "/status", 2), Catch::Contains("Active run: none"));
  CHECK(status_of(node.deliver("m-3", "slow")) == 200);
  // The run is active once the model has its request (and holds it).
  REQUIRE(wait_until([&] { return node.mock.stats().completion_requests == 1; }, 30s));
  const auto status = node.ask("m-4", "/status", 3);
  CHECK_THAT(status, Catch::Contains("Conversation: hooks \xC2\xB7 t-1 ("));
  CHECK_THAT(status, Catch::Contains("Agent: helper, model mock-llm"));
  CHECK_THAT(status, Catch::Contains("Queued messages: 0"));
  const std::regex active("Active run: [0-9a-f-]{36} \\(running\\)");
  CHECK(std::regex_search(status, active));
  CHECK_THAT(node.ask("m-5", "/stop", 4), Catch::StartsWith("Stopped the answer in progress"));
  // The thread goes on; the cancelled run adds no reply of its own.
  CHECK(node.ask("m-6", "hello", 5) == "Hi there");
  const auto texts = node.texts();
  REQUIRE(texts.size() == 5);
  CHECK(std::count(texts.begin(), texts.end(), "Too late") == 0);
  CHECK_THAT(node.ask("m-7", "/status", 6), Catch::Contains("Active run: none"));
}

TEST_CASE("/compact compresses the conversation through the compaction path",
          "[integration][channels][commands]") {
  channel_node node;
  CHECK(node.ask("m-1", "hello", 1) == "Hi there");
  CHECK(node.ask("m-2", "second", 2) == "Second answer");
  const auto outcome = node.ask("m-3", "/compact", 3);
  // The run's compaction answer (compressed, or why not), not a model's reply.
  CHECK((outcome.starts_with("Compressed ") || outcome.starts_with("Nothing was compressed")));
  CHECK_THAT(outcome, !Catch::Contains("mock-llm reply"));
  // The conversation goes on.
  CHECK(node.ask("m-4", "hello", 4) == "Hi there");
}

TEST_CASE("an unknown /x goes to the model as an ordinary message",
          "[integration][channels][commands]") {
  channel_node node;
  CHECK(node.ask("m-1", "/frobnicate now", 1) == "The model saw the command");
  CHECK(node.mock.stats().completion_requests == 1);
}

TEST_CASE("the archive is regenerated as the conversation grows, tools counted",
          "[integration][channels][commands]") {
  channel_node node;
  CHECK(node.ask("m-1", "hello", 1) == "Hi there");
  CHECK(node.ask("m-2", "second", 2) == "Second answer");
  CHECK(node.ask("m-3", "look around", 3) == "Looked around the workspace");
  // Written without the model once the conversation has 6 messages (here 8).
  REQUIRE(wait_until([&] { return stored_archives(node.server.data_dir()).size() == 1; }, 30s));
  const auto archive = stored_archives(node.server.data_dir()).front();
  CHECK(archive.first == "hello");
  CHECK_THAT(archive.second, Catch::Contains("## Goals\n- hello\n- second\n- look around\n"));
  CHECK_THAT(archive.second, Catch::Contains("## Tools used\n- ls \xC3\x97 1\n"));
  CHECK_THAT(archive.second, Catch::Contains("- Looked around the workspace\n"));
  // The current conversation's archive is not offered to resume here.
  CHECK_THAT(node.ask("m-4", "/continue", 4), Catch::StartsWith("No archived conversations yet."));
}

TEST_CASE("after a reply ends dead-lettered the user is told once, before the next answer",
          "[integration][channels][commands]") {
  channel_node node;
  node.receiver.script({{400, "", R"({"error":"unknown thread"})"}});
  CHECK(status_of(node.deliver("m-1", "hello")) == 200);
  REQUIRE(wait_until(
      [&] {
        return json_field(
                   body_of(node.server.call("GET", "/api/v1/channels/hooks", node.server.admin())),
                   "dead") == "1";
      },
      30s));
  // The next message: the notice, then its answer.
  CHECK(node.ask("m-2", "second", 2) == "Second answer");
  const auto requests = node.receiver.requests();
  REQUIRE(requests.size() == 3); // the refused reply, the notice, the answer
  CHECK(json_field(requests[1].body, "text") ==
        "Note: an earlier reply could not be delivered here: \xE2\x80\x9CHi there\xE2\x80\x9D");
  // Once: the message after that (a command too) gets its answer alone.
  CHECK_THAT(node.ask("m-3", "/help", 3), Catch::StartsWith("Commands:"));
  CHECK(node.receiver.count() == 4);
}

TEST_CASE("a command's effect and reply survive a SIGKILL before the reply was delivered, once",
          "[integration][channels][commands]") {
  channel_node node;
  CHECK(node.ask("m-1", "hello", 1) == "Hi there");
  // The receiver refuses the /new reply for now: it is recorded, not delivered, at the kill.
  node.receiver.script({{503, "2", R"({"error":"busy"})"}});
  REQUIRE(status_of(node.deliver("m-2", "/new")) == 200);
  REQUIRE(wait_until([&] { return node.receiver.count() == 2; }, 30s));
  const auto fresh = node.conversation_of();
  node.server.restart(SIGKILL);
  REQUIRE(node.server.port() != 0);
  // The platform delivers the command again: the journal has it, nothing is repeated.
  CHECK(status_of(node.deliver("m-2", "/new")) == 200);
  CHECK(node.ask("m-3", "second", 3) == "Second answer");
  const auto texts = node.texts();
  CHECK(std::count(texts.begin(), texts.end(),
                   "Started a new conversation. The previous one is archived: /continue lists "
                   "it.") == 2); // the refused attempt and its delivery, same key
  CHECK(std::count(texts.begin(), texts.end(), "Second answer") == 1);
  const auto requests = node.receiver.requests();
  CHECK(requests[1].header("X-Troupe-Idempotency-Key") ==
        requests[2].header("X-Troupe-Idempotency-Key"));
  // One fresh conversation and one archive: the command ran once.
  CHECK(node.conversation_of() == fresh);
  CHECK(stored_archives(node.server.data_dir()).size() == 1);
  CHECK(node.mock.stats().completion_requests == 2);
}
