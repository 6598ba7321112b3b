// WeCom, WeChat Official Accounts (plain and encrypted) and WhatsApp end to end: the real
// `troupe serve` binary, a scripted mock-llm and each platform's fake
// (support/fake_wechat.hpp, support/fake_whatsapp.hpp) with callbacks signed (and
// encrypted) as the platform does. Every case runs for each platform through one driver
// (`platform` below): the URL handshake; a round trip; a bad signature refused with
// nothing journaled; the same message delivered three times answered once; a SIGKILL
// mid-run answered exactly once after the restart; a long answer split at the platform's
// limit; an expired access token refreshed without losing the reply; a rate limit and a
// 5xx retried.

#include <csignal>
#include <cstdlib>
#include <memory>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/fake_wechat.hpp"
#include "support/fake_whatsapp.hpp"
#include "support/long_answer.hpp"
#include "support/raw_http.hpp"
#include "support/redeliver.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr auto aes_key = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
constexpr auto callback_token = "QDG6eK";

troupe::mock::mock_llm_options scripted_mock() {
  const auto script = R"([
    {"match": {"user": "hello"}, "reply": {"text": "Hi there"}},
    {"match": {"user": "second"}, "reply": {"text": "Second answer"}},
    {"match": {"user": "long"}, "reply": {"text": ")" +
                      json_escaped(long_answer(4)) + R"("}}
  ])";
  return scripted(script);
}

std::string route(std::uint16_t port) {
  return "http://127.0.0.1:" + std::to_string(port) + "/api/v1/webhooks/channels/ch";
}

/// One platform as the tests drive it: its fake, its channel, its deliveries.
class platform {
public:
  virtual ~platform() = default;
  /// The [[channels]] entry (name "ch", agent "helper").
  virtual std::string channel_toml() const = 0;
  /// Delivers text message `id` from the default sender; the HTTP status.
  virtual unsigned deliver(std::uint16_t port, const std::string& id, const std::string& text,
                           bool forged = false) const = 0;
  /// The URL check: status and body; `expected_echo` what a good one answers.
  virtual std::pair<unsigned, std::string> handshake(std::uint16_t port, bool forged) const = 0;
  virtual std::string expected_echo() const = 0;
  virtual std::vector<std::string> sent() const = 0;
  virtual bool wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const = 0;
  /// Calls of the send endpoint so far.
  virtual std::size_t send_calls() const = 0;
  virtual void expire_token_once() = 0;
  virtual void rate_limit_once() = 0;
  virtual void server_error_once() = 0;
  /// Tokens fetched so far (WhatsApp: reads of the token after a refusal, counted by the
  /// fake as refused calls).
  virtual std::size_t token_fetches() const = 0;
  /// A part's limit, in bytes of UTF-8 or characters.
  virtual std::size_t part_limit() const = 0;
};

class wechat_platform final : public platform {
public:
  wechat_platform(wechat_flavor flavor, bool encrypted)
      : flavor_(flavor), encrypted_(encrypted),
        fake_(flavor, flavor == wechat_flavor::wecom ? "ww1234567890abcd" : "wx5823bf96d3bd56c7",
              "fake-app-secret") {
    ::setenv("TROUPE_KEY_CH_SECRET", "fake-app-secret", 1);
    ::setenv("TROUPE_KEY_CH_TOKEN", callback_token, 1);
    ::setenv("TROUPE_KEY_CH_AES", aes_key, 1);
  }
  std::string receive_id() const {
    return flavor_ == wechat_flavor::wecom ? "ww1234567890abcd" : "wx5823bf96d3bd56c7";
  }
  std::string channel_toml() const override {
    std::string out = "[[channels]]\nname = \"ch\"\nagent = \"helper\"\napi_base = \"" +
                      fake_.api_base() + "\"\ntoken_env = \"TROUPE_KEY_CH_TOKEN\"\n";
    if (flavor_ == wechat_flavor::wecom) {
      out += "type = \"wecom\"\ncorp_id = \"" + receive_id() +
             "\"\nagent_id = \"1000002\"\nsecret_env = \"TROUPE_KEY_CH_SECRET\"\n"
             "aes_key_env = \"TROUPE_KEY_CH_AES\"\n";
    } else {
      out += "type = \"wechat_mp\"\napp_id = \"" + receive_id() +
             "\"\napp_secret_env = \"TROUPE_KEY_CH_SECRET\"\n";
      if (encrypted_) {
        out += "aes_key_env = \"TROUPE_KEY_CH_AES\"\n";
      }
    }
    return out;
  }
  wechat_sender sender(std::uint16_t port) const {
    return wechat_sender(flavor_, route(port), callback_token, encrypted_ ? aes_key : "",
                         receive_id());
  }
  unsigned deliver(std::uint16_t port, const std::string& id, const std::string& text,
                   bool forged) const override {
    wechat_sender::delivery how;
    if (forged) {
      how.wrong_token = "forged";
    }
    auto answer = sender(port).send({id, "zhangsan", text, "1000002"}, how);
    REQUIRE(answer);
    if (answer->status != 200) {
      UNSCOPED_INFO("the delivery was answered " << answer->status << ": " << answer->body);
    }
    if (answer->status == 200) {
      // WeCom: an empty body; WeChat: "success" (no passive reply).
      CHECK(answer->body == (flavor_ == wechat_flavor::wecom ? "" : "success"));
    }
    return answer->status;
  }
  std::pair<unsigned, std::string> handshake(std::uint16_t port, bool forged) const override {
    wechat_sender::delivery how;
    if (forged) {
      how.wrong_token = "forged";
    }
    auto answer = sender(port).url_check(expected_echo(), how);
    REQUIRE(answer);
    return {answer->status, answer->body};
  }
  std::string expected_echo() const override {
    return "1616140317555161061";
  }
  std::vector<std::string> sent() const override {
    std::vector<std::string> out;
    for (const auto& s : fake_.sent()) {
      CHECK(s.touser == "zhangsan");
      if (flavor_ == wechat_flavor::wecom) {
        CHECK(s.agentid == "1000002");
      }
      out.push_back(s.content);
    }
    return out;
  }
  bool wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const override {
    return fake_.wait_for_sent(n, deadline);
  }
  std::size_t send_calls() const override {
    return fake_.calls("send").size();
  }
  void expire_token_once() override {
    fake_.fail("send", {wechat_fault::kind::expire_token});
  }
  void rate_limit_once() override {
    fake_.fail("send", {wechat_fault::kind::rate_limited});
  }
  void server_error_once() override {
    fake_.fail("send", {wechat_fault::kind::server_error});
  }
  std::size_t token_fetches() const override {
    return fake_.tokens_issued();
  }
  std::size_t part_limit() const override {
    return 2048;
  }

private:
  wechat_flavor flavor_;
  bool encrypted_;
  fake_wechat fake_;
};

class whatsapp_platform final : public platform {
public:
  static constexpr auto phone = "106540352242922";
  whatsapp_platform() : fake_(phone, "EAAG-fake-access-token") {
    ::setenv("TROUPE_KEY_CH_WA_TOKEN", "EAAG-fake-access-token", 1);
    ::setenv("TROUPE_KEY_CH_WA_SECRET", "fake-app-secret", 1);
    ::setenv("TROUPE_KEY_CH_WA_VERIFY", "fake-verify-token", 1);
  }
  std::string channel_toml() const override {
    return "[[channels]]\nname = \"ch\"\nagent = \"helper\"\ntype = \"whatsapp\"\n"
           "phone_number_id = \"" +
           std::string(phone) +
           "\"\naccess_token_env = \"TROUPE_KEY_CH_WA_TOKEN\"\n"
           "app_secret_env = \"TROUPE_KEY_CH_WA_SECRET\"\n"
           "verify_token_env = \"TROUPE_KEY_CH_WA_VERIFY\"\napi_base = \"" +
           fake_.api_base() + "\"\n";
  }
  unsigned deliver(std::uint16_t port, const std::string& id, const std::string& text,
                   bool forged) const override {
    whatsapp_sender::delivery how;
    if (forged) {
      how.wrong_secret = "forged";
    }
    auto answer =
        whatsapp_sender(route(port), "fake-app-secret", phone)
            .send(whatsapp_sender::text_message{"wamid." + id, "16315551234", text, {}}, how);
    REQUIRE(answer);
    if (answer->status != 200) {
      UNSCOPED_INFO("the delivery was answered " << answer->status << ": " << answer->body);
    }
    return answer->status;
  }
  std::pair<unsigned, std::string> handshake(std::uint16_t port, bool forged) const override {
    auto answer = whatsapp_sender(route(port), "fake-app-secret", phone)
                      .subscribe(forged ? "forged" : "fake-verify-token", expected_echo());
    REQUIRE(answer);
    return {answer->status, answer->body};
  }
  std::string expected_echo() const override {
    return "1158201444";
  }
  std::vector<std::string> sent() const override {
    std::vector<std::string> out;
    for (const auto& s : fake_.sent()) {
      CHECK(s.to == "16315551234");
      out.push_back(s.body);
    }
    return out;
  }
  bool wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const override {
    return fake_.wait_for_sent(n, deadline);
  }
  std::size_t send_calls() const override {
    return fake_.calls().size();
  }
  void expire_token_once() override {
    fake_.fail({whatsapp_fault::kind::expire_token});
  }
  void rate_limit_once() override {
    fake_.fail({whatsapp_fault::kind::pair_rate_limited});
  }
  void server_error_once() override {
    fake_.fail({whatsapp_fault::kind::server_error});
  }
  std::size_t token_fetches() const override {
    std::size_t refused = 0;
    for (const auto& c : fake_.calls()) {
      refused += c.status == 401 ? 1 : 0;
    }
    return refused + 1;
  }
  std::size_t part_limit() const override {
    return 4096;
  }

private:
  fake_whatsapp fake_;
};

std::unique_ptr<platform> make_platform(const std::string& name) {
  if (name == "wecom") {
    return std::make_unique<wechat_platform>(wechat_flavor::wecom, true);
  }
  if (name == "wechat_mp") {
    return std::make_unique<wechat_platform>(wechat_flavor::official_account, false);
  }
  if (name == "wechat_mp encrypted") {
    return std::make_unique<wechat_platform>(wechat_flavor::official_account, true);
  }
  return std::make_unique<whatsapp_platform>();
}

std::string config(const mock_llm_fixture& mock, const platform& p) {
  return mock_provider_toml(mock) +
         "[[agents]]\nname = \"helper\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
         "tools = [\"finish\"]\ntimeout_s = 60\n" +
         p.channel_toml();
}

struct node {
  std::unique_ptr<platform> p;
  mock_llm_fixture mock;
  api_server server;

  node(const std::string& name, troupe::mock::mock_llm_options script = scripted_mock())
      : p(make_platform(name)), mock(std::move(script)),
        server("rate_per_second = 1000\nrate_burst = 1000\n", config(mock, *p)) {}

  /// One message as the platform delivers it: again after a 503 (support/redeliver.hpp).
  unsigned deliver(const std::string& id, const std::string& text, bool forged = false) const {
    return deliver_until_acknowledged([&] { return p->deliver(server.port(), id, text, forged); });
  }
  std::string channel() const {
    return body_of(server.call("GET", "/api/v1/channels/ch", server.admin()));
  }
};

std::string each_platform() {
  return GENERATE(as<std::string>{}, "wecom", "wechat_mp", "wechat_mp encrypted", "whatsapp");
}

} // namespace

TEST_CASE("wecom / wechat_mp / whatsapp: the URL handshake is answered, a forged one refused, "
          "nothing journaled",
          "[integration][channels][platforms]") {
  const auto name = each_platform();
  DYNAMIC_SECTION(name) {
    node n(name);
    const auto [status, body] = n.p->handshake(n.server.port(), false);
    CHECK(status == 200);
    CHECK(body == n.p->expected_echo());
    CHECK(n.p->handshake(n.server.port(), true).first == 403);
    CHECK(json_field(n.channel(), "messages") == "0");
    // Nothing journaled, no model called, nothing sent.
    CHECK(n.mock.stats().completion_requests == 0);
    CHECK(n.p->send_calls() == 0);
  }
}

TEST_CASE("wecom / wechat_mp / whatsapp: a message is answered once to its sender, and a second "
          "joins the conversation",
          "[integration][channels][platforms]") {
  const auto name = each_platform();
  DYNAMIC_SECTION(name) {
    node n(name);
    CHECK(n.deliver("1001", "hello") == 200);
    REQUIRE(n.p->wait_for_sent(1, 30s));
    CHECK(n.p->sent() == std::vector<std::string>{"Hi there"});
    CHECK(n.deliver("1002", "second") == 200);
    REQUIRE(n.p->wait_for_sent(2, 30s));
    CHECK(n.p->sent()[1] == "Second answer");
    CHECK(json_field(body_of(n.server.call("GET", "/api/v1/channels/ch/threads", n.server.admin())),
                     "total") == "1");
    CHECK(n.p->token_fetches() == 1); // the cached token served both
    const auto view = n.channel();
    CHECK(view.find("fake-app-secret") == std::string::npos);
    CHECK(view.find(aes_key) == std::string::npos);
  }
}

TEST_CASE("wecom / wechat_mp / whatsapp: a bad signature is refused and journals nothing",
          "[integration][channels][platforms]") {
  const auto name = each_platform();
  DYNAMIC_SECTION(name) {
    node n(name);
    CHECK(n.deliver("1001", "hello", true) == 401);
    CHECK(status_of(http_exchange(n.server.port(), "POST", "/api/v1/webhooks/channels/ch",
                                  "<xml><MsgType>text</MsgType></xml>",
                                  "Content-Type: text/xml\r\n")) == 401);
    CHECK(json_field(n.channel(), "messages") == "0");
    CHECK(n.mock.stats().completion_requests == 0);
    // The same message, signed, is new and answered.
    CHECK(n.deliver("1001", "hello") == 200);
    REQUIRE(n.p->wait_for_sent(1, 30s));
    CHECK(n.mock.stats().completion_requests == 1);
  }
}

TEST_CASE("wecom / wechat_mp / whatsapp: the same message delivered three times is answered once",
          "[integration][channels][platforms]") {
  const auto name = each_platform();
  DYNAMIC_SECTION(name) {
    node n(name);
    for (int i = 0; i < 3; ++i) {
      CHECK(n.deliver("2001", "hello") == 200);
    }
    CHECK(n.deliver("2002", "second") == 200);
    REQUIRE(n.p->wait_for_sent(2, 30s));
    REQUIRE(wait_until([&] { return json_field(n.channel(), "pending") == "0"; }, 30s));
    CHECK(n.p->sent() == std::vector<std::string>{"Hi there", "Second answer"});
    CHECK(json_field(n.channel(), "messages") == "2");
    CHECK(n.mock.stats().completion_requests == 2);
  }
}

TEST_CASE("wecom / wechat_mp / whatsapp: a troupe killed mid-run answers the message exactly once "
          "after its restart",
          "[integration][channels][platforms]") {
  const auto name = each_platform();
  DYNAMIC_SECTION(name) {
    // "hold" is answered in ten minutes: long after the troupe waiting for it is killed.
    node n(name, holding(scripted_mock()));
    CHECK(n.deliver("3001", "hold") == 200);
    REQUIRE(wait_until([&] { return n.mock.stats().completion_requests == 1; }, 30s));
    n.server.restart(SIGKILL);
    REQUIRE(n.server.port() != 0);
    // The platform delivers the message again (it may have seen no answer), then a next one.
    CHECK(n.deliver("3001", "hold") == 200);
    CHECK(n.deliver("3002", "hello") == 200);
    REQUIRE(n.p->wait_for_sent(2, 30s));
    REQUIRE(wait_until([&] { return json_field(n.channel(), "pending") == "0"; }, 30s));
    const auto sent = n.p->sent();
    REQUIRE(sent.size() == 2);
    CHECK_THAT(sent[0], Catch::Contains("interrupted by a restart"));
    CHECK(sent[1] == "Hi there");
    CHECK(n.mock.stats().completion_requests == 2);
  }
}

TEST_CASE("wecom / wechat_mp / whatsapp: a long answer is split at the platform's limit",
          "[integration][channels][platforms]") {
  const auto name = each_platform();
  DYNAMIC_SECTION(name) {
    node n(name);
    CHECK(n.deliver("4001", "long") == 200);
    REQUIRE(wait_until(
        [&] { return n.p->sent().size() >= 2 && json_field(n.channel(), "pending") == "0"; }, 30s));
    const auto sent = n.p->sent();
    CHECK(sent.size() == (n.p->part_limit() == 2048 ? 4U : 2U));
    std::string joined;
    for (const auto& part : sent) {
      CHECK(part.size() <= n.p->part_limit());
      joined += (joined.empty() ? "" : "\n\n") + part;
    }
    CHECK(joined == long_answer(4));
  }
}

TEST_CASE("wecom / wechat_mp / whatsapp: an expired access token is refreshed without losing the "
          "reply, and a rate limit and a 5xx are retried, once each",
          "[integration][channels][platforms]") {
  const auto name = each_platform();
  DYNAMIC_SECTION(name) {
    node n(name);
    n.p->expire_token_once();
    CHECK(n.deliver("5001", "hello") == 200);
    REQUIRE(n.p->wait_for_sent(1, 30s));
    CHECK(n.p->sent() == std::vector<std::string>{"Hi there"});
    // The fake records a call after answering it: waited for, not assumed.
    REQUIRE(wait_until([&] { return n.p->send_calls() >= 2; }, 30s));
    CHECK(n.p->send_calls() == 2); // refused, then sent with a fresh token
    CHECK(n.p->token_fetches() == 2);
    n.p->rate_limit_once();
    n.p->server_error_once();
    CHECK(n.deliver("5002", "second") == 200);
    REQUIRE(n.p->wait_for_sent(2, 60s));
    REQUIRE(wait_until([&] { return json_field(n.channel(), "pending") == "0"; }, 30s));
    CHECK(n.p->sent() == std::vector<std::string>{"Hi there", "Second answer"});
    REQUIRE(wait_until([&] { return n.p->send_calls() >= 5; }, 30s));
    CHECK(n.p->send_calls() == 5);
    CHECK(json_field(n.channel(), "dead") == "0");
  }
}
