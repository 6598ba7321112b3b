// The routes whose reads grow with the data (a search, a page of rows and what each row
// needs) read on the blocking pool, never on a shard's thread: the node counts the SQLite
// reads made on each shard's thread (`troupe_shard_sqlite_reads_total{shard}`), and a
// round of list and search requests leaves that count where it was, while a route that
// still makes a point read there moves it (so the count is live, not a constant). What a
// conversation or a channel thread loads when a message wakes it (its rows, its history,
// a thread's binding) is read off the shards too: the message costs the shards no more
// reads than one to a live conversation or thread.

#include <csignal>
#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/callback_receiver.hpp"
#include "support/wait_until.hpp"
#include "support/webhook_channel.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

/// The sum of every `troupe_shard_sqlite_reads_total{…}` series on /metrics; -1 when
/// there is none.
double shard_reads(const api_server& s) {
  const auto body = body_of(s.call("GET", "/metrics", s.admin()));
  static const std::regex series("\ntroupe_shard_sqlite_reads_total\\{[^}]*\\} ([0-9.e+]+)");
  double sum = -1;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), series);
       it != std::sregex_iterator(); ++it) {
    sum = (sum < 0 ? 0 : sum) + std::stod((*it)[1].str());
  }
  return sum;
}

} // namespace

TEST_CASE("lists, pages and searches read off the shards, and a point read on one is counted",
          "[integration][shards]") {
  mock_llm_fixture mock;
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n",
               mock_provider_toml(mock) +
                   "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n");
  REQUIRE(s.port() != 0);
  const auto answer =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"pelicans fly"})");
  REQUIRE(status_of(answer) == 200);
  const auto conversation = json_field(body_of(answer), "conversation_id");
  REQUIRE_FALSE(conversation.empty());
  // The message is searchable once an index pass took it.
  REQUIRE(wait_until(
      [&] {
        const auto found = body_of(s.call("GET", "/api/v1/conversations?q=pelicans", s.admin()));
        return found.find(conversation) != std::string::npos;
      },
      10s));

  const auto before = shard_reads(s);
  REQUIRE(before >= 0);
  const char* routes[] = {"/api/v1/conversations?q=pelicans",
                          "/api/v1/conversations",
                          "/api/v1/runs",
                          "/api/v1/agents",
                          "/api/v1/providers",
                          "/api/v1/users",
                          "/api/v1/tokens",
                          "/api/v1/files",
                          "/api/v1/memories"};
  for (const char* route : routes) {
    INFO(route);
    CHECK(status_of(s.call("GET", route, s.admin())) == 200);
  }
  const auto messages = "/api/v1/conversations/" + conversation + "/messages?steps=true";
  const auto page = s.call("GET", messages, s.admin());
  CHECK(status_of(page) == 200);
  CHECK(body_of(page).find("pelicans fly") != std::string::npos);
  // Only the messages route's ownership check (a point read) ran on a shard.
  const auto after = shard_reads(s);
  CHECK(after - before <= 1);

  // A point read that still runs on the shard is counted.
  CHECK(status_of(s.call("GET", "/api/v1/conversations/" + conversation, s.admin())) == 200);
  CHECK(shard_reads(s) > after);
}

TEST_CASE("a passivated conversation is loaded off the shards when a message wakes it",
          "[integration][shards]") {
  mock_llm_fixture mock;
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n",
               mock_provider_toml(mock) +
                   "[actors]\nconversation_idle_ms = 1000\n"
                   "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n");
  REQUIRE(s.port() != 0);
  const auto first =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"herons wade"})");
  REQUIRE(status_of(first) == 200);
  const auto conversation = json_field(body_of(first), "conversation_id");
  REQUIRE_FALSE(conversation.empty());
  const auto message = [&](const std::string& text) {
    return s.call("POST", "/api/v1/chat", s.admin(),
                  R"({"conversation_id":")" + conversation + R"(","message":")" + text + "\"}");
  };
  const auto context = "/api/v1/conversations/" + conversation + "/context";
  const auto passivated = [&] {
    return wait_until(
        [&] {
          return body_of(s.call("GET", context, s.admin())).find("\"source\":\"stored\"") !=
                 std::string::npos;
        },
        20s);
  };

  // The reads a message to a live conversation makes on a shard (its route's point reads).
  REQUIRE(status_of(message("egrets stand")) == 200);
  const auto live_before = shard_reads(s);
  REQUIRE(status_of(message("storks circle")) == 200);
  const auto live_reads = shard_reads(s) - live_before;

  // The same message to a passivated one: its rows and history are read on the blocking
  // pool, so the shards make no read more than for a live one.
  REQUIRE(passivated());
  const auto before = shard_reads(s);
  const auto woken = message("cranes dance");
  REQUIRE(status_of(woken) == 200);
  CHECK(shard_reads(s) - before == live_reads);
  // It loaded with its history: the next prompt carries every earlier turn.
  const auto view = body_of(s.call("GET", context, s.admin()));
  CHECK(view.find("\"source\":\"live\"") != std::string::npos);
  for (const char* said : {"herons wade", "egrets stand", "storks circle", "cranes dance"}) {
    INFO(said);
    CHECK(view.find(said) != std::string::npos);
  }
}

TEST_CASE("a channel thread woken by a message reads its binding and conversation off the shards",
          "[integration][shards][channels]") {
  mock_llm_fixture mock;
  callback_receiver receiver;
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n",
               webhook_channel_config(mock.base_url(), receiver.url()));
  REQUIRE(s.port() != 0);
  std::size_t replies = 0;
  // One message to `thread`, answered at the callback: the shard reads it cost.
  const auto message = [&](const std::string& thread, const std::string& id) {
    const auto before = shard_reads(s);
    REQUIRE(status_of(deliver_webhook(s.port(), thread, "alice", id, "hello " + id)) == 200);
    ++replies;
    REQUIRE(wait_until([&] { return receiver.accepted() >= replies; }, 30s));
    return shard_reads(s) - before;
  };
  message("t-1", "m-1");
  // After a restart no thread or conversation is in memory: a message to another thread
  // first (what the node caches is read once), then t-1 wakes from its rows.
  s.restart(SIGTERM);
  REQUIRE(s.port() != 0);
  message("t-2", "m-2");
  const auto woken = message("t-1", "m-3");
  const auto live = message("t-1", "m-4");
  // The thread's binding (its row, its conversation, its archive mark) and the
  // conversation's history were read on the blocking pool.
  CHECK(woken == live);
  // The reply's recorded parts and the claimed outbox entry are read back by their writes
  // on the writer's thread: a message to a live thread costs its shard at most one read
  // (it was three).
  CHECK(live <= 1);
  CHECK(receiver.accepted() == 4);
}
