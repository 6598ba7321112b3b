// A channel's queue policies, session scopes and who owns what, end to end with the real
// `troupe serve` binary, a scripted mock-llm and a receiver standing in for the generic
// webhook's callback_url: `steer`, `collect` and `interrupt` through a channel; the
// `sender` and `thread_sender` scopes (threads, conversations, where replies go); and
// several senders in one thread under `thread` scope, where the conversation is the
// thread's but each sender's memory and archives stay their own.

#include <algorithm>
#include <csignal>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

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

/// A reply's text with its JSON escapes (\n, \", \\) read.
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

/// A node whose channel "hooks" has `channel_keys` and the agent the tools `tools`.
struct policy_node {
  policy_node(troupe::mock::mock_llm_options options, const std::string& channel_keys,
              const std::string& tools = R"(["finish"])", const std::string& agent_keys = {})
      : mock(std::move(options)),
        server("rate_per_second = 1000\nrate_burst = 1000\n",
               with_agent_keys(webhook_channel_config(mock.base_url(), receiver.url(), tools, 120,
                                                      channel_keys),
                               agent_keys)) {
    REQUIRE(server.port() != 0);
  }

  static std::string with_agent_keys(std::string config, const std::string& keys) {
    // The agent's table ends where the channel's begins.
    const auto at = config.find("[[channels]]");
    config.insert(at, keys);
    return config;
  }

  void deliver(const std::string& id, const std::string& text, const std::string& sender = "alice",
               const std::string& thread = "t-1") const {
    REQUIRE(status_of(deliver_webhook(server.port(), thread, sender, id, text)) == 200);
  }
  /// Delivers, waits for `replies` replies in all, returns the last one's text.
  std::string ask(const std::string& id, const std::string& text, std::size_t replies,
                  const std::string& sender = "alice", const std::string& thread = "t-1") const {
    deliver(id, text, sender, thread);
    REQUIRE(wait_until([&] { return receiver.accepted() >= replies; }, 30s));
    return text_of(receiver.requests().back().body);
  }
  std::vector<std::string> texts() const {
    std::vector<std::string> out;
    for (const auto& r : receiver.requests()) {
      out.push_back(text_of(r.body));
    }
    return out;
  }
  std::string threads() const {
    return body_of(server.call("GET", "/api/v1/channels/hooks/threads", server.admin()));
  }
  /// The conversation thread `key` is bound to, and its owner.
  std::pair<std::string, std::string> binding(const std::string& key) const {
    const std::regex pattern("\"thread_key\":\"" +
                             std::regex_replace(key, std::regex(R"(\|)"), R"(\|)") +
                             "\"[^}]*\"owner\":\"([^\"]*)\"[^}]*\"conversation_id\":\"([^\"]*)\"");
    const auto body = threads();
    std::smatch m;
    if (!std::regex_search(body, m, pattern)) {
      return {};
    }
    return {m[2].str(), m[1].str()};
  }
  std::string journal_done() const {
    return json_field(body_of(server.call("GET", "/api/v1/channels/hooks", server.admin())),
                      "done");
  }

  mock_llm_fixture mock;
  callback_receiver receiver;
  api_server server;
};

/// Every completion request the mock received.
struct request_log {
  std::mutex mutex;
  std::vector<std::string> bodies;
  std::size_t containing(const std::string& needle) {
    std::lock_guard lock(mutex);
    return static_cast<std::size_t>(std::count_if(bodies.begin(), bodies.end(), [&](auto& b) {
      return b.find(needle) != std::string::npos;
    }));
  }
};

/// The owner (user name) of every memory item, by key.
std::vector<std::pair<std::string, std::string>>
memory_owners(const std::filesystem::path& data_dir) {
  auto c = troupe::storage::connection::open(troupe::storage::database_path(data_dir),
                                             {.read_only = true});
  REQUIRE(c);
  auto st = c->prepare("SELECT m.memory_key, u.name FROM memory_items m JOIN users u ON "
                       "u.id = m.user_id ORDER BY m.id");
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

TEST_CASE("a channel with queue_policy steer hands a message to the run in progress: one reply "
          "answers both",
          "[integration][channels][policies]") {
  policy_node node(scripted(R"([
    {"match": {"user": "look around", "has_tool_result": false}, "ttft_ms": 1500,
     "reply": {"tool_calls": [{"name": "ls", "arguments": {}}]}},
    {"match": {"prompt": "also check the time", "has_tool_result": true},
     "reply": {"text": "Steered answer"}},
    {"match": {"has_tool_result": true}, "reply": {"text": "Unsteered answer"}}
  ])"),
                   "queue_policy = \"steer\"\n", R"(["ls", "finish"])");
  node.deliver("m-1", "look around");
  REQUIRE(wait_until([&] { return node.mock.stats().completion_requests == 1; }, 30s));
  node.deliver("m-2", "also check the time");
  REQUIRE(wait_until([&] { return node.receiver.accepted() >= 1; }, 30s));
  REQUIRE(wait_until([&] { return node.journal_done() == "2"; }, 30s));
  CHECK(node.texts() == std::vector<std::string>{"Steered answer"});
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("a channel with queue_policy collect merges the messages that wait into one run",
          "[integration][channels][policies]") {
  policy_node node(scripted(R"([
    {"match": {"user": "slow first"}, "ttft_ms": 1500, "reply": {"text": "First answer"}},
    {"match": {"user": "beta"}, "reply": {"text": "Collected answer"}}
  ])"),
                   "queue_policy = \"collect\"\n");
  node.deliver("m-1", "slow first");
  REQUIRE(wait_until([&] { return node.mock.stats().completion_requests == 1; }, 30s));
  node.deliver("m-2", "alpha");
  node.deliver("m-3", "beta");
  REQUIRE(wait_until([&] { return node.receiver.accepted() >= 2; }, 30s));
  REQUIRE(wait_until([&] { return node.journal_done() == "3"; }, 30s));
  CHECK(node.texts() == std::vector<std::string>{"First answer", "Collected answer"});
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("a channel with queue_policy interrupt cancels the run in progress for the new message",
          "[integration][channels][policies]") {
  policy_node node(scripted(R"([
    {"match": {"user": "slow first"}, "ttft_ms": 60000, "reply": {"text": "Too late"}},
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}}
  ])"),
                   "queue_policy = \"interrupt\"\n");
  node.deliver("m-1", "slow first");
  REQUIRE(wait_until([&] { return node.mock.stats().completion_requests == 1; }, 30s));
  node.deliver("m-2", "hello");
  REQUIRE(wait_until([&] { return node.receiver.accepted() >= 2; }, 30s));
  CHECK(node.texts() == std::vector<std::string>{"The run was cancelled.", "Hi there"});
  CHECK(node.mock.stats().completion_requests == 2);
}

TEST_CASE("session_scope sender: one conversation per sender across threads, each reply where "
          "its message was",
          "[integration][channels][policies]") {
  policy_node node(scripted(R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}}
  ])"),
                   "session_scope = \"sender\"\n");
  CHECK(node.ask("a-1", "hello", 1, "alice", "t-1") == "Hi there");
  CHECK(node.ask("a-2", "second", 2, "alice", "t-2") == "Second answer");
  CHECK(node.ask("b-1", "hello", 3, "bob", "t-1") == "Hi there");
  const auto requests = node.receiver.requests();
  CHECK(json_field(requests[0].body, "thread") == "t-1");
  CHECK(json_field(requests[1].body, "thread") == "t-2");
  CHECK(json_field(requests[2].body, "thread") == "t-1");
  CHECK(json_field(node.threads(), "total") == "2");
  const auto [alice_conversation, alice_owner] = node.binding("alice");
  const auto [bob_conversation, bob_owner] = node.binding("bob");
  CHECK(alice_owner == "channel:hooks:alice");
  CHECK(bob_owner == "channel:hooks:bob");
  CHECK_FALSE(alice_conversation.empty());
  CHECK(alice_conversation != bob_conversation);
  // Archives are the sender's: alice's /new archives hers, bob lists none of it.
  CHECK_THAT(node.ask("a-3", "/new", 4, "alice", "t-2"), Catch::StartsWith("Started a new"));
  CHECK_THAT(node.ask("b-2", "/continue", 5, "bob", "t-1"),
             Catch::StartsWith("No archived conversations yet."));
  CHECK_THAT(node.ask("a-4", "/continue", 6, "alice", "t-1"), Catch::StartsWith("1. hello"));
}

TEST_CASE("session_scope thread_sender: one conversation per sender in each thread",
          "[integration][channels][policies]") {
  policy_node node(scripted(R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}}
  ])"),
                   "session_scope = \"thread_sender\"\n");
  CHECK(node.ask("a-1", "hello", 1, "alice", "t-1") == "Hi there");
  CHECK(node.ask("a-2", "hello", 2, "alice", "t-2") == "Hi there");
  CHECK(node.ask("b-1", "hello", 3, "bob", "t-1") == "Hi there");
  CHECK(node.ask("a-3", "hello", 4, "alice", "t-1") == "Hi there");
  CHECK(json_field(node.threads(), "total") == "3");
  const auto a1 = node.binding("t-1|alice");
  const auto a2 = node.binding("t-2|alice");
  const auto b1 = node.binding("t-1|bob");
  CHECK(a1.second == "channel:hooks:alice");
  CHECK(a2.second == "channel:hooks:alice");
  CHECK(b1.second == "channel:hooks:bob");
  CHECK_FALSE(a1.first.empty());
  CHECK(a1.first != a2.first);
  CHECK(a1.first != b1.first);
  const auto requests = node.receiver.requests();
  CHECK(json_field(requests[1].body, "thread") == "t-2");
  CHECK(json_field(requests[2].body, "thread") == "t-1");
}

TEST_CASE("several senders in one thread share its conversation, never each other's memory or "
          "archives",
          "[integration][channels][policies][memory]") {
  auto log = std::make_shared<request_log>();
  auto options = scripted(R"([
    {"match": {"user": "remember my shell", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "memory", "arguments": {"action": "propose",
               "key": "shell", "kind": "preference", "content": "uses the fish shell"}}]}},
    {"match": {"has_tool_result": true}, "reply": {"text": "Done."}},
    {"match": {"user": "which shell", "prompt": "- [preference / shell] uses the fish shell"},
     "reply": {"text": "You use fish."}},
    {"match": {"user": "which shell"}, "reply": {"text": "I do not know."}},
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}}
  ])");
  options.observe = [log](const std::string& body) {
    std::lock_guard lock(log->mutex);
    log->bodies.push_back(body);
  };
  policy_node node(std::move(options), "", R"(["memory", "finish"])",
                   "memory_autoapprove = true\n");
  // Alice has the agent remember something in the group thread.
  CHECK(node.ask("a-1", "remember my shell", 1, "alice", "group") == "Done.");
  REQUIRE(wait_until([&] { return !memory_owners(node.server.data_dir()).empty(); }, 30s));
  const auto owners = memory_owners(node.server.data_dir());
  REQUIRE(owners.size() == 1);
  CHECK(owners[0] == std::pair<std::string, std::string>{"shell", "channel:hooks:alice"});
  // Bob, in the same thread (the same conversation), gets none of her memory...
  CHECK(node.ask("b-1", "which shell", 2, "bob", "group") == "I do not know.");
  // ...while her own runs there do.
  CHECK(node.ask("a-2", "which shell", 3, "alice", "group") == "You use fish.");
  CHECK(log->containing("- [preference / shell] uses the fish shell") == 1);
  // The thread's conversation is the thread's, not its first sender's.
  const auto [group_conversation, group_owner] = node.binding("group");
  CHECK(group_owner == "channel-thread:hooks:group");

  // Alice's own thread and its archive.
  CHECK(node.ask("a-3", "hello", 4, "alice", "alice-dm") == "Hi there");
  CHECK_THAT(node.ask("a-4", "/new", 5, "alice", "alice-dm"), Catch::StartsWith("Started a new"));
  // In the group, neither Bob nor Alice is offered that archive (it is not the group's).
  CHECK_THAT(node.ask("b-2", "/continue", 6, "bob", "group"),
             Catch::StartsWith("No archived conversations yet."));
  CHECK_THAT(node.ask("a-5", "/continue", 7, "alice", "group"),
             Catch::StartsWith("No archived conversations yet."));
  // Bob's /new archives the group's conversation for the group, not into Alice's list.
  CHECK_THAT(node.ask("b-3", "/new", 8, "bob", "group"), Catch::StartsWith("Started a new"));
  CHECK(node.binding("group").first != group_conversation);
  CHECK(node.binding("group").second == "channel-thread:hooks:group");
  const auto alice_list = node.ask("a-6", "/continue", 9, "alice", "alice-dm");
  CHECK_THAT(alice_list, Catch::StartsWith("1. hello"));
  CHECK_THAT(alice_list, !Catch::Contains("remember my shell"));
  CHECK_THAT(node.ask("a-7", "/continue", 10, "alice", "group"),
             Catch::StartsWith("1. remember my shell"));
}

TEST_CASE("a channel run queued behind another in a shared thread keeps its sender's memory "
          "when a restart resumes it",
          "[integration][channels][policies][memory]") {
  auto log = std::make_shared<request_log>();
  auto options = scripted(R"([
    {"match": {"user": "remember my shell", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "memory", "arguments": {"action": "propose",
               "key": "shell", "kind": "preference", "content": "uses the fish shell"}}]}},
    {"match": {"has_tool_result": true}, "reply": {"text": "Done."}},
    {"match": {"user": "hold"}, "ttft_ms": 600000, "reply": {"text": "too late"}},
    {"match": {"user": "which shell", "prompt": "- [preference / shell] uses the fish shell"},
     "reply": {"text": "You use fish."}},
    {"match": {"user": "which shell"}, "reply": {"text": "I do not know."}}
  ])");
  options.observe = [log](const std::string& body) {
    std::lock_guard lock(log->mutex);
    log->bodies.push_back(body);
  };
  policy_node node(std::move(options), "", R"(["memory", "finish"])",
                   "memory_autoapprove = true\n");
  CHECK(node.ask("a-1", "remember my shell", 1, "alice", "group") == "Done.");
  REQUIRE(wait_until([&] { return !memory_owners(node.server.data_dir()).empty(); }, 30s));
  // Bob's run holds the group's conversation; alice's message queues behind it (its run
  // row is stored, not started) when troupe is killed.
  const auto completions = node.mock.stats().completion_requests;
  node.deliver("b-1", "hold", "bob", "group");
  REQUIRE(
      wait_until([&] { return node.mock.stats().completion_requests == completions + 1; }, 30s));
  node.deliver("a-2", "which shell", "alice", "group");
  const auto processing = [&] {
    return json_field(
        body_of(node.server.call("GET", "/api/v1/channels/hooks", node.server.admin())),
        "processing");
  };
  REQUIRE(wait_until([&] { return processing() == "2"; }, 30s));

  node.server.restart(SIGKILL);
  REQUIRE(node.server.port() != 0);
  // Bob's run was cut off (its notice); alice's queued run is resumed with her memory,
  // not the thread's (which holds none).
  REQUIRE(wait_until([&] { return node.receiver.accepted() >= 3; }, 60s));
  const auto texts = node.texts();
  REQUIRE(texts.size() == 3);
  CHECK_THAT(texts[1], Catch::Contains("interrupted by a restart"));
  CHECK(texts[2] == "You use fish.");
  CHECK(log->containing("- [preference / shell] uses the fish shell") == 1);
}
