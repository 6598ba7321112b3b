// The /api/v1 surface over loopback with the real `troupe serve` binary: tokens and the
// authorization matrix, rate limits, CORS, files and signed links, provider secrets.

#include <sys/stat.h>

#include <csignal>
#include <exception>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/raw_http.hpp"
#include "support/troupe_process.hpp"
#include "troupe/api/files.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/repositories.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

std::string multipart(const std::string& filename, const std::string& type,
                      const std::string& data) {
  return "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + filename +
         "\"\r\nContent-Type: " + type + "\r\n\r\n" + data + "\r\n--XyZ--\r\n";
}

const std::string multipart_header = "Content-Type: multipart/form-data; boundary=XyZ\r\n";

} // namespace

TEST_CASE("troupe writes admin.token 0600 on first start and keeps it on the second",
          "[integration][api]") {
  temp_dir dir;
  const auto data = dir.path() / "data";
  const std::vector<std::string> args{"serve", "--listen", "127.0.0.1:0", "--data-dir",
                                      data.string()};
  std::string token;
  {
    troupe_process troupe(args);
    const auto port = troupe.wait_for_port();
    REQUIRE(port);
    struct stat st {};
    REQUIRE(::stat((data / "admin.token").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    token = read_file(data / "admin.token");
    REQUIRE(token.size() > 64);
    token.pop_back(); // newline
    CHECK_THAT(troupe.output(), Catch::Contains((data / "admin.token").string()));
    CHECK_THAT(troupe.output(), !Catch::Contains(token));
    const auto me =
        http_exchange(*port, "GET", "/api/v1/me", {}, "Authorization: Bearer " + token + "\r\n");
    CHECK(status_of(me) == 200);
    CHECK_THAT(body_of(me), Catch::Contains(R"("scope":"admin")"));
    troupe.signal(SIGTERM);
    CHECK(troupe.wait_exit() == 0);
  }
  // The database holds the token's hash, never the token.
  std::string db_bytes;
  for (const auto& entry : std::filesystem::directory_iterator(data)) {
    if (entry.path().filename().string().starts_with("troupe.db")) {
      db_bytes += read_file(entry.path());
    }
  }
  CHECK(db_bytes.find(token) == std::string::npos);
  CHECK(db_bytes.find(token.substr(4)) == std::string::npos);
  CHECK(db_bytes.find(troupe::sha256_hex(token)) != std::string::npos);

  troupe_process again(args);
  const auto port = again.wait_for_port();
  REQUIRE(port);
  CHECK(read_file(data / "admin.token") == token + "\n");
  CHECK_THAT(again.output(), !Catch::Contains("created an admin token"));
  CHECK(status_of(http_exchange(*port, "GET", "/api/v1/me", {},
                                "Authorization: Bearer " + token + "\r\n")) == 200);
  again.signal(SIGTERM);
  CHECK(again.wait_exit() == 0);
}

TEST_CASE("the API answers 401 without a token, 403 without the role, 404 for others' records",
          "[integration][api]") {
  api_server s;
  REQUIRE(s.port() != 0);

  // An agent, a provider, and two users with their own tokens.
  const auto agent = s.call("POST", "/api/v1/agents", s.admin(),
                            R"({"name":"helper","main_model":"m1","tools":["shell"]})");
  REQUIRE(status_of(agent) == 201);
  const auto agent_uuid = json_field(body_of(agent), "id");
  const auto alice = s.user_token("alice");
  const auto bob = s.user_token("bob");

  SECTION("no token or an unknown token: 401 everywhere but /healthz") {
    CHECK(status_of(s.call("GET", "/healthz", "")) == 200);
    for (const char* target : {"/version", "/metrics", "/api/v1/agents", "/api/v1/me",
                               "/api/v1/conversations", "/api/v1/files/x/content"}) {
      INFO(target);
      const auto r = s.call("GET", target, "");
      CHECK(status_of(r) == 401);
      CHECK_THAT(body_of(r), Catch::Contains(R"({"error":{"code":"unauthenticated")"));
      CHECK(status_of(s.call("GET", target, "trp_not_a_real_token")) == 401);
    }
  }
  SECTION("a user reads agents but cannot manage agents, providers or users") {
    CHECK(status_of(s.call("GET", "/api/v1/agents", alice)) == 200);
    CHECK(status_of(s.call("GET", "/api/v1/agents/" + agent_uuid, alice)) == 200);
    CHECK(status_of(s.call("POST", "/api/v1/agents", alice, R"({"name":"x","main_model":"m"})")) ==
          403);
    CHECK(status_of(s.call("PATCH", "/api/v1/agents/" + agent_uuid, alice, R"({"name":"y"})")) ==
          403);
    CHECK(status_of(s.call("DELETE", "/api/v1/agents/" + agent_uuid, alice)) == 403);
    CHECK(status_of(s.call("GET", "/api/v1/providers", alice)) == 403);
    CHECK(status_of(s.call("POST", "/api/v1/providers", alice,
                           R"({"name":"p","kind":"openai"})")) == 403);
    CHECK(status_of(s.call("GET", "/api/v1/users", alice)) == 403);
    CHECK(status_of(s.call("POST", "/api/v1/tokens", alice, R"({"name":"t","scope":"admin"})")) ==
          400);
  }
  SECTION("an agent-scoped token is refused on every non-chat route") {
    const auto scoped = s.user_token("carol", "agent", "1");
    CHECK(status_of(s.call("GET", "/api/v1/me", scoped)) == 200);
    for (const char* target : {"/api/v1/agents", "/api/v1/conversations", "/api/v1/tokens",
                               "/api/v1/providers", "/version"}) {
      INFO(target);
      const auto r = s.call("GET", target, scoped);
      CHECK(status_of(r) == (std::string_view(target) == "/version" ? 200 : 403));
    }
    const auto upload = s.call("POST", "/api/v1/files", scoped,
                               multipart("a.txt", "text/plain", "x"), multipart_header);
    CHECK(status_of(upload) == 403);
  }
  SECTION("an admin manages agents: update, validate, delete") {
    const auto patched = s.call("PATCH", "/api/v1/agents/" + agent_uuid, s.admin(),
                                R"({"fast_model":"m0","queue_policy":"steer"})");
    CHECK(status_of(patched) == 200);
    CHECK_THAT(body_of(patched), Catch::Contains(R"("fast_model":"m0")"));
    CHECK_THAT(body_of(patched), Catch::Contains(R"("queue_policy":"steer")"));
    const auto bad = s.call("POST", "/api/v1/agents", s.admin(), R"({"main_model":"m"})");
    CHECK(status_of(bad) == 400);
    CHECK(body_of(bad) == R"({"error":{"code":"invalid_argument","message":"name: is required"}})");
    const auto bad_policy =
        s.call("PATCH", "/api/v1/agents/" + agent_uuid, s.admin(), R"({"queue_policy":"later"})");
    CHECK(status_of(bad_policy) == 400);
    CHECK_THAT(body_of(bad_policy), Catch::Contains("queue_policy: must be"));
    const auto bad_tools =
        s.call("PATCH", "/api/v1/agents/" + agent_uuid, s.admin(), R"({"tools":[1]})");
    CHECK_THAT(body_of(bad_tools), Catch::Contains("tools: must be an array of strings"));
    CHECK(status_of(s.call("POST", "/api/v1/agents", s.admin(), "not json")) == 400);
    const auto list = s.call("GET", "/api/v1/agents?limit=1&offset=0", s.admin());
    // One of the agents (the config may declare more than the one made here).
    CHECK_THAT(body_of(list), Catch::Contains(R"("limit":1,"offset":0)"));
    const auto listed = body_of(list);
    CHECK(listed.find("\"main_model\"") == listed.rfind("\"main_model\""));
    CHECK(status_of(s.call("GET", "/api/v1/agents?limit=0", s.admin())) == 400);
    CHECK(status_of(s.call("DELETE", "/api/v1/agents/" + agent_uuid, s.admin())) == 204);
    CHECK(status_of(s.call("GET", "/api/v1/agents/" + agent_uuid, s.admin())) == 404);
  }
  SECTION("a user sees only their own conversations; deleting a running one is 409") {
    // Conversations come from chat runs (not built yet): write them straight into the db.
    auto db = troupe::storage::connection::open(troupe::storage::database_path(s.data_dir()));
    REQUIRE(db);
    const auto bob_id = *troupe::storage::find_user_by_name(*db, "bob");
    troupe::storage::conversation_record conv;
    conv.uuid = "conv-bob-1";
    conv.owner_user_id = bob_id.id;
    conv.agent_id = 1;
    conv.title = "bob's chat";
    const auto conv_id = troupe::storage::insert_conversation(*db, conv);
    REQUIRE(conv_id);
    troupe::storage::message_record m;
    m.conversation_id = *conv_id;
    m.role = "user";
    m.content = "hello from bob";
    REQUIRE(troupe::storage::insert_message(*db, m));
    troupe::storage::run_record run;
    run.uuid = "run-1";
    run.conversation_id = *conv_id;
    run.agent_id = 1;
    const auto run_id = troupe::storage::insert_run(*db, run);
    REQUIRE(run_id);
    REQUIRE(troupe::storage::set_run_status(*db, *run_id, troupe::storage::run_status::running));

    const auto listed = s.call("GET", "/api/v1/conversations", bob);
    CHECK(status_of(listed) == 200);
    CHECK_THAT(body_of(listed), Catch::Contains(R"("id":"conv-bob-1")"));
    CHECK_THAT(body_of(listed), Catch::Contains(R"("total":1)"));
    CHECK_THAT(body_of(s.call("GET", "/api/v1/conversations", alice)),
               Catch::Contains(R"("data":[],"total":0)"));
    const auto messages = s.call("GET", "/api/v1/conversations/conv-bob-1/messages", bob);
    CHECK(status_of(messages) == 200);
    CHECK_THAT(body_of(messages), Catch::Contains("hello from bob"));

    CHECK(status_of(s.call("GET", "/api/v1/conversations/conv-bob-1", alice)) == 404);
    CHECK(status_of(s.call("GET", "/api/v1/conversations/conv-bob-1/messages", alice)) == 404);
    CHECK(status_of(s.call("DELETE", "/api/v1/conversations/conv-bob-1", alice)) == 404);
    // Even an admin sees only their own conversations through this route.
    CHECK(status_of(s.call("GET", "/api/v1/conversations/conv-bob-1", s.admin())) == 404);

    const auto busy = s.call("DELETE", "/api/v1/conversations/conv-bob-1", bob);
    CHECK(status_of(busy) == 409);
    REQUIRE(troupe::storage::set_run_status(*db, *run_id, troupe::storage::run_status::succeeded));
    CHECK(status_of(s.call("DELETE", "/api/v1/conversations/conv-bob-1", bob)) == 204);
    CHECK(status_of(s.call("GET", "/api/v1/conversations/conv-bob-1", bob)) == 404);
  }
  SECTION("tokens: created once, listed without secrets, revoked for good") {
    const auto created = s.call("POST", "/api/v1/tokens", alice, R"({"name":"laptop"})");
    REQUIRE(status_of(created) == 201);
    const auto token = json_field(body_of(created), "token");
    const auto id = json_field(body_of(created), "id");
    CHECK(token.starts_with("trp_"));
    CHECK(status_of(s.call("GET", "/api/v1/me", token)) == 200);
    const auto listed = s.call("GET", "/api/v1/tokens", alice);
    CHECK_THAT(body_of(listed), Catch::Contains(R"("name":"laptop")"));
    CHECK_THAT(body_of(listed), !Catch::Contains(token));
    CHECK_THAT(body_of(listed), !Catch::Contains("token_hash"));
    // Another user cannot see or revoke it.
    CHECK_THAT(body_of(s.call("GET", "/api/v1/tokens", bob)), !Catch::Contains("laptop"));
    CHECK(status_of(s.call("DELETE", "/api/v1/tokens/" + id, bob)) == 404);
    CHECK(status_of(s.call("DELETE", "/api/v1/tokens/" + id, alice)) == 204);
    CHECK(status_of(s.call("GET", "/api/v1/me", token)) == 401);
  }
}

TEST_CASE("provider secrets are write-only", "[integration][api]") {
  api_server s;
  REQUIRE(s.port() != 0);
  const auto created = s.call("POST", "/api/v1/providers", s.admin(),
                              R"({"name":"main","kind":"openai","base_url":"https://api.example",)"
                              R"("api_key":"sk-very-secret-key"})");
  REQUIRE(status_of(created) == 201);
  CHECK_THAT(body_of(created), Catch::Contains(R"("has_api_key":true)"));
  const auto id = json_field(body_of(created), "id");
  const auto patched = s.call("PATCH", "/api/v1/providers/" + id, s.admin(),
                              R"({"base_url":"https://api2.example"})");
  CHECK(status_of(patched) == 200);
  for (const auto& r : {created, patched, s.call("GET", "/api/v1/providers", s.admin()),
                        s.call("GET", "/api/v1/providers/" + id, s.admin())}) {
    CHECK_THAT(r, !Catch::Contains("sk-very-secret-key"));
    CHECK_THAT(r, Catch::Contains(R"("has_api_key":true)"));
  }
  const auto bad =
      s.call("POST", "/api/v1/providers", s.admin(), R"({"name":"x","kind":"telnet"})");
  CHECK(status_of(bad) == 400);
  CHECK_THAT(body_of(bad), Catch::Contains("kind: must be one of"));
  CHECK(status_of(s.call("POST", "/api/v1/providers", s.admin(),
                         R"({"name":"main","kind":"openai"})")) == 409);
  // Unreachable: the failure is the provider's, reported as 502.
  const auto down = s.call("POST", "/api/v1/providers", s.admin(),
                           R"({"name":"down","kind":"openai-compatible",)"
                           R"("base_url":"http://127.0.0.1:1/v1"})");
  REQUIRE(status_of(down) == 201);
  CHECK(status_of(s.call("GET", "/api/v1/providers/" + json_field(body_of(down), "id") + "/models",
                         s.admin())) == 502);
  CHECK(status_of(s.call("DELETE", "/api/v1/providers/" + id, s.admin())) == 204);
  CHECK(status_of(s.call("GET", "/api/v1/providers/" + id, s.admin())) == 404);
}

TEST_CASE("a provider's models are fetched from the provider", "[integration][api]") {
  troupe::mock::mock_llm_options options;
  options.model = "mock-model-7";
  mock_llm_fixture llm(options);
  api_server s;
  REQUIRE(s.port() != 0);
  const auto created =
      s.call("POST", "/api/v1/providers", s.admin(),
             R"({"name":"mock","kind":"openai-compatible","api_key":"k","base_url":")" +
                 llm.base_url() + "\"}");
  REQUIRE(status_of(created) == 201);
  const auto models = s.call(
      "GET", "/api/v1/providers/" + json_field(body_of(created), "id") + "/models", s.admin());
  CHECK(status_of(models) == 200);
  CHECK(body_of(models) == R"({"data":[{"id":"mock-model-7"}],"total":1})");
}

TEST_CASE("each token has its own rate limit: 429 with Retry-After past its burst",
          "[integration][api]") {
  api_server s("rate_per_second = 0.5\nrate_burst = 3\n");
  REQUIRE(s.port() != 0);
  const auto other = s.user_token("dora"); // one admin request of the burst per call here
  for (int i = 0; i < 3; ++i) {
    CHECK(status_of(s.call("GET", "/api/v1/me", other)) == 200);
  }
  const auto limited = s.call("GET", "/api/v1/me", other);
  CHECK(status_of(limited) == 429);
  CHECK(header_value(limited, "Retry-After") == "2");
  CHECK_THAT(body_of(limited), Catch::Contains(R"("code":"rate_limited")"));
  // The admin's bucket is separate: it made two requests so far.
  CHECK(status_of(s.call("GET", "/api/v1/me", s.admin())) == 200);
}

TEST_CASE("CORS: preflight answered for allowed origins, headers on responses",
          "[integration][api]") {
  api_server s("cors_origins = \"https://app.example\"\n");
  REQUIRE(s.port() != 0);
  const auto preflight =
      s.call("OPTIONS", "/api/v1/agents", "", {},
             "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n");
  CHECK(status_of(preflight) == 204);
  CHECK(header_value(preflight, "Access-Control-Allow-Origin") == "https://app.example");
  CHECK_THAT(header_value(preflight, "Access-Control-Allow-Headers"),
             Catch::Contains("Authorization"));
  CHECK_THAT(header_value(preflight, "Access-Control-Allow-Methods"), Catch::Contains("PATCH"));

  const auto foreign =
      s.call("OPTIONS", "/api/v1/agents", "", {}, "Origin: https://evil.example\r\n");
  CHECK(header_value(foreign, "Access-Control-Allow-Origin").empty());

  const auto get =
      s.call("GET", "/api/v1/agents", s.admin(), {}, "Origin: https://app.example\r\n");
  CHECK(status_of(get) == 200);
  CHECK(header_value(get, "Access-Control-Allow-Origin") == "https://app.example");
  const auto denied = s.call("GET", "/api/v1/agents", "", {}, "Origin: https://app.example\r\n");
  CHECK(status_of(denied) == 401);
  CHECK(header_value(denied, "Access-Control-Allow-Origin") == "https://app.example");
}

TEST_CASE("files: a large download streams in pieces, a stored special file is refused at once",
          "[integration][api][hostile]") {
  api_server s("max_upload_bytes = 2000000\n");
  REQUIRE(s.port() != 0);
  const auto alice = s.user_token("alice");
  // Larger than one piece (256 KiB) and not a multiple of it; every byte value.
  std::string content(700'001, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) {
    content[i] = static_cast<char>((i * 7919) % 251);
  }
  const auto upload =
      s.call("POST", "/api/v1/files", alice,
             multipart("big.bin", "application/octet-stream", content), multipart_header);
  REQUIRE(status_of(upload) == 201);
  const auto id = json_field(body_of(upload), "id");

  const auto r = s.call("GET", "/api/v1/files/" + id + "/content", alice);
  CHECK(status_of(r) == 200);
  CHECK(header_value(r, "Transfer-Encoding") == "chunked");
  CHECK(header_value(r, "Content-Disposition") ==
        "attachment; filename=\"big.bin\"; filename*=UTF-8''big.bin");
  const auto body = dechunked_body_of(r);
  CHECK(body.size() == content.size());
  CHECK(troupe::sha256_hex(body) == troupe::sha256_hex(content));

  // The stored bytes replaced by a FIFO that nobody writes: opening it for reading would
  // wait forever. The download fails at once, and the server keeps answering.
  std::filesystem::path stored;
  for (const auto& entry : std::filesystem::directory_iterator(s.data_dir() / "files")) {
    stored = entry.path();
  }
  REQUIRE(!stored.empty());
  std::filesystem::remove(stored);
  REQUIRE(::mkfifo(stored.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  const auto fifo = s.call("GET", "/api/v1/files/" + id + "/content", alice);
  CHECK(status_of(fifo) == 500);
  CHECK_THAT(body_of(fifo), Catch::Contains("could not be read"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(status_of(s.call("GET", "/healthz", "")) == 200);
}

TEST_CASE("files: upload, metadata, download by owner or signed link, nobody else",
          "[integration][api]") {
  api_server s("max_upload_bytes = 1000\n");
  REQUIRE(s.port() != 0);
  const auto alice = s.user_token("alice");
  const auto bob = s.user_token("bob");
  const std::string content = "col1,col2\n1,2\n";
  const auto upload = s.call("POST", "/api/v1/files", alice,
                             multipart("r\xC3\xA9sum\xC3\xA9 \\\"q\\\".csv", "text/csv", content),
                             multipart_header);
  REQUIRE(status_of(upload) == 201);
  const auto body = body_of(upload);
  const auto id = json_field(body, "id");
  CHECK(json_field(body, "size_bytes") == std::to_string(content.size()));
  CHECK(json_field(body, "sha256") == troupe::sha256_hex(content));
  CHECK(json_field(body, "mime_type") == "text/csv");
  const auto link = json_field(body, "download_url");
  REQUIRE(link.starts_with("/api/v1/files/" + id + "/content?expires="));

  // Stored under <data>/files with a random name, not the user's.
  std::size_t stored = 0;
  for (const auto& entry : std::filesystem::directory_iterator(s.data_dir() / "files")) {
    CHECK(entry.path().filename().string().find("sum") == std::string::npos);
    CHECK(read_file(entry.path()) == content);
    ++stored;
  }
  CHECK(stored == 1);

  SECTION("the owner's token downloads with the right headers") {
    CHECK(status_of(s.call("GET", "/api/v1/files/" + id, alice)) == 200);
    const auto r = s.call("GET", "/api/v1/files/" + id + "/content", alice);
    CHECK(status_of(r) == 200);
    CHECK(body_of(r) == content);
    CHECK(header_value(r, "Content-Type") == "text/csv");
    CHECK(header_value(r, "Content-Disposition") ==
          "attachment; filename=\"r__sum__ _q_.csv\"; "
          "filename*=UTF-8''r%C3%A9sum%C3%A9%20%22q%22.csv");
    CHECK(header_value(r, "X-Content-Type-Options") == "nosniff");
  }
  SECTION("each user lists only their own files") {
    CHECK_THAT(body_of(s.call("GET", "/api/v1/files", alice)),
               Catch::Contains(R"("id":")" + id + "\""));
    CHECK_THAT(body_of(s.call("GET", "/api/v1/files", bob)),
               Catch::Contains(R"({"data":[],"total":0)"));
  }
  SECTION("another user's token gets 404; no token gets 401") {
    CHECK(status_of(s.call("GET", "/api/v1/files/" + id, bob)) == 404);
    CHECK(status_of(s.call("GET", "/api/v1/files/" + id + "/content", bob)) == 404);
    CHECK(status_of(s.call("GET", "/api/v1/files/" + id + "/content", "")) == 401);
  }
  SECTION("a signed link works without a token until it expires, and not when tampered") {
    const auto r = s.call("GET", link, "");
    CHECK(status_of(r) == 200);
    CHECK(body_of(r) == content);
    auto tampered = link;
    tampered.back() = tampered.back() == '0' ? '1' : '0';
    CHECK(status_of(s.call("GET", tampered, "")) == 403);
    // The same signature with a later expiry is refused too.
    const auto expires = json_field(body, "download_expires_at");
    auto extended = link;
    extended.replace(extended.find(expires), expires.size(),
                     std::to_string(std::stoll(expires) + 1));
    CHECK(status_of(s.call("GET", extended, "")) == 403);
    // A correctly signed link whose time is up.
    auto secret = read_file(s.data_dir() / "link.secret");
    secret.pop_back();
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const auto expired = s.call("GET", troupe::actors::signed_file_link(secret, id, now - 1), "");
    CHECK(status_of(expired) == 403);
    CHECK_THAT(body_of(expired), Catch::Contains("expired"));
    CHECK(status_of(s.call("GET", troupe::actors::signed_file_link(secret, id, now + 60), "")) ==
          200);
  }
  SECTION("an upload over the limit is 413; a body without a file is 400") {
    const auto big = s.call(
        "POST", "/api/v1/files", alice,
        multipart("big.bin", "application/octet-stream", std::string(1001, 'x')), multipart_header);
    CHECK(status_of(big) == 413);
    CHECK_THAT(body_of(big), Catch::Contains("payload_too_large"));
    const auto none = s.call("POST", "/api/v1/files", alice, "--XyZ--\r\n", multipart_header);
    CHECK(status_of(none) == 400);
    CHECK_THAT(body_of(none), Catch::Contains("file: is required"));
  }
}
