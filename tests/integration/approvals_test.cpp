// Approvals in the real `troupe serve` (issue 19): a world-acting tool (`approval =
// "always"`) pauses the run with a pending approval, announced as the SSE event
// `approval`; approve → the tool runs once; deny → policy_blocked evidence and the
// model's honest answer; the deadline → denied; another user's decision → 404; a second
// decision → 409.

#include <mutex>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/origin_server.hpp"
#include "support/raw_http.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

class request_log {
public:
  std::function<void(const std::string&)> observer() {
    return [this](const std::string& body) {
      std::lock_guard lock(mutex_);
      bodies_.push_back(body);
    };
  }
  std::string joined() const {
    std::lock_guard lock(mutex_);
    std::string out;
    for (const auto& b : bodies_) {
      out += b + "\n";
    }
    return out;
  }

private:
  mutable std::mutex mutex_;
  std::vector<std::string> bodies_;
};

std::string sse_request(std::string_view target, const std::string& token) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + token +
         "\r\nAccept: text/event-stream\r\n\r\n";
}

// The pending approval of `token`'s caller for `run`, once there is one.
std::string pending_approval(api_server& s, const std::string& token, const std::string& run) {
  std::string id;
  const bool found = wait_until(
      [&] {
        const auto body = body_of(s.call("GET", "/api/v1/approvals", token));
        const auto at = body.find(R"("run_id":")" + run + "\"");
        if (at == std::string::npos) {
          return false;
        }
        const auto start = body.rfind(R"({"id":")", at);
        id = body.substr(start + 7, 36);
        return true;
      },
      15s);
  REQUIRE(found);
  return id;
}

std::string run_status(api_server& s, const std::string& token, const std::string& run) {
  return json_field(body_of(s.call("GET", "/api/v1/runs/" + run, token)), "status");
}

} // namespace

TEST_CASE("a tool that needs approval pauses the run: approve runs it once, deny is blocker "
          "evidence, the deadline denies, and only the owner or an admin decides once",
          "[integration][approvals]") {
  origin_server origin;
  request_log log;
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(R"([
    {"match": {"user": "approve me", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "notify", "arguments": {"who": "team"}}]}},
    {"match": {"user": "approve me", "has_tool_result": true}, "reply": {"text": "notified"}},
    {"match": {"user": "deny me", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "notify", "arguments": {"who": "all"}}]}},
    {"match": {"prompt": "deny me", "has_tool_result": true},
     "reply": {"text": "I could not notify anyone: a human denied the call."}},
    {"match": {"user": "wait me", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "notify", "arguments": {"who": "later"}}]}},
    {"match": {"prompt": "wait me", "has_tool_result": true},
     "reply": {"text": "I could not notify anyone: nobody approved the call in time."}}
  ])");
  REQUIRE(rules);
  o.rules = std::move(*rules);
  o.observe = log.observer();
  mock_llm_fixture mock(std::move(o));
  const std::string config =
      "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
      mock.base_url() +
      "\"\n"
      "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
      "timeout_s = 120\n"
      "[[agents]]\nname = \"hasty\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
      "timeout_s = 120\napproval_timeout_s = 1\n"
      "[[tools]]\nname = \"notify\"\ndescription = \"tells people\"\nmethod = \"POST\"\n"
      "approval = \"always\"\nallow_private = true\nurl = \"" +
      origin.origin() + "/echo/notify\"\n";
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", config);
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");
  const auto bob = s.user_token("bob");

  // Approve.
  auto created =
      s.call("POST", "/api/v1/runs", ann, R"({"agent":"worker","message":"approve me"})");
  REQUIRE(status_of(created) == 202);
  const auto run = json_field(body_of(created), "run_id");
  const auto id = pending_approval(s, ann, run);
  INFO("approval " << id);
  CHECK(run_status(s, ann, run) == "running");
  CHECK(origin.calls().count("request") == 0);
  const auto listed = body_of(s.call("GET", "/api/v1/approvals", ann));
  CHECK_THAT(listed, Catch::Contains(R"("tool":"notify")") &&
                         Catch::Contains(R"("arguments":{"who":"team"})") &&
                         Catch::Contains("approval = always") &&
                         Catch::Contains(R"("status":"pending")"));
  CHECK_THAT(body_of(s.call("GET", "/api/v1/approvals", bob)), !Catch::Contains(id));
  CHECK_THAT(body_of(s.call("GET", "/api/v1/approvals", s.admin())), Catch::Contains(id));
  CHECK(status_of(s.call("POST", "/api/v1/approvals/" + id, bob, R"({"decision":"approve"})")) ==
        404);
  CHECK(status_of(s.call("POST", "/api/v1/approvals/" + id, ann, R"({"decision":"maybe"})")) ==
        400);
  auto decided =
      s.call("POST", "/api/v1/approvals/" + id, ann, R"({"decision":"approve","note":"go"})");
  INFO(decided);
  REQUIRE(status_of(decided) == 200);
  CHECK_THAT(body_of(decided), Catch::Contains(R"("status":"approved")") &&
                                   Catch::Contains(R"("note":"go")") &&
                                   Catch::Contains(R"("delivered":true)"));
  CHECK(status_of(s.call("POST", "/api/v1/approvals/" + id, ann, R"({"decision":"deny"})")) == 409);
  REQUIRE(wait_until([&] { return run_status(s, ann, run) == "succeeded"; }, 20s));
  CHECK(origin.calls().count("request") == 1);
  {
    // The SSE replay of the run carries the approval event and its decision.
    raw_client c(s.port());
    c.send(sse_request("/api/v1/runs/" + run + "/events", ann));
    const auto text = c.read_until("data: [DONE]", 10s);
    CHECK_THAT(text, Catch::Contains("event: approval") && Catch::Contains(R"("id":")" + id) &&
                         Catch::Contains(R"("reason":)") &&
                         Catch::Contains(R"("decision":"approved")"));
  }

  // Deny: the tool never runs, the model sees policy_blocked and answers so.
  created = s.call("POST", "/api/v1/runs", ann, R"({"agent":"worker","message":"deny me"})");
  REQUIRE(status_of(created) == 202);
  const auto run2 = json_field(body_of(created), "run_id");
  const auto id2 = pending_approval(s, ann, run2);
  REQUIRE(status_of(s.call("POST", "/api/v1/approvals/" + id2, s.admin(),
                           R"({"decision":"deny","note":"not today"})")) == 200);
  REQUIRE(wait_until([&] { return run_status(s, ann, run2) == "succeeded"; }, 20s));
  CHECK(origin.calls().count("request") == 1);
  CHECK_THAT(log.joined(), Catch::Contains("policy_blocked") && Catch::Contains("not today"));
  CHECK_THAT(body_of(s.call("GET", "/api/v1/runs/" + run2, ann)),
             Catch::Contains("I could not notify anyone"));

  // The deadline (1 s for this agent) denies; a decision after it is 409.
  created = s.call("POST", "/api/v1/runs", ann, R"({"agent":"hasty","message":"wait me"})");
  REQUIRE(status_of(created) == 202);
  const auto run3 = json_field(body_of(created), "run_id");
  const auto id3 = pending_approval(s, ann, run3);
  REQUIRE(wait_until([&] { return run_status(s, ann, run3) != "running"; }, 20s));
  INFO(body_of(s.call("GET", "/api/v1/runs/" + run3, ann)));
  CHECK(run_status(s, ann, run3) == "succeeded");
  CHECK(origin.calls().count("request") == 1);
  CHECK_THAT(log.joined(), Catch::Contains("within 1 s"));
  CHECK(status_of(s.call("POST", "/api/v1/approvals/" + id3, ann, R"({"decision":"approve"})")) ==
        409);
  CHECK_THAT(body_of(s.call("GET", "/api/v1/approvals", ann)), !Catch::Contains(id3));
}

TEST_CASE("a custom tool created over the API carries its approval: a bad value is refused, a "
          "run that calls it waits for a human, and null clears it",
          "[integration][approvals][custom_tools]") {
  origin_server origin;
  request_log log;
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(R"([
    {"match": {"user": "ping them", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "ping", "arguments": {"who": "team"}}]}},
    {"match": {"user": "ping them", "has_tool_result": true}, "reply": {"text": "pinged"}}
  ])");
  REQUIRE(rules);
  o.rules = std::move(*rules);
  o.observe = log.observer();
  mock_llm_fixture mock(std::move(o));
  const std::string config =
      "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
      mock.base_url() +
      "\"\n"
      "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
      "timeout_s = 120\n";
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", config);
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");
  const auto tool = [&](const std::string& approval) {
    return R"({"name":"ping","description":"pings people","kind":"http","method":"POST",)"
           R"("allow_private":true,"url":")" +
           origin.origin() + R"(/echo/ping","approval":)" + approval + "}";
  };
  auto bad = s.call("POST", "/api/v1/tools", s.admin(), tool(R"("sometimes")"));
  INFO(bad);
  CHECK(status_of(bad) == 400);
  CHECK_THAT(body_of(bad), Catch::Contains("approval"));
  CHECK(status_of(s.call("POST", "/api/v1/tools", s.admin(), tool("7"))) == 400);
  auto made = s.call("POST", "/api/v1/tools", s.admin(), tool(R"("always")"));
  INFO(made);
  REQUIRE(status_of(made) == 201);
  CHECK_THAT(body_of(made), Catch::Contains(R"("approval":"always")"));
  CHECK_THAT(body_of(s.call("GET", "/api/v1/tools/ping", ann)),
             Catch::Contains(R"("approval":"always")"));

  // The run pauses on the tool until its owner approves; then it runs once.
  auto created = s.call("POST", "/api/v1/runs", ann, R"({"agent":"worker","message":"ping them"})");
  REQUIRE(status_of(created) == 202);
  const auto run = json_field(body_of(created), "run_id");
  const auto id = pending_approval(s, ann, run);
  CHECK(origin.calls().count("request") == 0);
  REQUIRE(status_of(s.call("POST", "/api/v1/approvals/" + id, ann, R"({"decision":"approve"})")) ==
          200);
  REQUIRE(wait_until([&] { return run_status(s, ann, run) == "succeeded"; }, 20s));
  CHECK(origin.calls().count("request") == 1);

  // Kept across a restart (its own column), and cleared with null: the next run does not ask.
  s.restart();
  CHECK_THAT(body_of(s.call("GET", "/api/v1/tools/ping", ann)),
             Catch::Contains(R"("approval":"always")"));
  auto cleared = s.call("PATCH", "/api/v1/tools/ping", s.admin(), R"({"approval":null})");
  INFO(cleared);
  REQUIRE(status_of(cleared) == 200);
  CHECK_THAT(body_of(cleared), Catch::Contains(R"("approval":null)"));
  created = s.call("POST", "/api/v1/runs", ann, R"({"agent":"worker","message":"ping them"})");
  REQUIRE(status_of(created) == 202);
  const auto run2 = json_field(body_of(created), "run_id");
  REQUIRE(wait_until([&] { return run_status(s, ann, run2) == "succeeded"; }, 20s));
  CHECK(origin.calls().count("request") == 2);
  CHECK_THAT(body_of(s.call("GET", "/api/v1/approvals", s.admin())), !Catch::Contains(run2));
}

TEST_CASE("a restart keeps a pending approval, and the decision after it resumes the run: the "
          "tool runs once and the run finishes",
          "[integration][approvals][restart]") {
  const int signo = GENERATE(SIGTERM, SIGKILL);
  INFO("stopped with signal " << signo);
  origin_server origin;
  request_log log;
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(R"([
    {"match": {"user": "approve me", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "notify", "arguments": {"who": "team"}}]}},
    {"match": {"user": "approve me", "has_tool_result": true}, "reply": {"text": "notified"}},
    {"match": {"user": "deny me", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "notify", "arguments": {"who": "all"}}]}},
    {"match": {"prompt": "deny me", "has_tool_result": true},
     "reply": {"text": "I could not notify anyone: a human denied the call."}}
  ])");
  REQUIRE(rules);
  o.rules = std::move(*rules);
  o.observe = log.observer();
  mock_llm_fixture mock(std::move(o));
  const std::string config =
      "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
      mock.base_url() +
      "\"\n"
      "[[agents]]\nname = \"worker\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
      "timeout_s = 120\n"
      "[[tools]]\nname = \"notify\"\ndescription = \"tells people\"\nmethod = \"POST\"\n"
      "approval = \"always\"\nallow_private = true\nurl = \"" +
      origin.origin() + "/echo/notify\"\n";
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", config);
  REQUIRE(s.port() != 0);
  const auto ann = s.user_token("ann");

  auto created =
      s.call("POST", "/api/v1/runs", ann, R"({"agent":"worker","message":"approve me"})");
  REQUIRE(status_of(created) == 202);
  const auto run = json_field(body_of(created), "run_id");
  const auto id = pending_approval(s, ann, run);
  created = s.call("POST", "/api/v1/runs", ann, R"({"agent":"worker","message":"deny me"})");
  REQUIRE(status_of(created) == 202);
  const auto run2 = json_field(body_of(created), "run_id");
  const auto id2 = pending_approval(s, ann, run2);
  const auto requests_before = log.joined().size();

  s.restart(signo);
  REQUIRE(s.port() != 0);
  // Still pending, and still its run's: nothing was run, nothing was asked of the model.
  CHECK(run_status(s, ann, run) == "running");
  CHECK(run_status(s, ann, run2) == "running");
  CHECK(pending_approval(s, ann, run) == id);
  CHECK(pending_approval(s, ann, run2) == id2);
  CHECK(origin.calls().count("request") == 0);
  CHECK(log.joined().size() == requests_before);
  CHECK(wait_until(
      [&] {
        return s.process().output().find("resumed 2 run(s) that wait for a human") !=
               std::string::npos;
      },
      10s));

  auto decided =
      s.call("POST", "/api/v1/approvals/" + id, ann, R"({"decision":"approve","note":"go"})");
  INFO(decided);
  REQUIRE(status_of(decided) == 200);
  CHECK_THAT(body_of(decided), Catch::Contains(R"("status":"approved")"));
  REQUIRE(wait_until([&] { return run_status(s, ann, run) != "running"; }, 20s));
  INFO(body_of(s.call("GET", "/api/v1/runs/" + run, ann)));
  CHECK(run_status(s, ann, run) == "succeeded");
  CHECK(origin.calls().count("request") == 1);
  CHECK_THAT(body_of(s.call("GET", "/api/v1/runs/" + run, ann)), Catch::Contains("notified"));
  {
    // The run's events across the restart: the approval asked before it, decided after it.
    raw_client c(s.port());
    c.send(sse_request("/api/v1/runs/" + run + "/events", ann));
    const auto text = c.read_until("data: [DONE]", 10s);
    CHECK_THAT(text, Catch::Contains(R"("timeout_s":)") &&
                         Catch::Contains(R"("decision":"approved")") &&
                         Catch::Contains("resume_after_restart"));
  }

  // Denied after the restart: blocker evidence and an honest answer; the tool never ran.
  REQUIRE(status_of(s.call("POST", "/api/v1/approvals/" + id2, ann,
                           R"({"decision":"deny","note":"not today"})")) == 200);
  REQUIRE(wait_until([&] { return run_status(s, ann, run2) != "running"; }, 20s));
  CHECK(run_status(s, ann, run2) == "succeeded");
  CHECK(origin.calls().count("request") == 1);
  CHECK_THAT(log.joined(), Catch::Contains("policy_blocked") && Catch::Contains("not today"));
  CHECK_THAT(body_of(s.call("GET", "/api/v1/runs/" + run2, ann)),
             Catch::Contains("I could not notify anyone"));
}
