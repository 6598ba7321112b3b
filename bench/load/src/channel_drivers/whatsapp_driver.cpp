// WhatsApp (Business Cloud API): message notifications POSTed as Meta posts them to the
// webhook, the channel's route, signed with X-Hub-Signature-256 under the app secret;
// replies arrive at the fake Graph API (fakes/: the one the tests use) through
// /{phone_number_id}/messages with the access token. Every message carries the current
// time: a reply is allowed only within 24 hours of the sender's last message, and troupe
// checks that window from the message's own timestamp.

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_whatsapp.hpp"

namespace troupe::bench::detail {

namespace {

constexpr auto token_env = "BENCH_WHATSAPP_ACCESS_TOKEN";
constexpr auto secret_env = "BENCH_WHATSAPP_APP_SECRET";
constexpr auto verify_env = "BENCH_WHATSAPP_VERIFY_TOKEN";
constexpr auto phone_number_id = "106540352242922";
constexpr auto access_token = "EAAG-bench-access-token";
constexpr auto app_secret = "bench-whatsapp-app-secret";
constexpr auto verify_token = "bench-whatsapp-verify-token";

class whatsapp_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    fake_ = std::make_unique<test::fake_whatsapp>(phone_number_id, access_token);
    fake_->on_send([&replies](std::string_view text) { replies.take(text); });
    // The troupe started here inherits them (secrets.allowed_env names them).
    ::setenv(token_env, access_token, 1);
    ::setenv(secret_env, app_secret, 1);
    ::setenv(verify_env, verify_token, 1);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"secrets.allowed_env",
             fmt::format(R"(["{}", "{}", "{}"])", token_env, secret_env, verify_env)}};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view /*route*/) const override {
    return fmt::format(R"({{"name":{},"type":"whatsapp","agent":{},"phone_number_id":"{}",)"
                       R"("access_token_env":"{}","app_secret_env":"{}","verify_token_env":"{}",)"
                       R"("api_base":{},"session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), phone_number_id, token_env, secret_env,
                       verify_env, json_text(fake_->api_base()));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    // WhatsApp's thread is the sender: thread `thread` is the wa_id 1555<thread>.
    test::whatsapp_sender sender(route, app_secret, phone_number_id);
    test::whatsapp_sender::text_message m;
    m.id = fmt::format("wamid.BENCH{:010}", i);
    m.from = fmt::format("1555{:07}", thread);
    m.text = text;
    m.timestamp = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    return as_template(sender.request(test::whatsapp_sender::message_body(m, phone_number_id), {}));
  }
  std::string describe() const override {
    return "a whatsapp channel (notifications signed with X-Hub-Signature-256, each with the "
           "current timestamp: inside the 24-hour window); replies at the fake Cloud API "
           "(fakes/fake_whatsapp) through /{phone_number_id}/messages with the access token";
  }

private:
  std::unique_ptr<test::fake_whatsapp> fake_;
};

} // namespace

std::unique_ptr<channel_driver> make_whatsapp_driver() {
  return std::make_unique<whatsapp_driver>();
}

} // namespace troupe::bench::detail
