// The WeChat Official Account (`wechat_mp`) in safe mode: text messages POSTed as WeChat
// posts them to the server URL, the channel's route, with `encrypt_type=aes` — the message
// XML AES-256-CBC encrypted under the EncodingAESKey, signed twice (`signature` over the
// token, timestamp and nonce; `msg_signature` over the ciphertext too). Plain mode (the XML
// as it is, `signature` only) is the easier path and is not driven. Replies arrive at the
// fake WeChat API (fakes/: the one the tests use) through the customer-service API
// (message/custom/send) with the account's access token.

#include <cstdlib>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_wechat.hpp"
#include "troupe/net/channel/wechat_wire.hpp"

namespace troupe::bench::detail {

namespace {

constexpr auto secret_env = "BENCH_WECHAT_APP_SECRET";
constexpr auto token_env = "BENCH_WECHAT_TOKEN";
constexpr auto aes_key_env = "BENCH_WECHAT_AES_KEY";
constexpr auto app_id = "wxbench0123456789";
constexpr auto app_secret = "bench-wechat-app-secret";
constexpr auto callback_token = "benchwechattoken";
/// An EncodingAESKey: 43 characters of base64 (a 32-byte key with its `=` left off).
constexpr auto aes_key = "QmVuY2hXZUNoYXRNUEVuY29kaW5nQUVTS2V5MzJieXQ";

class wechat_mp_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    if (auto cipher = net::wechat::cipher::from_encoding_aes_key(aes_key); !cipher) {
      return tl::unexpected(cipher.error());
    }
    fake_ = std::make_unique<test::fake_wechat>(test::wechat_flavor::official_account, app_id,
                                                app_secret);
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
    return fmt::format(R"({{"name":{},"type":"wechat_mp","agent":{},"app_id":"{}",)"
                       R"("app_secret_env":"{}","token_env":"{}","aes_key_env":"{}",)"
                       R"("api_base":{},"session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), app_id, secret_env, token_env,
                       aes_key_env, json_text(fake_->api_base()));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    // WeChat's thread is the sender: thread `thread` is the OpenID oBench…<thread>.
    test::wechat_sender sender(test::wechat_flavor::official_account, route, callback_token,
                               aes_key, app_id);
    test::wechat_sender::text_message m;
    m.msg_id = fmt::format("{}", 6'000'000'000'000'000'000ULL + i);
    m.from_user = fmt::format("oBenchOpenId{:08}", thread);
    m.text = text;
    auto made = sender.request(m, {});
    // request() refuses only an EncodingAESKey that is not one, which start() checked; an
    // empty template would fail as a delivery error, counted in the report.
    return made ? as_template(*made) : request_template{};
  }
  std::string describe() const override {
    return "a wechat_mp channel in safe mode (encrypt_type=aes: messages AES-256-CBC "
           "encrypted, signed with signature and msg_signature; plain mode is not driven); "
           "replies at the fake WeChat API (fakes/fake_wechat) through message/custom/send "
           "with the account's access token";
  }

private:
  std::unique_ptr<test::fake_wechat> fake_;
};

} // namespace

std::unique_ptr<channel_driver> make_wechat_mp_driver() {
  return std::make_unique<wechat_mp_driver>();
}

} // namespace troupe::bench::detail
