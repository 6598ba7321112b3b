// WeCom (企业微信) and the WeChat Official Account (`wechat_mp`): one driver, two profiles.
// Text messages are POSTed as the platform posts them to the channel's route, encrypted:
// the message XML AES-256-CBC under the EncodingAESKey and signed with msg_signature (WeCom
// has no plain mode; the Official Account is driven in safe mode, `encrypt_type=aes`, with
// `signature` too; its plain mode is the easier path and is not driven). Replies arrive at
// the fake WeChat API (fakes/: the one the tests use) with the app's access token: WeCom's
// message/send, the Official Account's customer-service message/custom/send.

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_wechat.hpp"
#include "troupe/net/channel/wechat_wire.hpp"

namespace troupe::bench::detail {

namespace {

/// What differs between WeCom and the Official Account.
struct wechat_profile {
  test::wechat_flavor flavor;
  std::string_view type; ///< the channel type
  std::string_view secret_env;
  std::string_view token_env;
  std::string_view aes_key_env;
  std::string_view app_id; ///< WeCom's corp id, or the account's app id
  std::string_view app_secret;
  std::string_view callback_token;
  /// An EncodingAESKey: 43 characters of base64 (a 32-byte key with its `=` left off).
  std::string_view aes_key;
  std::string_view agent_id; ///< WeCom's app; empty for the Official Account
  std::uint64_t first_msg_id;
  std::string_view describe;
};

const wechat_profile wecom_profile{
    test::wechat_flavor::wecom,
    "wecom",
    "BENCH_WECOM_SECRET",
    "BENCH_WECOM_TOKEN",
    "BENCH_WECOM_AES_KEY",
    "wwbench0123456789",
    "bench-wecom-app-secret",
    "benchwecomtoken",
    "QmVuY2hXZUNvbUVuY29kaW5nQUVTS2V5MzJieXRlcyE",
    "1000002",
    7'000'000'000'000'000'000ULL,
    "a wecom channel (messages AES-256-CBC encrypted and signed with msg_signature); replies "
    "at the fake WeCom API (fakes/fake_wechat) through message/send with the app's access "
    "token"};

const wechat_profile official_account_profile{
    test::wechat_flavor::official_account,
    "wechat_mp",
    "BENCH_WECHAT_APP_SECRET",
    "BENCH_WECHAT_TOKEN",
    "BENCH_WECHAT_AES_KEY",
    "wxbench0123456789",
    "bench-wechat-app-secret",
    "benchwechattoken",
    "QmVuY2hXZUNoYXRNUEVuY29kaW5nQUVTS2V5MzJieXQ",
    "",
    6'000'000'000'000'000'000ULL,
    "a wechat_mp channel in safe mode (encrypt_type=aes: messages AES-256-CBC encrypted, "
    "signed with signature and msg_signature; plain mode is not driven); replies at the fake "
    "WeChat API (fakes/fake_wechat) through message/custom/send with the account's access "
    "token"};

class wechat_driver final : public channel_driver {
public:
  explicit wechat_driver(const wechat_profile& p) : p_(p) {}

  expected<void> start(reply_tracker& replies) override {
    if (auto cipher = net::wechat::cipher::from_encoding_aes_key(p_.aes_key); !cipher) {
      return tl::unexpected(cipher.error());
    }
    fake_ = std::make_unique<test::fake_wechat>(p_.flavor, std::string(p_.app_id),
                                                std::string(p_.app_secret));
    fake_->on_send([&replies](std::string_view text) { replies.take(text); });
    // The troupe started here inherits them (secrets.allowed_env names them).
    ::setenv(std::string(p_.secret_env).c_str(), std::string(p_.app_secret).c_str(), 1);
    ::setenv(std::string(p_.token_env).c_str(), std::string(p_.callback_token).c_str(), 1);
    ::setenv(std::string(p_.aes_key_env).c_str(), std::string(p_.aes_key).c_str(), 1);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"secrets.allowed_env",
             fmt::format(R"(["{}", "{}", "{}"])", p_.secret_env, p_.token_env, p_.aes_key_env)}};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view /*route*/) const override {
    // The platforms name their ids and secrets differently (docs/channels.md).
    const auto ids =
        p_.flavor == test::wechat_flavor::wecom
            ? fmt::format(R"("corp_id":"{}","agent_id":"{}","secret_env":"{}")", p_.app_id,
                          p_.agent_id, p_.secret_env)
            : fmt::format(R"("app_id":"{}","app_secret_env":"{}")", p_.app_id, p_.secret_env);
    return fmt::format(R"({{"name":{},"type":"{}","agent":{},{},"token_env":"{}",)"
                       R"("aes_key_env":"{}","api_base":{},"session_scope":"thread",)"
                       R"("queue_policy":"followup"}})",
                       json_text(name), p_.type, json_text(agent), ids, p_.token_env,
                       p_.aes_key_env, json_text(fake_->api_base()));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    // The thread is the sender: WeCom's member bench-user-<thread>, the account's OpenID
    // oBenchOpenId<thread>.
    test::wechat_sender sender(p_.flavor, route, std::string(p_.callback_token),
                               std::string(p_.aes_key), std::string(p_.app_id));
    test::wechat_sender::text_message m;
    m.msg_id = fmt::format("{}", p_.first_msg_id + i);
    m.from_user = p_.flavor == test::wechat_flavor::wecom
                      ? fmt::format("bench-user-{}", thread)
                      : fmt::format("oBenchOpenId{:08}", thread);
    m.text = text;
    m.agent_id = std::string(p_.agent_id);
    auto made = sender.request(m, {});
    // request() refuses only an EncodingAESKey that is not one, which start() checked; an
    // empty template would fail as a delivery error, counted in the report.
    return made ? as_template(*made) : request_template{};
  }
  std::string describe() const override {
    return std::string(p_.describe);
  }

private:
  const wechat_profile& p_;
  std::unique_ptr<test::fake_wechat> fake_;
};

} // namespace

std::unique_ptr<channel_driver> make_wecom_driver() {
  return std::make_unique<wechat_driver>(wecom_profile);
}

std::unique_ptr<channel_driver> make_wechat_mp_driver() {
  return std::make_unique<wechat_driver>(official_account_profile);
}

} // namespace troupe::bench::detail
