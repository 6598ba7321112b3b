// The API the web console reads (issue 20), with the real `troupe serve` binary and a
// scripted mock-llm: the caller's runs listed (active ones, one conversation's), session
// search over the conversations, a conversation's files with the run that made each, a
// message's own queue policy, the runs' series of /metrics, and the timings of LLM rounds
// and tool calls in a run's steps.

#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

// "make a file" writes report.csv then answers; "slow" streams 200 words 50 ms apart (10 s:
// a run that stays active until the test ends it); anything else, mock-llm's default text.
troupe::mock::mock_llm_options scripted_mock() {
  std::string words;
  for (int i = 1; i <= 200; ++i) {
    words += (i > 1 ? " w" : "w") + std::to_string(i);
  }
  const auto script = R"([
    {"match": {"user": "make a file", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "write",
               "arguments": {"path": "report.csv", "content": "region,total\nnorth,3\n"}}]}},
    {"match": {"user": "make a file", "has_tool_result": true},
     "reply": {"text": "Wrote report.csv with the totals."}},
    {"match": {"user": "slow"}, "reply": {"text": ")" +
                      words + R"("}, "token_delay_ms": 50}
  ])";
  return scripted(script);
}

std::string catalog(const mock_llm_fixture& mock) {
  return mock_provider_toml(mock) +
         "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"write\", \"read\", \"finish\"]\n";
}

const std::string generous_limits = "rate_per_second = 1000\nrate_burst = 1000\n";

/// Starts a durable run; its run id and conversation id.
std::pair<std::string, std::string> start_run(const api_server& s, const std::string& token,
                                              const std::string& body) {
  const auto answer = s.call("POST", "/api/v1/runs", token, body);
  REQUIRE(status_of(answer) == 202);
  return {json_field(body_of(answer), "run_id"), json_field(body_of(answer), "conversation_id")};
}

std::string run_status(const api_server& s, const std::string& token, const std::string& run) {
  return json_field(body_of(s.call("GET", "/api/v1/runs/" + run, token)), "status");
}

bool ended(const std::string& status) {
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

void wait_for_end(const api_server& s, const std::string& token, const std::string& run) {
  REQUIRE(wait_until([&] { return ended(run_status(s, token, run)); }, 30s));
}

/// The values of `"key":"…"` in a JSON text, in order.
std::vector<std::string> all_fields(const std::string& body, const std::string& key) {
  std::vector<std::string> out;
  const std::regex pattern("\"" + key + R"re(":"([^"]*)")re");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

} // namespace

TEST_CASE("GET /api/v1/runs lists the caller's runs newest first, the active ones and one "
          "conversation's",
          "[integration][console]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(generous_limits, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto bob = s.user_token("bob");
  const auto [first, first_conversation] =
      start_run(s, s.admin(), R"({"agent":"worker","message":"hello"})");
  wait_for_end(s, s.admin(), first);
  const auto [second, second_conversation] =
      start_run(s, s.admin(), R"({"agent":"worker","message":"hello again"})");
  wait_for_end(s, s.admin(), second);
  const auto [slow, slow_conversation] =
      start_run(s, s.admin(), R"({"agent":"worker","message":"slow"})");
  REQUIRE(wait_until([&] { return run_status(s, s.admin(), slow) == "running"; }, 20s));

  const auto all = body_of(s.call("GET", "/api/v1/runs", s.admin()));
  CHECK(json_field(all, "total") == "3");
  CHECK(all_fields(all, "run_id") == std::vector<std::string>{slow, second, first});
  CHECK_THAT(all, Catch::Contains(R"("conversation_id":")" + first_conversation + "\""));
  CHECK_THAT(all, Catch::Contains(R"("status":"succeeded")") &&
                      Catch::Contains(R"("model":"mock-llm")") &&
                      Catch::Contains(R"("finished_at":)"));

  const auto active = body_of(s.call("GET", "/api/v1/runs?status=active", s.admin()));
  CHECK(all_fields(active, "run_id") == std::vector<std::string>{slow});
  CHECK(json_field(active, "status") == "running");

  const auto one =
      body_of(s.call("GET", "/api/v1/runs?conversation_id=" + second_conversation, s.admin()));
  CHECK(all_fields(one, "run_id") == std::vector<std::string>{second});
  const auto paged = body_of(s.call("GET", "/api/v1/runs?limit=1&offset=1", s.admin()));
  CHECK(all_fields(paged, "run_id") == std::vector<std::string>{second});
  CHECK(json_field(paged, "total") == "3");

  // Refusals: a status that is not `active`; another user's conversation (404, as one that
  // does not exist); another user sees none of these runs.
  const auto bad = s.call("GET", "/api/v1/runs?status=done", s.admin());
  CHECK(status_of(bad) == 400);
  CHECK_THAT(body_of(bad), Catch::Contains("status: must be active"));
  CHECK(status_of(s.call("GET", "/api/v1/runs?conversation_id=" + first_conversation, bob)) == 404);
  CHECK(json_field(body_of(s.call("GET", "/api/v1/runs", bob)), "total") == "0");

  REQUIRE(status_of(s.call("DELETE", "/api/v1/runs/" + slow, s.admin())) == 202);
  wait_for_end(s, s.admin(), slow);
  CHECK(json_field(body_of(s.call("GET", "/api/v1/runs?status=active", s.admin())), "total") ==
        "0");
}

TEST_CASE("conversations ?q= finds messages by their words, each conversation once with its "
          "marked match",
          "[integration][console]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(generous_limits, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto bob = s.user_token("bob");
  auto chat = [&](const std::string& token, const std::string& body) {
    const auto answer = s.call("POST", "/api/v1/chat", token, body);
    REQUIRE(status_of(answer) == 200);
    return json_field(body_of(answer), "conversation_id");
  };
  const auto apples = chat(s.admin(), R"({"agent":"worker","message":"the orchard grows apples"})");
  chat(s.admin(), R"({"conversation_id":")" + apples + R"(","message":"more apples please"})");
  const auto pears = chat(s.admin(), R"({"agent":"worker","message":"a basket of pears"})");
  chat(bob, R"({"agent":"worker","message":"bob likes apples too"})");

  const auto found = body_of(s.call("GET", "/api/v1/conversations?q=apples", s.admin()));
  INFO(found);
  // The admin's one conversation with apples, once (two of its messages match), not bob's.
  CHECK(json_field(found, "total") == "1");
  CHECK(all_fields(found, "id") == std::vector<std::string>{apples});
  CHECK_THAT(found, Catch::Contains("[apples]") && Catch::Contains(R"("role":"user")") &&
                        Catch::Contains(R"("query":"apples")"));
  CHECK_THAT(found, !Catch::Contains("bob likes"));

  const auto either = body_of(s.call("GET", "/api/v1/conversations?q=pears+apples", s.admin()));
  CHECK(json_field(either, "total") == "2");
  CHECK_THAT(either, Catch::Contains(pears) && Catch::Contains(apples));
  const auto none = body_of(s.call("GET", "/api/v1/conversations?q=zebra", s.admin()));
  CHECK(json_field(none, "total") == "0");
  // Words only: query syntax is text.
  CHECK(status_of(s.call("GET", "/api/v1/conversations?q=%22apples%22+OR+*", s.admin())) == 200);
  const auto bobs = body_of(s.call("GET", "/api/v1/conversations?q=apples", bob));
  CHECK(json_field(bobs, "total") == "1");
  CHECK_THAT(bobs, Catch::Contains("bob likes [apples] too"));
  const auto too_long =
      s.call("GET", "/api/v1/conversations?q=" + std::string(1100, 'a'), s.admin());
  CHECK(status_of(too_long) == 400);
}

TEST_CASE("a conversation's files list its upload and its run's artifact with the run's id",
          "[integration][console]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(generous_limits, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto bob = s.user_token("bob");
  const std::string form =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n"
      "Content-Type: text/plain\r\n\r\nhello\r\n--XyZ--\r\n";
  const auto uploaded =
      http_exchange(s.port(), "POST", "/api/v1/files", form,
                    "Authorization: Bearer " + s.admin() +
                        "\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n");
  REQUIRE(status_of(uploaded) == 201);
  const auto upload_id = json_field(body_of(uploaded), "id");
  const auto answer =
      s.call("POST", "/api/v1/chat", s.admin(),
             R"({"agent":"worker","message":"make a file","files":[")" + upload_id + R"("]})");
  REQUIRE(status_of(answer) == 200);
  const auto run = json_field(body_of(answer), "run_id");
  const auto conversation = json_field(body_of(answer), "conversation_id");

  const auto files =
      body_of(s.call("GET", "/api/v1/files?conversation_id=" + conversation, s.admin()));
  INFO(files);
  CHECK(json_field(files, "total") == "1");
  CHECK(all_fields(files, "name") == std::vector<std::string>{"report.csv"});
  CHECK(json_field(files, "run_id") == run);
  CHECK_THAT(files, Catch::Contains(R"("kind":"artifact")") &&
                        Catch::Contains(R"("download_url":"/api/v1/files/)"));
  // The upload went into the conversation's workspace as a copy: the stored upload stays
  // the caller's file outside any conversation.
  CHECK_THAT(body_of(s.call("GET", "/api/v1/files", s.admin())), Catch::Contains(upload_id));
  CHECK(status_of(s.call("GET", "/api/v1/files?conversation_id=" + conversation, bob)) == 404);
  CHECK(status_of(s.call("GET", "/api/v1/files?conversation_id=nope", s.admin())) == 404);
}

TEST_CASE("a message's queue_policy overrides the agent's: interrupt cancels the active run",
          "[integration][console]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(generous_limits, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto [slow, conversation] =
      start_run(s, s.admin(), R"({"agent":"worker","message":"slow"})");
  REQUIRE(wait_until([&] { return run_status(s, s.admin(), slow) == "running"; }, 20s));

  const auto bad = s.call("POST", "/api/v1/runs", s.admin(),
                          R"({"conversation_id":")" + conversation +
                              R"(","message":"x","queue_policy":"later"})");
  CHECK(status_of(bad) == 400);
  CHECK_THAT(body_of(bad),
             Catch::Contains("queue_policy: must be followup, steer, interrupt or collect"));

  // The agent's policy is followup; this message interrupts.
  const auto [next, same] = start_run(s, s.admin(),
                                      R"({"conversation_id":")" + conversation +
                                          R"(","message":"hello","queue_policy":"interrupt"})");
  CHECK(same == conversation);
  wait_for_end(s, s.admin(), slow);
  CHECK(run_status(s, s.admin(), slow) == "cancelled");
  wait_for_end(s, s.admin(), next);
  CHECK(run_status(s, s.admin(), next) == "succeeded");
}

TEST_CASE("/metrics counts runs by status with their durations, and steps carry the timings of "
          "rounds and tool calls",
          "[integration][console]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(generous_limits, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto before = body_of(s.call("GET", "/metrics", s.admin()));
  CHECK_THAT(before, Catch::Contains("troupe_runs_active 0") &&
                         Catch::Contains(R"(troupe_runs_finished_total{status="succeeded"} 0)") &&
                         Catch::Contains("troupe_run_duration_seconds_count 0"));
  const auto answer =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"make a file"})");
  REQUIRE(status_of(answer) == 200);
  const auto run = json_field(body_of(answer), "run_id");
  const auto [slow, conversation] =
      start_run(s, s.admin(), R"({"agent":"worker","message":"slow"})");
  REQUIRE(wait_until([&] { return run_status(s, s.admin(), slow) == "running"; }, 20s));
  CHECK_THAT(body_of(s.call("GET", "/metrics", s.admin())),
             Catch::Contains("troupe_runs_active 1") &&
                 Catch::Contains("troupe_runs_started_total 2"));
  REQUIRE(status_of(s.call("DELETE", "/api/v1/runs/" + slow, s.admin())) == 202);
  wait_for_end(s, s.admin(), slow);
  REQUIRE(wait_until(
      [&] {
        return body_of(s.call("GET", "/metrics", s.admin())).find("troupe_runs_active 0") !=
               std::string::npos;
      },
      10s));
  const auto after = body_of(s.call("GET", "/metrics", s.admin()));
  CHECK_THAT(after, Catch::Contains(R"(troupe_runs_finished_total{status="succeeded"} 1)") &&
                        Catch::Contains(R"(troupe_runs_finished_total{status="cancelled"} 1)") &&
                        Catch::Contains("troupe_run_duration_seconds_count 2") &&
                        Catch::Contains(R"(troupe_run_duration_seconds_bucket{le="+Inf"} 2)"));

  // The steps: each LLM round with when it started and how long it took, each tool call
  // with its duration.
  const auto steps = body_of(s.call("GET", "/api/v1/runs/" + run + "/steps", s.admin()));
  INFO(steps);
  const std::regex round(
      R"re("name":"llm_round","status":"done","input":\{\},"output":\{.*?"started_at":([0-9]+),"duration_ms":([0-9]+)\},"created_at":([0-9]+))re");
  int rounds = 0;
  for (auto it = std::sregex_iterator(steps.begin(), steps.end(), round);
       it != std::sregex_iterator(); ++it, ++rounds) {
    const auto started = std::stoll((*it)[1].str());
    const auto took = std::stoll((*it)[2].str());
    const auto ended_at = std::stoll((*it)[3].str());
    CHECK(started > 0);
    CHECK(started + took <= ended_at + 1);
  }
  CHECK(rounds == 2);
  const std::regex tool(
      R"re("kind":"tool","name":"write","status":"success","input":\{"call_id":"[^"]+","arguments":"(\\.|[^"\\])*","duration_ms":[0-9]+\})re");
  CHECK(std::regex_search(steps, tool));
  // The messages' steps carry the same input and times.
  const auto messages =
      body_of(s.call("GET",
                     "/api/v1/conversations/" + json_field(body_of(answer), "conversation_id") +
                         "/messages?steps=true",
                     s.admin()));
  CHECK_THAT(messages,
             Catch::Contains(R"("input":{"call_id":)") && Catch::Contains(R"("started_at":)"));
}
