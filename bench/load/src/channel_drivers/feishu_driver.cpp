// Feishu/Lark: events pushed encrypted (AES-256-CBC under the encrypt key) and signed
// (X-Lark-Signature) to the channel's route; replies arrive at the fake open platform
// (fakes/: the one the tests use) through the message reply API with a tenant token.

#include <cstdlib>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_feishu.hpp"

namespace troupe::bench::detail {

namespace {

constexpr auto secret_env = "BENCH_FEISHU_APP_SECRET";
constexpr auto verify_env = "BENCH_FEISHU_VERIFICATION_TOKEN";
constexpr auto encrypt_env = "BENCH_FEISHU_ENCRYPT_KEY";
constexpr auto verification_token = "bench-verification-token";
constexpr auto encrypt_key = "bench-encrypt-key";

class feishu_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    fake_ = std::make_unique<test::fake_feishu>("cli_bench", "bench-app-secret");
    fake_->on_reply([&replies](std::string_view text) { replies.take(text); });
    // The troupe started here inherits them (secrets.allowed_env names them).
    ::setenv(secret_env, fake_->app_secret().c_str(), 1);
    ::setenv(verify_env, verification_token, 1);
    ::setenv(encrypt_env, encrypt_key, 1);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"secrets.allowed_env",
             fmt::format(R"(["{}", "{}", "{}"])", secret_env, verify_env, encrypt_env)}};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view /*route*/) const override {
    return fmt::format(R"({{"name":{},"type":"feishu","agent":{},"app_id":"cli_bench",)"
                       R"("app_secret_env":"{}","verification_token_env":"{}",)"
                       R"("encrypt_key_env":"{}","api_base":{},)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), secret_env, verify_env, encrypt_env,
                       json_text(fake_->api_base()));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    test::feishu_event_sender sender(route, verification_token, encrypt_key);
    test::feishu_event_sender::message m;
    m.event_id = fmt::format("bench-ev-{}", i);
    m.message_id = fmt::format("om_bench_{}", i);
    m.chat_id = fmt::format("oc_bench_{}", thread);
    m.sender = fmt::format("ou_bench_{}", thread);
    m.text = text;
    return as_template(sender.request(sender.event_body(m), {}));
  }
  std::string describe() const override {
    return "a feishu channel (encrypted, signed events); replies at the fake Feishu open "
           "platform (fakes/fake_feishu) through the reply API with a tenant token";
  }

private:
  std::unique_ptr<test::fake_feishu> fake_;
};

} // namespace

std::unique_ptr<channel_driver> make_feishu_driver() {
  return std::make_unique<feishu_driver>();
}

} // namespace troupe::bench::detail
