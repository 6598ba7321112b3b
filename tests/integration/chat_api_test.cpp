// The chat surface over loopback with the real `troupe serve` binary and a scripted
// mock-llm: blocking and streamed chat, durable runs with replay, cancellation, the
// OpenAI-compatible endpoint, the authorization matrix of the chat routes, and that a
// client leaving a stream leaks nothing.

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <thread>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/runtime/json_writer.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

std::string slow_words() {
  std::string out;
  for (int i = 1; i <= 60; ++i) {
    out += (i > 1 ? " w" : "w") + std::to_string(i);
  }
  return out;
}

// The script: "make a file" writes report.csv then answers; "slow" streams 60 words 30 ms
// apart; anything else gets mock-llm's default text.
troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "make a file", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "write",
               "arguments": {"path": "report.csv", "content": "region,total\nnorth,3\n"}}]}},
    {"match": {"user": "make a file", "has_tool_result": true},
     "reply": {"text": "Wrote report.csv with the totals."}},
    {"match": {"user": "slow"}, "reply": {"text": ")" +
                      slow_words() + R"("}, "token_delay_ms": 30}
  ])";
  return scripted(script);
}

std::string catalog(const mock_llm_fixture& mock) {
  return "[actors]\nconversation_idle_ms = 1000\n"
         "[server]\nsse_ping_interval_ms = 200\n" +
         mock_provider_toml(mock) +
         "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"write\", \"read\", \"finish\"]\ntimeout_s = 60\n"
         "[[agents]]\nname = \"other\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n";
}

const std::string fast_retention = "run_retention_ms = 300\nrate_per_second = 1000\n"
                                   "rate_burst = 1000\n";

// The `id:`s and `event:`s of an SSE body, in order.
struct sse_trace {
  std::vector<std::uint64_t> ids;
  std::vector<std::string> events;
  std::vector<std::string> data;
};

sse_trace parse_sse(const std::string& text) {
  sse_trace t;
  std::string event;
  std::string id;
  std::size_t at = 0;
  while (at < text.size()) {
    auto end = text.find('\n', at);
    if (end == std::string::npos) {
      break;
    }
    std::string line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.starts_with("event: ")) {
      event = line.substr(7);
    } else if (line.starts_with("id: ")) {
      id = line.substr(4);
    } else if (line.starts_with("data: ")) {
      t.events.push_back(event);
      t.ids.push_back(id.empty() ? 0 : std::stoull(id));
      t.data.push_back(line.substr(6));
      event.clear();
      id.clear();
    }
  }
  return t;
}

// The value of a Prometheus sample line `name value` (no labels).
double metric(const std::string& body, const std::string& name) {
  const std::regex pattern("\n" + name + " ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(body, m, pattern) ? std::stod(m[1].str()) : -1;
}

// Removes a variable from this process's environment (which the troupe children
// inherit) for its lifetime, restoring it afterwards.
class without_env {
public:
  explicit without_env(std::string name) : name_(std::move(name)) {
    if (const char* value = std::getenv(name_.c_str())) {
      saved_ = value;
      ::unsetenv(name_.c_str());
    }
  }
  without_env(const without_env&) = delete;
  without_env& operator=(const without_env&) = delete;
  ~without_env() {
    if (saved_) {
      ::setenv(name_.c_str(), saved_->c_str(), 1);
    }
  }

private:
  std::string name_;
  std::optional<std::string> saved_;
};

std::string sse_request(std::string_view method, std::string_view target, const std::string& token,
                        std::string_view body, std::string extra = {}) {
  std::string r = std::string(method) + " " + std::string(target) +
                  " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + token +
                  "\r\nAccept: text/event-stream\r\n" + extra;
  if (!body.empty()) {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + std::string(body);
}

} // namespace

TEST_CASE("POST /api/v1/chat runs the agent with its tools and returns files with links",
          "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);

  const auto answer =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"make a file"})");
  REQUIRE(status_of(answer) == 200);
  const auto body = body_of(answer);
  CHECK(json_field(body, "status") == "succeeded");
  CHECK_THAT(body, Catch::Contains("Wrote report.csv with the totals."));
  CHECK_THAT(body, Catch::Contains(R"("name":"write","status":"success")"));
  CHECK_THAT(body, Catch::Contains(R"("prompt_tokens":)"));
  CHECK_THAT(body, Catch::Contains(R"("demo":false)"));
  CHECK(json_field(body, "llm_calls") == "2");
  // The artifact is a stored file, downloadable through its signed link without a token.
  const auto link = json_field(body, "download_url");
  REQUIRE_FALSE(link.empty());
  const auto file = s.call("GET", link, "");
  CHECK(status_of(file) == 200);
  CHECK(body_of(file) == "region,total\nnorth,3\n");
  CHECK_THAT(header_value(file, "Content-Type"), Catch::Contains("text/csv"));
  // And it is the run's file in the owner's file list.
  CHECK_THAT(body_of(s.call("GET", "/api/v1/files", s.admin())), Catch::Contains("report.csv"));

  // The conversation goes on: a second message sees the first exchange as history.
  const auto conversation = json_field(body, "conversation_id");
  const auto again =
      s.call("POST", "/api/v1/chat", s.admin(),
             R"({"message":"and now?","conversation_id":")" + conversation + R"("})");
  REQUIRE(status_of(again) == 200);
  CHECK(json_field(body_of(again), "conversation_id") == conversation);
  const auto messages =
      s.call("GET", "/api/v1/conversations/" + conversation + "/messages", s.admin());
  CHECK_THAT(body_of(messages), Catch::Contains("and now?") && Catch::Contains("make a file"));
  CHECK_THAT(body_of(messages), Catch::Contains(R"("run_id":")" + json_field(body, "run_id")));
  CHECK_THAT(body_of(messages), !Catch::Contains(R"("steps")"));
  // With ?steps=true each run's steps ride on its final answer.
  const auto with_steps =
      s.call("GET", "/api/v1/conversations/" + conversation + "/messages?steps=true", s.admin());
  CHECK_THAT(body_of(with_steps),
             Catch::Contains(R"("steps":[)") && Catch::Contains("validate_pre_final"));
  // Paged one message at a time, each run's steps still ride on its final answer alone:
  // two runs, two pages with steps, whatever else of the run a page leaves out.
  const auto total = std::stoi(json_field(body_of(with_steps), "total"));
  REQUIRE(total >= 4);
  int pages_with_steps = 0;
  for (int offset = 0; offset < total; ++offset) {
    const auto one = s.call("GET",
                            "/api/v1/conversations/" + conversation +
                                "/messages?steps=true&limit=1&offset=" + std::to_string(offset),
                            s.admin());
    REQUIRE(status_of(one) == 200);
    if (body_of(one).find(R"("steps":[)") != std::string::npos) {
      ++pages_with_steps;
    }
  }
  CHECK(pages_with_steps == 2);
  // Steps of the run are listed.
  const auto steps =
      s.call("GET", "/api/v1/runs/" + json_field(body, "run_id") + "/steps", s.admin());
  CHECK(status_of(steps) == 200);
  CHECK_THAT(body_of(steps), Catch::Contains("validate_pre_final"));
}

TEST_CASE("on CAF's sharing scheduler a chat runs whole and streamed as on the shards",
          "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  // actors.scheduler_policy = sharing: CAF's scheduler and a separate io thread.
  auto config = catalog(mock);
  config.replace(config.find("[actors]\n"), 9, "[actors]\nscheduler_policy = \"sharing\"\n");
  REQUIRE_THAT(config, Catch::Contains("scheduler_policy = \"sharing\""));
  api_server s(fast_retention, config);
  REQUIRE(s.port() != 0);

  const auto answer =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"make a file"})");
  REQUIRE(status_of(answer) == 200);
  CHECK(json_field(body_of(answer), "status") == "succeeded");
  CHECK_THAT(body_of(answer), Catch::Contains("Wrote report.csv with the totals."));

  raw_client c(s.port());
  c.send(sse_request("POST", "/api/v1/chat/stream", s.admin(),
                     R"({"agent":"worker","message":"make a file"})"));
  const auto trace = parse_sse(c.read_until("data: [DONE]", 20s));
  REQUIRE(trace.events.size() > 4);
  CHECK(trace.events.front() == "run");
  CHECK(trace.events[trace.events.size() - 2] == "done");
  CHECK(trace.data.back() == "[DONE]");
}

TEST_CASE("chat requests are validated and authorized", "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto alice = s.user_token("alice");
  const auto bob = s.user_token("bob");

  SECTION("bad bodies name the field") {
    auto r = s.call("POST", "/api/v1/chat", alice, R"({"agent":"worker"})");
    CHECK(status_of(r) == 400);
    CHECK_THAT(body_of(r), Catch::Contains("message"));
    r = s.call("POST", "/api/v1/chat", alice, R"({"agent":"worker","message":"x","colour":1})");
    CHECK(status_of(r) == 400);
    CHECK_THAT(body_of(r), Catch::Contains("colour"));
    r = s.call("POST", "/api/v1/chat", alice, R"({"agent":"worker","message":)");
    CHECK(status_of(r) == 400);
    CHECK(status_of(s.call("POST", "/api/v1/chat", alice, R"({"agent":"nobody","message":"x"})")) ==
          404);
    CHECK(status_of(s.call("POST", "/api/v1/chat", "", R"({"agent":"worker","message":"x"})")) ==
          401);
  }
  SECTION("another user's conversation and runs are 404; an agent-scoped token is held to its "
          "agent") {
    const auto mine =
        s.call("POST", "/api/v1/chat", alice, R"({"agent":"worker","message":"hello"})");
    REQUIRE(status_of(mine) == 200);
    const auto conversation = json_field(body_of(mine), "conversation_id");
    const auto run = json_field(body_of(mine), "run_id");
    CHECK(status_of(s.call("POST", "/api/v1/chat", bob,
                           R"({"message":"hi","conversation_id":")" + conversation + R"("})")) ==
          404);
    CHECK(status_of(s.call("GET", "/api/v1/runs/" + run, bob)) == 404);
    CHECK(status_of(s.call("GET", "/api/v1/runs/" + run + "/events", bob)) == 404);
    CHECK(status_of(s.call("DELETE", "/api/v1/runs/" + run, bob)) == 404);
    CHECK(status_of(s.call("GET", "/api/v1/runs/" + run, alice)) == 200);
    // An ended run cannot be cancelled.
    CHECK(status_of(s.call("DELETE", "/api/v1/runs/" + run, alice)) == 409);

    const auto scoped = s.user_token("carol", "agent", R"("worker")");
    CHECK(status_of(s.call("POST", "/api/v1/chat", scoped, R"({"message":"hi"})")) == 200);
    CHECK(status_of(s.call("POST", "/api/v1/chat", scoped,
                           R"({"agent":"other","message":"hi"})")) == 403);
    CHECK(status_of(s.call("GET", "/api/v1/conversations", scoped)) == 403);
    const auto models = s.call("GET", "/v1/models", scoped);
    CHECK(status_of(models) == 200);
    CHECK_THAT(body_of(models),
               Catch::Contains(R"("id":"worker")") && !Catch::Contains(R"("id":"other")"));
  }
}

TEST_CASE("POST /api/v1/chat/stream streams candidate text, then done and [DONE]",
          "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);
  raw_client c(s.port());
  c.send(sse_request("POST", "/api/v1/chat/stream", s.admin(),
                     R"({"agent":"worker","message":"make a file"})"));
  const auto text = c.read_until("data: [DONE]", 20s);
  REQUIRE_THAT(text, Catch::Contains("text/event-stream"));
  // The first thing on the stream is a ping.
  const auto head_end = text.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  CHECK_THAT(text.substr(head_end, 40), Catch::Contains(": ping"));
  const auto trace = parse_sse(text);
  REQUIRE(trace.events.size() > 4);
  // Ids count up from 1 without gaps.
  for (std::size_t i = 0; i < trace.ids.size(); ++i) {
    CHECK(trace.ids[i] == i + 1);
  }
  CHECK(trace.events.front() == "run");
  CHECK(std::count(trace.events.begin(), trace.events.end(), "message") > 0);
  CHECK(std::count(trace.events.begin(), trace.events.end(), "step") >= 2);
  CHECK(std::count(trace.events.begin(), trace.events.end(), "harness") >= 1);
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.events[i] == "message" && trace.data[i].find("model.delta") != std::string::npos) {
      CHECK_THAT(trace.data[i], Catch::Contains(R"("candidate":true)"));
    }
  }
  REQUIRE(trace.events.size() >= 2);
  CHECK(trace.events[trace.events.size() - 2] == "done");
  CHECK_THAT(trace.data[trace.data.size() - 2],
             Catch::Contains("Wrote report.csv") && Catch::Contains("download_url") &&
                 Catch::Contains(R"("usage")") && Catch::Contains(R"("steps")"));
  CHECK(trace.data.back() == "[DONE]");
}

TEST_CASE("a durable run survives its client and replays every event in order",
          "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto created =
      s.call("POST", "/api/v1/runs", s.admin(), R"({"agent":"worker","message":"slow please"})");
  REQUIRE(status_of(created) == 202);
  const auto run = json_field(body_of(created), "run_id");
  REQUIRE_FALSE(run.empty());

  std::string partial;
  {
    // A follower reads a few deltas and leaves mid-run.
    raw_client c(s.port());
    c.send(sse_request("GET", "/api/v1/runs/" + run + "/events", s.admin(), {}));
    partial = c.read_until("w3", 10s);
  }
  CHECK_THAT(partial, Catch::Contains("model.delta"));
  CHECK_THAT(partial, !Catch::Contains("[DONE]"));
  // A second follower arriving mid-run replays from the start and follows live.
  raw_client live(s.port());
  live.send(sse_request("GET", "/api/v1/runs/" + run + "/events", s.admin(), {}));
  const auto followed = parse_sse(live.read_until("data: [DONE]", 20s));
  REQUIRE_FALSE(followed.ids.empty());
  for (std::size_t i = 0; i < followed.ids.size(); ++i) {
    CHECK(followed.ids[i] == i + 1);
  }
  CHECK(followed.data.back() == "[DONE]");
  CHECK_THAT(followed.data[followed.data.size() - 2], Catch::Contains("w60"));

  const auto status = s.call("GET", "/api/v1/runs/" + run, s.admin());
  CHECK(json_field(body_of(status), "status") == "succeeded");

  // Last-Event-ID resumes after that event.
  raw_client resumed(s.port());
  resumed.send(
      sse_request("GET", "/api/v1/runs/" + run + "/events", s.admin(), {}, "Last-Event-ID: 5\r\n"));
  const auto rest = parse_sse(resumed.read_until("data: [DONE]", 10s));
  REQUIRE_FALSE(rest.ids.empty());
  CHECK(rest.ids.front() == 6);
  CHECK(rest.ids.size() == followed.ids.size() - 5);

  // After the retention (300 ms) the journal is gone; replay then comes from SQLite.
  std::string replay;
  CHECK(wait_until(
      [&] {
        raw_client stored(s.port());
        stored.send(sse_request("GET", "/api/v1/runs/" + run + "/events", s.admin(), {}));
        replay = stored.read_until("data: [DONE]", 10s);
        return replay.find(R"("replayed_from":"database")") != std::string::npos;
      },
      10s));
  CHECK_THAT(replay, Catch::Contains(R"("replayed_from":"database")") && Catch::Contains("w60"));
}

TEST_CASE("DELETE /api/v1/runs/{id} cancels a run mid-stream", "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto created =
      s.call("POST", "/api/v1/runs", s.admin(), R"({"agent":"worker","message":"slow"})");
  REQUIRE(status_of(created) == 202);
  const auto run = json_field(body_of(created), "run_id");
  raw_client follower(s.port());
  follower.send(sse_request("GET", "/api/v1/runs/" + run + "/events", s.admin(), {}));
  follower.read_until("w2", 10s);
  const auto cancelled = s.call("DELETE", "/api/v1/runs/" + run, s.admin());
  CHECK(status_of(cancelled) == 202);
  const auto trace = parse_sse(follower.read_until("data: [DONE]", 10s));
  REQUIRE(trace.data.size() >= 2);
  CHECK_THAT(trace.data[trace.data.size() - 2], Catch::Contains(R"("status":"cancelled")"));
  CHECK_THAT(trace.data[trace.data.size() - 2], !Catch::Contains("w60"));
  CHECK(json_field(body_of(s.call("GET", "/api/v1/runs/" + run, s.admin())), "status") ==
        "cancelled");
}

TEST_CASE("a client leaving /chat/stream mid-run leaks no actor and no stream",
          "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention + "open_metrics = true\n", catalog(mock));
  REQUIRE(s.port() != 0);
  auto sample = [&] { return body_of(s.call("GET", "/metrics", "")); };
  // The idle node's actors (every part is made at start) and streams.
  const double baseline_actors = metric(sample(), "troupe_actors_live");
  const double baseline_streams = metric(sample(), "troupe_http_open_streams");
  REQUIRE(baseline_actors > 0);
  auto back_to_baseline = [&] {
    const auto m = sample();
    return metric(m, "troupe_actors_live") == baseline_actors &&
           metric(m, "troupe_http_open_streams") == baseline_streams;
  };
  // Warm up: one whole run; its conversation passivates after 1 s and its journal goes
  // after 0.3 s, and then the node is back where it began.
  REQUIRE(status_of(s.call("POST", "/api/v1/chat", s.admin(),
                           R"({"agent":"worker","message":"warm up"})")) == 200);
  REQUIRE(wait_until(back_to_baseline, 10s));

  std::string run;
  {
    raw_client c(s.port());
    c.send(sse_request("POST", "/api/v1/chat/stream", s.admin(),
                       R"({"agent":"worker","message":"slow"})"));
    const auto head = c.read_until("w2", 10s);
    run = header_value(head, "X-Troupe-Run-Id");
    REQUIRE_FALSE(run.empty());
    CHECK(metric(sample(), "troupe_http_open_streams") == baseline_streams + 1);
  } // the client leaves

  // The run is cancelled, and actors and streams come back to the baseline.
  CHECK(wait_until(back_to_baseline, 10s));
  const auto after = sample();
  CHECK(metric(after, "troupe_actors_live") == baseline_actors);
  CHECK(metric(after, "troupe_http_open_streams") == baseline_streams);
  const auto status = s.call("GET", "/api/v1/runs/" + run, s.admin());
  CHECK(json_field(body_of(status), "status") == "cancelled");
}

TEST_CASE("the OpenAI-compatible endpoint answers whole and streamed completions",
          "[integration][chat][openai]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);

  const auto models = s.call("GET", "/v1/models", s.admin());
  CHECK(status_of(models) == 200);
  CHECK_THAT(body_of(models),
             Catch::Contains(R"("object":"list")") && Catch::Contains(R"("id":"worker")"));

  const auto whole =
      s.call("POST", "/v1/chat/completions", s.admin(),
             R"({"model":"worker","messages":[{"role":"system","content":"be brief"},)"
             R"({"role":"user","content":"make a file"}],"temperature":0.2})");
  REQUIRE(status_of(whole) == 200);
  CHECK(json_field(body_of(whole), "object") == "chat.completion");
  CHECK(json_field(body_of(whole), "finish_reason") == "stop");
  CHECK_THAT(body_of(whole),
             Catch::Contains("Wrote report.csv") && Catch::Contains(R"("total_tokens":)"));

  raw_client c(s.port());
  c.send(sse_request(
      "POST", "/v1/chat/completions", s.admin(),
      R"({"model":"worker","stream":true,"stream_options":{"include_usage":true},)"
      R"("messages":[{"role":"user","content":[{"type":"text","text":"make a file"}]}]})"));
  const auto streamed = parse_sse(c.read_until("data: [DONE]", 20s));
  REQUIRE(streamed.data.size() >= 3);
  CHECK(streamed.data.back() == "[DONE]");
  std::string content;
  const std::regex piece(R"re("content":"([^"]*)")re");
  for (const auto& d : streamed.data) {
    std::smatch m;
    if (std::regex_search(d, m, piece)) {
      content += m[1].str();
    }
  }
  CHECK_THAT(content, Catch::Contains("Wrote report.csv with the totals."));
  CHECK_THAT(streamed.data[streamed.data.size() - 2], Catch::Contains(R"("usage")"));
  CHECK_THAT(streamed.data.front(), Catch::Contains(R"("role":"assistant")"));

  const auto unknown = s.call("POST", "/v1/chat/completions", s.admin(),
                              R"({"model":"nope","messages":[{"role":"user","content":"x"}]})");
  CHECK(status_of(unknown) == 404);
  CHECK_THAT(body_of(unknown), Catch::Contains("model_not_found"));
  const auto no_user = s.call("POST", "/v1/chat/completions", s.admin(),
                              R"({"model":"worker","messages":[{"role":"system","content":"x"}]})");
  CHECK(status_of(no_user) == 400);
  // A field of the wrong type is refused by name, not ignored.
  const std::pair<const char*, const char*> refused[] = {
      {R"([1])", "body: must be a JSON object"},
      {R"({"messages":[{"role":"user","content":"x"}]})", "model: is required (an agent name)"},
      {R"({"model":"worker","stream":"yes","messages":[{"role":"user","content":"x"}]})",
       "stream: must be true or false"},
      {R"({"model":"worker","stream_options":{"include_usage":1},)"
       R"("messages":[{"role":"user","content":"x"}]})",
       "stream_options.include_usage: must be true or false"},
      {R"({"model":"worker","messages":[{"role":"user","content":"x"},{"content":"y"}]})",
       "messages[1].role: is required"},
      {R"({"model":"worker","messages":[{"role":"user","content":42}]})",
       "messages[0].content: must be a string or an array of parts"},
      {R"({"model":"worker","messages":[{"role":"user","content":[{"type":"text","text":7}]}]})",
       "messages[0].content[0].text: must be a string"},
      {R"({"model":"worker","messages":{}})", "messages: must be an array of objects"},
  };
  for (const auto& [body, problem] : refused) {
    INFO(body);
    const auto answer = s.call("POST", "/v1/chat/completions", s.admin(), body);
    CHECK(status_of(answer) == 400);
    CHECK_THAT(body_of(answer),
               Catch::Contains(problem) && Catch::Contains("invalid_request_error"));
  }
}

TEST_CASE("SIGTERM ends a server with an active run, its follower and retained journals",
          "[integration][chat]") {
  mock_llm_fixture mock(scripted_mock());
  // The default retention (15 min): retained journals must not hold up the exit.
  temp_dir dir;
  const auto config = dir.path() / "troupe.toml";
  std::ofstream(config) << "listen = \"127.0.0.1:0\"\ndata_dir = \""
                        << (dir.path() / "data").string() << "\"\n"
                        << "[server]\nshutdown_timeout_ms = 500\n"
                        << catalog(mock).substr(catalog(mock).find("[[providers]]"));
  troupe_process troupe({"serve", "--config", config.string()});
  const auto port = troupe.wait_for_port();
  REQUIRE(port);
  auto token = read_file(dir.path() / "data" / "admin.token");
  token.pop_back();
  const auto auth = "Authorization: Bearer " + token + "\r\nContent-Type: application/json\r\n";
  REQUIRE(status_of(http_exchange(*port, "POST", "/api/v1/chat",
                                  R"({"agent":"worker","message":"hello"})", auth)) == 200);
  const auto created =
      http_exchange(*port, "POST", "/api/v1/runs", R"({"agent":"worker","message":"slow"})", auth);
  REQUIRE(status_of(created) == 202);
  raw_client follower(*port);
  follower.send(sse_request(
      "GET", "/api/v1/runs/" + json_field(body_of(created), "run_id") + "/events", token, {}));
  follower.read_until("w2", 10s);
  const auto asked = std::chrono::steady_clock::now();
  troupe.signal(SIGTERM);
  const auto code = troupe.wait_exit(15s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(std::chrono::steady_clock::now() - asked < 5s);
  CHECK_THAT(troupe.output(), !Catch::Contains("Sanitizer") && !Catch::Contains("runtime error"));
}

TEST_CASE("with no provider configured every answer says it comes from the scripted demo model",
          "[integration][chat][demo]") {
  // With OPENAI_API_KEY set troupe's embedded catalog uses OpenAI (the point of that
  // variable): the troupe started here runs without it, whatever this shell has.
  const without_env no_key("OPENAI_API_KEY");
  api_server s(fast_retention);
  REQUIRE(s.port() != 0);
  CHECK_THAT(s.process().output(), Catch::Contains("SCRIPTED DEMO"));
  const auto chat =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"assistant","message":"hello"})");
  REQUIRE(status_of(chat) == 200);
  CHECK_THAT(
      body_of(chat),
      Catch::Contains(R"("demo":true)") &&
          Catch::Contains(R"("notice":"This answer comes from troupe's SCRIPTED DEMO model)"));
  const auto run =
      s.call("POST", "/api/v1/runs", s.admin(), R"({"agent":"assistant","message":"hello"})");
  CHECK_THAT(body_of(run), Catch::Contains(R"("demo":true)"));
  const auto completion =
      s.call("POST", "/v1/chat/completions", s.admin(),
             R"({"model":"assistant","messages":[{"role":"user","content":"hi"}]})");
  REQUIRE(status_of(completion) == 200);
  CHECK_THAT(body_of(completion), Catch::Contains(R"("demo":true)"));
  raw_client c(s.port());
  c.send(sse_request("POST", "/api/v1/chat/stream", s.admin(),
                     R"({"agent":"assistant","message":"hello"})"));
  const auto trace = parse_sse(c.read_until("data: [DONE]", 20s));
  REQUIRE(trace.data.size() >= 2);
  CHECK_THAT(trace.data[trace.data.size() - 2], Catch::Contains(R"("demo":true)"));
}

TEST_CASE("a data task end to end: CSV in, totals CSV and PNG chart out and downloadable",
          "[integration][chat][sandbox]") {
  // The agent's code runs in the real sandbox (bubblewrap, seccomp, rlimits).
  const std::string code = "import pandas as pd\n"
                           "import matplotlib\n"
                           "matplotlib.use('Agg')\n"
                           "import matplotlib.pyplot as plt\n"
                           "df = pd.read_csv('sales.csv')\n"
                           "totals = df.groupby('region', as_index=False)['amount'].sum()\n"
                           "totals.to_csv('totals.csv', index=False)\n"
                           "totals.plot.bar(x='region', y='amount')\n"
                           "plt.savefig('totals.png')\n"
                           "print(totals.to_string(index=False))\n";
  troupe::json_writer script;
  script.begin_array();
  script.begin_object().key("match").begin_object().key("user").value("compute the totals");
  script.key("has_tool_result").value(false).end_object();
  script.key("reply").begin_object().key("tool_calls").begin_array().begin_object();
  script.key("name").value("code_interpreter").key("arguments").begin_object();
  script.key("language").value("python").key("code").value(code).end_object();
  script.end_object().end_array().end_object().end_object();
  script.begin_object().key("match").begin_object().key("user").value("compute the totals");
  script.key("has_tool_result").value(true).end_object();
  script.key("reply").begin_object().key("text").value(
      "The totals by region are in totals.csv, with a bar chart in totals.png.");
  script.end_object().end_object().end_array();
  troupe::mock::mock_llm_options options;
  auto rules = troupe::mock::parse_mock_script(std::move(script).str());
  REQUIRE(rules);
  options.rules = std::move(*rules);
  mock_llm_fixture mock(std::move(options));
  const std::string agents =
      "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
      mock.base_url() +
      "\"\n[[agents]]\nname = \"analyst\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
      "tools = [\"code_interpreter\", \"read\", \"finish\"]\n";
  api_server s(fast_retention + "max_upload_bytes = 100000\n", agents);
  REQUIRE(s.port() != 0);
  // The test's temporary directory is private (0700). The sandbox reaches the workspaces
  // under it all the same (it binds the workspace from a mount namespace of its own), so
  // troupe asks nobody to loosen the directory, and nothing here does.
  CHECK_THAT(s.process().output(), !Catch::Contains("chmod o+x"));

  const std::string csv = "region,amount\nnorth,10\nsouth,5\nnorth,7\neast,1\nsouth,2\n";
  const std::string form =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"sales.csv\"\r\n"
      "Content-Type: text/csv\r\n\r\n" +
      csv + "\r\n--XyZ--\r\n";
  const auto uploaded =
      http_exchange(s.port(), "POST", "/api/v1/files", form,
                    "Authorization: Bearer " + s.admin() +
                        "\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n");
  REQUIRE(status_of(uploaded) == 201);
  const auto file_id = json_field(body_of(uploaded), "id");

  // An unknown attachment is refused before anything runs.
  CHECK(status_of(s.call("POST", "/api/v1/chat", s.admin(),
                         R"({"agent":"analyst","message":"x","files":["nope"]})")) == 404);

  const auto answer = s.call("POST", "/api/v1/chat", s.admin(),
                             R"({"agent":"analyst","message":"compute the totals","files":[")" +
                                 file_id + R"("]})");
  REQUIRE(status_of(answer) == 200);
  const auto body = body_of(answer);
  INFO(body);
  INFO(body_of(s.call("GET", "/api/v1/runs/" + json_field(body, "run_id") + "/steps", s.admin())));
  REQUIRE(json_field(body, "status") == "succeeded");
  REQUIRE_THAT(body, Catch::Contains(R"("name":"code_interpreter","status":"success")"));
  // Both outputs are the run's files, each with a signed link that downloads it.
  const std::regex file_entry(
      R"re("name":"([^"]+)","path":"[^"]*","mime_type":"([^"]+)","size_bytes":[0-9]+,"id":"[^"]+","download_url":"([^"]+)")re");
  std::map<std::string, std::pair<std::string, std::string>> files;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), file_entry);
       it != std::sregex_iterator(); ++it) {
    files[(*it)[1].str()] = {(*it)[2].str(), (*it)[3].str()};
  }
  REQUIRE(files.count("totals.csv") == 1);
  REQUIRE(files.count("totals.png") == 1);
  CHECK(files["totals.csv"].first == "text/csv");
  CHECK(files["totals.png"].first == "image/png");
  const auto totals = s.call("GET", files["totals.csv"].second, "");
  CHECK(status_of(totals) == 200);
  CHECK(body_of(totals) == "region,amount\neast,1\nnorth,17\nsouth,7\n");
  const auto chart = s.call("GET", files["totals.png"].second, "");
  CHECK(status_of(chart) == 200);
  CHECK(body_of(chart).starts_with("\x89PNG\r\n\x1a\n"));
  CHECK_THAT(header_value(chart, "Content-Disposition"), Catch::Contains("totals.png"));
}

namespace {

// Streams "make a file" through /chat/stream (the live journal from its first entry);
// the live trace and the run's id.
std::pair<sse_trace, std::string> stream_a_run(api_server& s) {
  raw_client c(s.port());
  c.send(sse_request("POST", "/api/v1/chat/stream", s.admin(),
                     R"({"agent":"worker","message":"make a file"})"));
  const auto text = c.read_until("data: [DONE]", 20s);
  return {parse_sse(text), header_value(text, "X-Troupe-Run-Id")};
}

sse_trace replay_events(api_server& s, const std::string& run, std::string extra = {}) {
  raw_client c(s.port());
  c.send(sse_request("GET", "/api/v1/runs/" + run + "/events", s.admin(), {}, std::move(extra)));
  return parse_sse(c.read_until_closed(10s));
}

// True once the run's journal has left memory: its status no longer has a live view.
bool journal_gone(api_server& s, const std::string& run) {
  const auto status = s.call("GET", "/api/v1/runs/" + run, s.admin());
  return status_of(status) == 200 && json_field(body_of(status), "status") == "succeeded" &&
         body_of(status).find("last_event_id") == std::string::npos;
}

// The replay is the live stream: the same ids, events and data, in order; only `done`
// says it comes from the database. Entries after `after` only.
void check_same_events(const sse_trace& live, const sse_trace& replay, std::uint64_t after = 0) {
  REQUIRE(live.ids.size() > after + 2);
  REQUIRE(replay.ids.size() == live.ids.size() - after);
  for (std::size_t i = 0; i < replay.ids.size(); ++i) {
    const auto& want = live.data[i + after];
    INFO("entry " << i << ": " << replay.data[i]);
    CHECK(replay.ids[i] == live.ids[i + after]);
    CHECK(replay.events[i] == live.events[i + after]);
    if (replay.events[i] == "done") {
      CHECK_THAT(replay.data[i], Catch::Contains(R"("replayed_from":"database")") &&
                                     Catch::StartsWith(want.substr(0, want.size() - 1)));
    } else {
      CHECK(replay.data[i] == want);
    }
  }
  CHECK(replay.events[replay.events.size() - 2] == "done");
  CHECK(replay.data.back() == "[DONE]");
}

} // namespace

TEST_CASE("a run replayed after its journal's retention has the same ids and ends with done and "
          "[DONE]",
          "[integration][chat][replay]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s("run_retention_ms = 0\n", catalog(mock));
  REQUIRE(s.port() != 0);
  const auto [live, run] = stream_a_run(s);
  REQUIRE_FALSE(run.empty());
  REQUIRE(live.data.back() == "[DONE]");
  REQUIRE(wait_until([&] { return journal_gone(s, run); }, 10s));
  check_same_events(live, replay_events(s, run));
}

TEST_CASE("a run whose journal the byte cap evicted replays from storage and resumes after "
          "Last-Event-ID without repeating an id",
          "[integration][chat][replay]") {
  mock_llm_fixture mock(scripted_mock());
  // Every finished journal is over the cap at once; the retention alone would keep it.
  api_server s("journal_max_bytes = 1\n", catalog(mock));
  REQUIRE(s.port() != 0);
  const auto [live, run] = stream_a_run(s);
  REQUIRE_FALSE(run.empty());
  REQUIRE(wait_until([&] { return journal_gone(s, run); }, 10s));
  check_same_events(live, replay_events(s, run));
  // Resumed from the middle: the rest, each id once, to the end.
  const std::uint64_t middle = live.ids.size() / 2;
  const auto rest = replay_events(s, run, "Last-Event-ID: " + std::to_string(middle) + "\r\n");
  check_same_events(live, rest, middle);
  // Resumed at the last id: nothing more, and the stream ends.
  const auto none =
      replay_events(s, run, "Last-Event-ID: " + std::to_string(live.ids.back()) + "\r\n");
  CHECK(none.ids.empty());
}

TEST_CASE("a run replayed after the node restarted on the same data directory has the same ids",
          "[integration][chat][replay]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto [live, run] = stream_a_run(s);
  REQUIRE_FALSE(run.empty());
  s.restart();
  REQUIRE(s.port() != 0);
  check_same_events(live, replay_events(s, run));
  check_same_events(live, replay_events(s, run, "Last-Event-ID: 3\r\n"), 3);
}

TEST_CASE("a run cut off by a crash replays to an end that says it was interrupted, never "
          "repeating an id the client saw",
          "[integration][chat][replay]") {
  mock_llm_fixture mock(scripted_mock());
  api_server s(fast_retention, catalog(mock));
  REQUIRE(s.port() != 0);
  const auto created =
      s.call("POST", "/api/v1/runs", s.admin(), R"({"agent":"worker","message":"slow please"})");
  REQUIRE(status_of(created) == 202);
  const auto run = json_field(body_of(created), "run_id");
  sse_trace seen;
  {
    raw_client c(s.port());
    c.send(sse_request("GET", "/api/v1/runs/" + run + "/events", s.admin(), {}));
    seen = parse_sse(c.read_until("w5", 10s));
  }
  REQUIRE(seen.ids.size() >= 5);
  REQUIRE(seen.data.back() != "[DONE]");
  // The process dies mid-run; the next start marks the run interrupted.
  s.restart(SIGKILL);
  REQUIRE(s.port() != 0);
  const auto last_seen = seen.ids.back();
  const auto rest = replay_events(s, run, "Last-Event-ID: " + std::to_string(last_seen) + "\r\n");
  REQUIRE(rest.ids.size() >= 2);
  for (std::size_t i = 0; i < rest.ids.size(); ++i) {
    CHECK(rest.ids[i] > last_seen);
    if (i > 0) {
      CHECK(rest.ids[i] > rest.ids[i - 1]);
    }
  }
  CHECK(rest.events[rest.events.size() - 2] == "done");
  CHECK_THAT(rest.data[rest.data.size() - 2], Catch::Contains(R"("status":"interrupted")"));
  CHECK(rest.data.back() == "[DONE]");
  // From the start, too, the replay reaches the end.
  const auto all = replay_events(s, run);
  REQUIRE(all.ids.size() >= 2);
  CHECK(all.events[all.events.size() - 2] == "done");
  CHECK(all.data.back() == "[DONE]");
}
