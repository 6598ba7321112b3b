// The routes whose reads grow with the data (a search, a page of rows and what each row
// needs) read on the blocking pool, never on a shard's thread: the node counts the SQLite
// reads made on each shard's thread (`troupe_shard_sqlite_reads_total{shard}`), and a
// round of list and search requests leaves that count where it was, while a route that
// still makes a point read there moves it (so the count is live, not a constant).

#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/wait_until.hpp"

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
