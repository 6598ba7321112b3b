// Approvals in a channel (issue 19), end to end: the real `troupe serve` with a Telegram
// channel polling the fake Bot API. A run that calls a tool needing approval asks the
// thread ("Approval needed … /approve ID … /deny ID"); only the sender whose message
// started the run decides; `/approve ID` runs the tool once and the answer follows,
// `/deny ID` leaves it unrun and the answer says the agent could not act.

#include <regex>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/fake_telegram.hpp"
#include "support/origin_server.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t group = -5005;
constexpr std::int64_t ann = 1001;
constexpr std::int64_t bob = 2002;

troupe::mock::mock_llm_options scripted_mock() {
  return scripted(R"([
    {"match": {"user": "approve me", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "notify", "arguments": {"who": "team"}}]}},
    {"match": {"user": "approve me", "has_tool_result": true}, "reply": {"text": "notified"}},
    {"match": {"user": "deny me", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "notify", "arguments": {"who": "all"}}]}},
    {"match": {"prompt": "deny me", "has_tool_result": true},
     "reply": {"text": "I could not notify anyone: a human denied the call."}}
  ])");
}

struct node {
  origin_server origin;
  mock_llm_fixture mock{scripted_mock()};
  fake_telegram fake;
  api_server server;

  /// `head`: tables written first (e.g. [actors]); `timeout_s`: the agent's deadline.
  explicit node(const std::string& head = {}, int timeout_s = 60)
      : server("rate_per_second = 1000\nrate_burst = 1000\n", head + config(timeout_s)) {}

  std::string config(int timeout_s) const {
    return mock_provider_toml(mock) +
           "[[agents]]\nname = \"helper\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
           "timeout_s = " +
           std::to_string(timeout_s) +
           "\n"
           "[[tools]]\nname = \"notify\"\ndescription = \"tells people\"\nmethod = \"POST\"\n"
           "approval = \"always\"\nallow_private = true\nurl = \"" +
           origin.origin() +
           "/echo/notify\"\n"
           "[[channels]]\nname = \"tg\"\ntype = \"telegram\"\nagent = \"helper\"\n"
           "mode = \"poll\"\ntoken = \"" +
           fake.token() + "\"\napi_base = \"" + fake.api_base() + "\"\n";
  }

  void say(const std::string& text, std::int64_t from) {
    telegram_incoming m;
    m.chat_id = group;
    m.from_id = from;
    m.text = text;
    fake.push_message(m);
  }

  /// The text of the first message sent to the group that contains `part`, once there is one.
  std::string sent_containing(const std::string& part) {
    std::string found;
    const bool seen = wait_until(
        [&] {
          for (const auto& m : fake.sent_to(group)) {
            if (m.text.find(part) != std::string::npos) {
              found = m.text;
              return true;
            }
          }
          return false;
        },
        30s);
    INFO("waiting for a message containing: " << part);
    if (!seen) {
      std::string all;
      for (const auto& m : fake.sent()) {
        all += std::to_string(m.chat_id) + ": " + m.text + "\n";
      }
      INFO("sent:\n" << all);
      INFO("troupe's log:\n" << server.process().output());
      REQUIRE(seen);
    }
    return found;
  }

  std::size_t notified() const {
    return origin.calls().count("request");
  }
};

/// The approval id an approval request names.
std::string approval_id_in(const std::string& text) {
  static const std::regex pattern("/approve ([0-9a-f-]{36})");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, pattern));
  return m[1].str();
}

} // namespace

TEST_CASE("a channel user approves with /approve ID: the tool runs once and the answer follows, "
          "another sender may not decide",
          "[integration][channels][telegram][approvals]") {
  node n;
  REQUIRE(n.server.port() != 0);
  n.say("approve me", ann);
  const auto asked = n.sent_containing("Approval needed");
  INFO(asked);
  CHECK_THAT(asked, Catch::Contains("notify") && Catch::Contains("team") &&
                        Catch::Contains("/deny ") && Catch::Contains("approval = always"));
  const auto id = approval_id_in(asked);
  CHECK(n.notified() == 0);

  // Bob did not start the run: his answer is refused as if there were no such approval.
  n.say("/approve " + id, bob);
  n.sent_containing("No approval " + id + " waits for you here.");
  CHECK(n.notified() == 0);
  CHECK_THAT(body_of(n.server.call("GET", "/api/v1/approvals", n.server.admin())),
             Catch::Contains(id) && Catch::Contains(R"("status":"pending")"));

  n.say("/approve " + id, ann);
  n.sent_containing("Approved: notify runs now.");
  n.sent_containing("notified");
  CHECK(n.notified() == 1);
  // Decided once: a second answer is told so, and nothing runs again.
  n.say("/deny " + id, ann);
  n.sent_containing("Approval " + id + " was decided already (approved).");
  CHECK(n.notified() == 1);
  // Asked once, whatever was sent after.
  std::size_t asks = 0;
  for (const auto& m : n.fake.sent_to(group)) {
    asks += m.text.find("Approval needed") != std::string::npos ? 1 : 0;
  }
  CHECK(asks == 1);
}

TEST_CASE("a channel user denies an approval with /deny ID: the tool never runs and the answer "
          "says the agent could not act",
          "[integration][channels][telegram][approvals]") {
  node n;
  REQUIRE(n.server.port() != 0);
  n.say("deny me", ann);
  const auto id = approval_id_in(n.sent_containing("Approval needed"));
  n.say("/deny " + id, ann);
  n.sent_containing("Denied: notify will not run.");
  const auto answer = n.sent_containing("could not notify anyone");
  CHECK_THAT(answer, Catch::Contains("denied"));
  CHECK(n.notified() == 0);
  // An unknown id and a missing one are answered, not run.
  n.say("/approve 00000000-0000-0000-0000-000000000000", ann);
  n.sent_containing("No approval 00000000-0000-0000-0000-000000000000 waits for you here.");
  n.say("/approve", ann);
  n.sent_containing("/approve ID or /deny ID");
}

TEST_CASE("a channel run that waits for a human longer than the thread's wait is answered once "
          "the human decides, not told it did not finish",
          "[integration][channels][telegram][approvals]") {
  // The thread waits for an answer the agent's timeout (1 s) plus the grace (300 ms); the
  // human answers after that has passed, and the run, whose own deadline moves by the time
  // it waited for the human, still answers.
  node n("[actors]\nchannel_run_grace_ms = 300\n", 1);
  REQUIRE(n.server.port() != 0);
  n.say("approve me", ann);
  const auto id = approval_id_in(n.sent_containing("Approval needed"));
  // The thread's first wait ran out and it waits on (troupe says so in its log).
  REQUIRE(wait_until(
      [&] {
        return n.server.process().output().find("waits for a human's approval past") !=
               std::string::npos;
      },
      30s));
  n.say("/approve " + id, ann);
  n.sent_containing("Approved: notify runs now.");
  const auto answer = n.sent_containing("notified");
  CHECK(n.notified() == 1);
  for (const auto& m : n.fake.sent_to(group)) {
    INFO(m.text);
    CHECK(m.text.find("did not finish") == std::string::npos);
    CHECK(m.text.find("did not answer in time") == std::string::npos);
  }
}

TEST_CASE("a Telegram user approves with the message's inline button: the press is answered, the "
          "tool runs once, and another user's press decides nothing",
          "[integration][channels][telegram][approvals]") {
  node n;
  REQUIRE(n.server.port() != 0);
  n.say("approve me", ann);
  const auto id = approval_id_in(n.sent_containing("Approval needed"));
  telegram_sent asked;
  for (const auto& m : n.fake.sent_to(group)) {
    if (m.text.find("Approval needed") != std::string::npos) {
      asked = m;
    }
  }
  // The two answers as buttons under the message, the text still saying how to type them.
  using button = std::pair<std::string, std::string>;
  REQUIRE(asked.buttons ==
          std::vector<button>{{"Approve", "/approve " + id}, {"Deny", "/deny " + id}});

  // Bob's press is refused as his typed answer would be; each press is answered.
  n.fake.press_button(asked, "/approve " + id, bob);
  n.sent_containing("No approval " + id + " waits for you here.");
  CHECK(n.notified() == 0);
  n.fake.press_button(asked, "/approve " + id, ann);
  n.sent_containing("Approved: notify runs now.");
  n.sent_containing("notified");
  CHECK(n.notified() == 1);
  CHECK(n.fake.wait_for_calls("answerCallbackQuery", 2, 30s));
  // A second press of the same button is told the decision stands; nothing runs again.
  n.fake.press_button(asked, "/approve " + id, ann);
  n.sent_containing("Approval " + id + " was decided already (approved).");
  CHECK(n.notified() == 1);
}
