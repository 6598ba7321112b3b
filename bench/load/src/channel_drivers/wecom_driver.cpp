// WeCom (企业微信): text messages POSTed as WeCom posts them to the app's callback URL, the
// channel's route: the message XML AES-256-CBC encrypted under the EncodingAESKey (WeCom
// has no plain mode) and signed with msg_signature; replies arrive at the fake WeCom API
// (fakes/: the one the tests use) through message/send with the app's access token.

#include <cstdlib>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_wechat.hpp"
#include "troupe/net/channel/wechat_wire.hpp"

namespace troupe::bench::detail {

namespace {

constexpr auto secret_env = "BENCH_WECOM_SECRET";
constexpr auto token_env = "BENCH_WECOM_TOKEN";
constexpr auto aes_key_env = "BENCH_WECOM_AES_KEY";
constexpr auto corp_id = "wwbench0123456789";
constexpr auto agent_id = "1000002";
constexpr auto app_secret = "bench-wecom-app-secret";
constexpr auto callback_token = "benchwecomtoken";
/// An EncodingAESKey: 43 characters of base64 (a 32-byte key with its `=` left off).
constexpr auto aes_key = "QmVuY2hXZUNvbUVuY29kaW5nQUVTS2V5MzJieXRlcyE";

class wecom_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    if (auto cipher = net::wechat::cipher::from_encoding_aes_key(aes_key); !cipher) {
      return tl::unexpected(cipher.error());
    }
    fake_ = std::make_unique<test::fake_wechat>(test::wechat_flavor::wecom, corp_id, app_secret);
    fake_->on_send([&replies](std::string_view text) { replies.take(text); });
    // The troupe started here inherits them (secrets.allowed_env names them).
    ::setenv(secret_env, app_secret, 1);
    ::setenv(token_env, callback_token, 1);
    ::setenv(aes_key_env, aes_key, 1);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"secrets.allowed_env",
             fmt::format(R"(["{}", "{}", "{}"])", secret_env, token_env, aes_key_env)}};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view /*route*/) const override {
    return fmt::format(R"({{"name":{},"type":"wecom","agent":{},"corp_id":"{}","agent_id":"{}",)"
                       R"("secret_env":"{}","token_env":"{}","aes_key_env":"{}","api_base":{},)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), corp_id, agent_id, secret_env, token_env,
                       aes_key_env, json_text(fake_->api_base()));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    // WeCom's thread is the sender: thread `thread` is member bench-user-<thread>.
    test::wechat_sender sender(test::wechat_flavor::wecom, route, callback_token, aes_key, corp_id);
    test::wechat_sender::text_message m;
    m.msg_id = fmt::format("{}", 7'000'000'000'000'000'000ULL + i);
    m.from_user = fmt::format("bench-user-{}", thread);
    m.text = text;
    m.agent_id = agent_id;
    auto made = sender.request(m, {});
    // request() refuses only an EncodingAESKey that is not one, which start() checked; an
    // empty template would fail as a delivery error, counted in the report.
    return made ? as_template(*made) : request_template{};
  }
  std::string describe() const override {
    return "a wecom channel (messages AES-256-CBC encrypted and signed with msg_signature); "
           "replies at the fake WeCom API (fakes/fake_wechat) through message/send with the "
           "app's access token";
  }

private:
  std::unique_ptr<test::fake_wechat> fake_;
};

} // namespace

std::unique_ptr<channel_driver> make_wecom_driver() {
  return std::make_unique<wecom_driver>();
}

} // namespace troupe::bench::detail
