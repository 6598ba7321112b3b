// The lifecycle of conversations with the real `troupe serve` binary: those the
// OpenAI-compatible route creates are ephemeral (deleted with their workspace and files once
// idle for api.ephemeral_retention_ms), X-Troupe-Conversation continues a conversation
// instead, and deleting a conversation removes its workspace and its files' bytes.

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

// "make a file" writes report.csv with the write tool, then answers.
troupe::mock::mock_llm_options file_making_mock() {
  const auto script = R"([
    {"match": {"user": "make a file", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "write",
               "arguments": {"path": "report.csv", "content": "region,total\nnorth,3\n"}}]}},
    {"match": {"user": "make a file", "has_tool_result": true},
     "reply": {"text": "Wrote report.csv."}}
  ])";
  return scripted(script);
}

std::string catalog(const mock_llm_fixture& mock) {
  return "[actors]\nconversation_idle_ms = 1000\n" + mock_provider_toml(mock) +
         "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"write\", \"read\", \"finish\"]\ntimeout_s = 60\n"
         "[[agents]]\nname = \"other\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n";
}

std::size_t entries_in(const std::filesystem::path& dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

const std::string completion =
    R"({"model":"worker","messages":[{"role":"user","content":"make a file"}]})";

} // namespace

TEST_CASE("a conversation of /v1/chat/completions is deleted with its workspace and files once "
          "idle for the retention",
          "[integration][lifecycle][openai]") {
  mock_llm_fixture mock(file_making_mock());
  api_server s("ephemeral_retention_ms = 0\nrate_per_second = 1000\nrate_burst = 1000\n",
               catalog(mock));
  REQUIRE(s.port() != 0);

  // A conversation of the native API, which is not ephemeral, made first.
  const auto kept =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"make a file"})");
  REQUIRE(status_of(kept) == 200);
  const auto kept_id = json_field(body_of(kept), "conversation_id");

  const auto whole = s.call("POST", "/v1/chat/completions", s.admin(), completion);
  REQUIRE(status_of(whole) == 200);
  CHECK_THAT(body_of(whole), Catch::Contains("Wrote report.csv."));
  const auto id = json_field(body_of(whole), "conversation_id");
  REQUIRE_FALSE(id.empty());
  REQUIRE(id != kept_id);

  // Retention 0: gone at the next expiry pass (one per second at most), rows and bytes.
  REQUIRE(wait_until(
      [&] { return status_of(s.call("GET", "/api/v1/conversations/" + id, s.admin())) == 404; },
      20s));
  REQUIRE(
      wait_until([&] { return !std::filesystem::exists(s.data_dir() / "workspaces" / id); }, 10s));
  // The files listed are the kept conversation's report only, and one file's bytes remain.
  const auto files = body_of(s.call("GET", "/api/v1/files", s.admin()));
  CHECK(json_field(files, "total") == "1");
  CHECK(entries_in(s.data_dir() / "files") == 1);

  // The native conversation stays, with its workspace.
  CHECK(status_of(s.call("GET", "/api/v1/conversations/" + kept_id, s.admin())) == 200);
  CHECK(std::filesystem::exists(s.data_dir() / "workspaces" / kept_id / "report.csv"));
}

TEST_CASE("a conversation of /v1/chat/completions stays while its retention lasts",
          "[integration][lifecycle][openai]") {
  mock_llm_fixture mock(file_making_mock());
  api_server s("ephemeral_retention_ms = 3600000\n", catalog(mock));
  REQUIRE(s.port() != 0);
  const auto whole = s.call("POST", "/v1/chat/completions", s.admin(), completion);
  REQUIRE(status_of(whole) == 200);
  const auto id = json_field(body_of(whole), "conversation_id");
  CHECK(status_of(s.call("GET", "/api/v1/conversations/" + id, s.admin())) == 200);
  CHECK(std::filesystem::exists(s.data_dir() / "workspaces" / id / "report.csv"));
}

TEST_CASE("X-Troupe-Conversation continues a conversation, which then is not ephemeral",
          "[integration][lifecycle][openai]") {
  mock_llm_fixture mock(file_making_mock());
  api_server s("ephemeral_retention_ms = 0\nrate_per_second = 1000\nrate_burst = 1000\n",
               catalog(mock));
  REQUIRE(s.port() != 0);
  const auto started =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"hello"})");
  REQUIRE(status_of(started) == 200);
  const auto id = json_field(body_of(started), "conversation_id");

  const auto header = "X-Troupe-Conversation: " + id + "\r\n";
  const auto next = s.call("POST", "/v1/chat/completions", s.admin(),
                           R"({"model":"worker","messages":[{"role":"user","content":"one"},)"
                           R"({"role":"assistant","content":"ignored"},)"
                           R"({"role":"user","content":"and again"}]})",
                           header);
  REQUIRE(status_of(next) == 200);
  CHECK(json_field(body_of(next), "conversation_id") == id);
  // The conversation's own history goes on: its first exchange, then the new message
  // (the request's earlier messages are not added).
  const auto messages =
      body_of(s.call("GET", "/api/v1/conversations/" + id + "/messages", s.admin()));
  CHECK_THAT(messages, Catch::Contains("hello") && Catch::Contains("and again") &&
                           !Catch::Contains("ignored"));
  CHECK(json_field(messages, "total") == "4");

  // An ephemeral conversation made now is deleted; the continued one is not.
  const auto fresh = s.call("POST", "/v1/chat/completions", s.admin(), completion);
  REQUIRE(status_of(fresh) == 200);
  const auto fresh_id = json_field(body_of(fresh), "conversation_id");
  REQUIRE(wait_until(
      [&] {
        return status_of(s.call("GET", "/api/v1/conversations/" + fresh_id, s.admin())) == 404;
      },
      20s));
  CHECK(status_of(s.call("GET", "/api/v1/conversations/" + id, s.admin())) == 200);

  // Not the caller's, unknown, or of another model: refused, naming the header.
  const auto unknown = s.call("POST", "/v1/chat/completions", s.admin(), completion,
                              "X-Troupe-Conversation: no-such-conversation\r\n");
  CHECK(status_of(unknown) == 404);
  CHECK_THAT(body_of(unknown),
             Catch::Contains("conversation_not_found") && Catch::Contains("X-Troupe-Conversation"));
  const auto other_model =
      s.call("POST", "/v1/chat/completions", s.admin(),
             R"({"model":"other","messages":[{"role":"user","content":"x"}]})", header);
  CHECK(status_of(other_model) == 400);
  const auto bob = s.user_token("bob");
  const auto not_his = s.call("POST", "/v1/chat/completions", bob, completion, header);
  CHECK(status_of(not_his) == 404);
  CHECK_THAT(body_of(not_his), Catch::Contains("conversation_not_found"));
}

TEST_CASE("DELETE /api/v1/conversations/{id} removes its workspace and its files' bytes",
          "[integration][lifecycle]") {
  mock_llm_fixture mock(file_making_mock());
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", catalog(mock));
  REQUIRE(s.port() != 0);
  const auto made =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"make a file"})");
  REQUIRE(status_of(made) == 200);
  const auto id = json_field(body_of(made), "conversation_id");
  const auto other =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"make a file"})");
  REQUIRE(status_of(other) == 200);
  const auto other_id = json_field(body_of(other), "conversation_id");
  REQUIRE(std::filesystem::exists(s.data_dir() / "workspaces" / id / "report.csv"));
  REQUIRE(entries_in(s.data_dir() / "files") == 2);

  // The run's last writes may still be on their way: 409 until it is no longer active.
  std::string deleted;
  REQUIRE(wait_until(
      [&] {
        deleted = s.call("DELETE", "/api/v1/conversations/" + id, s.admin());
        return status_of(deleted) != 409;
      },
      10s));
  CHECK(status_of(deleted) == 204);
  CHECK_FALSE(std::filesystem::exists(s.data_dir() / "workspaces" / id));
  CHECK(entries_in(s.data_dir() / "files") == 1);
  CHECK(json_field(body_of(s.call("GET", "/api/v1/files", s.admin())), "total") == "1");
  // The other conversation keeps its own.
  CHECK(std::filesystem::exists(s.data_dir() / "workspaces" / other_id / "report.csv"));
}
