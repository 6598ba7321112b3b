// The node's bounds over loopback, against the real `troupe serve` binary: a
// conversation's pending messages (`actors.max_pending`), the store writer's backlog
// (`storage.writer_max_queue`), the history window given to the model
// (`actors.history_max_tokens`) and the per-address limit on requests without a valid
// token.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <sqlite3.h>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "support/write_lock.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

// "hold" streams 200 words 50 ms apart (a run that stays active until it is cancelled);
// anything else gets mock-llm's default text at once.
troupe::mock::mock_llm_options holding_mock() {
  std::string words;
  for (int i = 1; i <= 200; ++i) {
    words += (i > 1 ? " h" : "h") + std::to_string(i);
  }
  const auto script = R"([{"match": {"user": "hold"}, "reply": {"text": ")" + words +
                      R"("}, "token_delay_ms": 50}])";
  return scripted(script);
}

std::string worker_catalog(const mock_llm_fixture& mock, const std::string& actors_toml) {
  return "[actors]\n" + actors_toml + mock_provider_toml(mock) +
         "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "timeout_s = 60\n";
}

const std::string generous_rates = "rate_per_second = 1000\nrate_burst = 1000\n";

// One request with Connection: close from the loopback address `source` (any of
// 127.0.0.0/8 reaches the server), and the whole raw answer; empty when it cannot connect.
std::string exchange_from(const char* source, std::uint16_t port, std::string_view target,
                          const std::string& token) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0 &&
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
    std::string request =
        "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n";
    if (!token.empty()) {
      request += "Authorization: Bearer " + token + "\r\n";
    }
    request += "\r\n";
    (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    char buffer[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      const auto n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        break;
      }
      answer.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return answer;
}

std::string run_status(const api_server& s, const std::string& run) {
  return json_field(body_of(s.call("GET", "/api/v1/runs/" + run, s.admin())), "status");
}

} // namespace

TEST_CASE("a conversation past actors.max_pending answers 429 naming the limit on every "
          "submitting route and stores nothing of the refused message",
          "[integration][bounds]") {
  mock_llm_fixture mock(holding_mock());
  api_server s(generous_rates, worker_catalog(mock, "max_pending = 2\n"));
  REQUIRE(s.port() != 0);
  const auto first =
      s.call("POST", "/api/v1/runs", s.admin(), R"({"agent":"worker","message":"hold"})");
  REQUIRE(status_of(first) == 202);
  const auto active = json_field(body_of(first), "run_id");
  const auto conversation = json_field(body_of(first), "conversation_id");
  const auto in_conversation = [&](const std::string& text) {
    return R"({"conversation_id":")" + conversation + R"(","message":")" + text + R"("})";
  };
  // The active run holds the conversation: two messages may wait behind it.
  const auto one = s.call("POST", "/api/v1/runs", s.admin(), in_conversation("queued one"));
  const auto two = s.call("POST", "/api/v1/runs", s.admin(), in_conversation("queued two"));
  REQUIRE(status_of(one) == 202);
  REQUIRE(status_of(two) == 202);

  const auto refused = s.call("POST", "/api/v1/runs", s.admin(), in_conversation("refused"));
  CHECK(status_of(refused) == 429);
  CHECK_THAT(body_of(refused), Catch::Contains("2 pending messages (actors.max_pending)"));
  CHECK(header_value(refused, "Retry-After") == "1");
  const auto chat = s.call("POST", "/api/v1/chat", s.admin(), in_conversation("refused"));
  CHECK(status_of(chat) == 429);
  CHECK_THAT(body_of(chat), Catch::Contains("actors.max_pending"));
  const auto stream = s.call("POST", "/api/v1/chat/stream", s.admin(), in_conversation("refused"));
  CHECK(status_of(stream) == 429);
  const auto completion =
      s.call("POST", "/v1/chat/completions", s.admin(),
             R"({"model":"worker","messages":[{"role":"user","content":"refused"}]})",
             "X-Troupe-Conversation: " + conversation + "\r\n");
  CHECK(status_of(completion) == 429);
  CHECK_THAT(body_of(completion), Catch::Contains("actors.max_pending"));

  // Every acknowledged message is stored; no refused one is.
  const auto messages =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/messages", s.admin()));
  CHECK_THAT(messages, Catch::Contains("queued one") && Catch::Contains("queued two") &&
                           !Catch::Contains("refused"));

  // Once the queue drains, the conversation takes messages again, and the queued runs ran.
  REQUIRE(status_of(s.call("DELETE", "/api/v1/runs/" + active, s.admin())) == 202);
  const auto second_queued = json_field(body_of(two), "run_id");
  REQUIRE(wait_until([&] { return run_status(s, second_queued) == "succeeded"; }, 20s));
  CHECK(run_status(s, json_field(body_of(one), "run_id")) == "succeeded");
  CHECK(status_of(s.call("POST", "/api/v1/runs", s.admin(), in_conversation("later"))) == 202);
}

TEST_CASE("a round's prompt carries the newest earlier turns within actors.history_max_tokens "
          "and drops the oldest whole messages",
          "[integration][bounds]") {
  // What the model answers says what its prompt held.
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(R"([
    {"match": {"user": "what do you remember", "prompt": "OLDEST-MARKER"},
     "reply": {"text": "I still see the oldest message"}},
    {"match": {"user": "what do you remember", "prompt": "recent-note"},
     "reply": {"text": "only the recent turns"}}
  ])");
  REQUIRE(rules);
  o.rules = std::move(*rules);
  mock_llm_fixture mock(std::move(o));
  SECTION("with a 100-token window the 200-token oldest turn is left out") {
    api_server s(generous_rates, worker_catalog(mock, "history_max_tokens = 100\n"));
    REQUIRE(s.port() != 0);
    const auto first =
        s.call("POST", "/api/v1/chat", s.admin(),
               R"({"agent":"worker","message":"OLDEST-MARKER )" + std::string(800, 'x') + "\"}");
    REQUIRE(status_of(first) == 200);
    const auto conversation = json_field(body_of(first), "conversation_id");
    const auto say = [&](const std::string& text) {
      return s.call("POST", "/api/v1/chat", s.admin(),
                    R"({"conversation_id":")" + conversation + R"(","message":")" + text + "\"}");
    };
    REQUIRE(status_of(say("recent-note")) == 200);
    const auto asked = say("what do you remember");
    REQUIRE(status_of(asked) == 200);
    CHECK(json_field(body_of(asked), "content") == "only the recent turns");
  }
  SECTION("with the default window the same conversation keeps every turn") {
    api_server s(generous_rates, worker_catalog(mock, ""));
    REQUIRE(s.port() != 0);
    const auto first =
        s.call("POST", "/api/v1/chat", s.admin(),
               R"({"agent":"worker","message":"OLDEST-MARKER )" + std::string(800, 'x') + "\"}");
    REQUIRE(status_of(first) == 200);
    const auto conversation = json_field(body_of(first), "conversation_id");
    const auto asked =
        s.call("POST", "/api/v1/chat", s.admin(),
               R"({"conversation_id":")" + conversation + R"(","message":"what do you remember"})");
    REQUIRE(status_of(asked) == 200);
    CHECK(json_field(body_of(asked), "content") == "I still see the oldest message");
  }
}

TEST_CASE("requests without a valid token are limited per client address with 429 and "
          "Retry-After, before any token is looked up, and other addresses are not",
          "[integration][bounds]") {
  api_server s("unauthenticated_rate_per_second = 0.01\nunauthenticated_rate_burst = 3\n");
  REQUIRE(s.port() != 0);
  const std::string guessed = "trp_0123456789abcdef";
  for (int i = 0; i < 3; ++i) {
    CHECK(status_of(exchange_from("127.0.0.7", s.port(), "/api/v1/me", guessed)) == 401);
  }
  const auto limited = exchange_from("127.0.0.7", s.port(), "/api/v1/me", guessed);
  CHECK(status_of(limited) == 429);
  CHECK_THAT(body_of(limited), Catch::Contains("without a valid token from this address"));
  const auto wait = header_value(limited, "Retry-After");
  REQUIRE_FALSE(wait.empty());
  CHECK(std::stol(wait) >= 1);
  // No header at all counts the same, and the real token learns nothing from there either.
  CHECK(status_of(exchange_from("127.0.0.7", s.port(), "/api/v1/me", "")) == 429);
  CHECK(status_of(exchange_from("127.0.0.7", s.port(), "/api/v1/me", s.admin())) == 429);
  // Another address is not limited by it; open routes are not limited at all.
  CHECK(status_of(exchange_from("127.0.0.8", s.port(), "/api/v1/me", guessed)) == 401);
  CHECK(status_of(exchange_from("127.0.0.8", s.port(), "/api/v1/me", s.admin())) == 200);
  CHECK(status_of(exchange_from("127.0.0.7", s.port(), "/healthz", "")) == 200);
}

TEST_CASE("minting tokens counts against the client address's bucket", "[integration][bounds]") {
  api_server s("unauthenticated_rate_per_second = 0.01\nunauthenticated_rate_burst = 2\n");
  REQUIRE(s.port() != 0);
  const auto mint = [&] { return s.call("POST", "/api/v1/tokens", s.admin(), R"({"name":"t"})"); };
  CHECK(status_of(mint()) == 201);
  CHECK(status_of(mint()) == 201);
  const auto limited = mint();
  CHECK(status_of(limited) == 429);
  CHECK_FALSE(header_value(limited, "Retry-After").empty());
}

namespace {

double gauge(const std::string& metrics, const std::string& name) {
  const std::regex pattern("\n" + name + " ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(metrics, m, pattern) ? std::stod(m[1].str()) : -1;
}

std::string post_request(const std::string& target, const std::string& token,
                         const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer " +
         token +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

} // namespace

TEST_CASE("past storage.writer_max_queue waiting writes, new work is refused with 503 "
          "'storage is overloaded' before it is acknowledged, and the waiting writes land",
          "[integration][bounds]") {
  mock_llm_fixture mock(holding_mock());
  api_server s(generous_rates + "open_metrics = true\n",
               "[storage]\nwriter_max_queue = 1\n" + worker_catalog(mock, ""));
  REQUIRE(s.port() != 0);
  const auto first =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"hi"})");
  REQUIRE(status_of(first) == 200);
  const auto conversation = json_field(body_of(first), "conversation_id");
  std::optional<write_lock> lock(std::in_place, s.data_dir() / "troupe.db");
  // One write that admits work (a new user) waits behind the lock: the bound is reached.
  raw_client waiting(s.port());
  waiting.send(post_request("/api/v1/users", s.admin(), R"({"name":"waiting"})"));
  REQUIRE(wait_until(
      [&] {
        return gauge(body_of(s.call("GET", "/metrics", "")),
                     "troupe_store_writer_admitted_waiting") >= 1;
      },
      4s));
  const auto user = s.call("POST", "/api/v1/users", s.admin(), R"({"name":"refused"})");
  CHECK(status_of(user) == 503);
  CHECK_THAT(body_of(user), Catch::Contains("storage is overloaded") &&
                                Catch::Contains("storage.writer_max_queue"));
  const auto run = s.call("POST", "/api/v1/runs", s.admin(),
                          R"({"conversation_id":")" + conversation + R"(","message":"refused"})");
  CHECK(status_of(run) == 503);
  CHECK_THAT(body_of(run), Catch::Contains("storage is overloaded"));
  const auto fresh =
      s.call("POST", "/api/v1/runs", s.admin(), R"({"agent":"worker","message":"refused"})");
  CHECK(status_of(fresh) == 503);
  // The waiting write was not dropped: it commits once the database is free again.
  lock->release();
  CHECK(status_of(waiting.read_until_closed(10s)) == 201);
  lock.reset();
  CHECK(status_of(s.call("POST", "/api/v1/users", s.admin(), R"({"name":"later"})")) == 201);
  const auto messages =
      body_of(s.call("GET", "/api/v1/conversations/" + conversation + "/messages", s.admin()));
  CHECK_THAT(messages, !Catch::Contains("refused"));
  const auto users = body_of(s.call("GET", "/api/v1/users", s.admin()));
  CHECK_THAT(users, Catch::Contains("\"waiting\"") && !Catch::Contains("\"refused\""));
}
