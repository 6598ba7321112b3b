#include <catch2/catch.hpp>

#include "troupe/runtime/settings.hpp"

using namespace troupe;

namespace {

expected<settings> load(std::string_view toml) {
  return apply_toml(settings{}, toml, "test.toml");
}

std::string error_of(std::string_view toml) {
  auto s = load(toml);
  REQUIRE_FALSE(s);
  return s.error().message;
}

} // namespace

TEST_CASE("[[channels]] entries read every key the issue names", "[runtime][settings][channels]") {
  auto s = load(R"(
[[channels]]
name = "support-tg"
type = "telegram"
agent = "assistant"
mode = "webhook"
token_env = "TROUPE_KEY_TG"
api_base = "http://127.0.0.1:9999"
callback_url = "https://bot.example.org/api/v1/webhooks/channels/support-tg"
session_scope = "thread_sender"
queue_policy = "collect"
stream_edits = true

[[channels]]
name = "team"
type = "slack"
agent = "assistant"
bot_token_env = "TROUPE_KEY_SLACK_BOT"
signing_secret_env = "TROUPE_KEY_SLACK_SIGNING"

[[channels]]
name = "hooks"
type = "webhook"
agent = "assistant"
token = "s3cret"
callback_url = "http://127.0.0.1:1/replies"
)");
  REQUIRE(s);
  REQUIRE(s->channels.size() == 3);
  const auto& tg = s->channels[0];
  CHECK(tg.name == "support-tg");
  CHECK(tg.type == channel_type::telegram);
  CHECK(tg.mode == "webhook");
  CHECK(tg.token_env == "TROUPE_KEY_TG");
  CHECK(tg.effective_api_base() == "http://127.0.0.1:9999");
  CHECK(tg.callback_url == "https://bot.example.org/api/v1/webhooks/channels/support-tg");
  CHECK(tg.scope == session_scope::thread_sender);
  CHECK(tg.queue == queue_policy::collect);
  CHECK(tg.stream_edits);
  const auto& slack = s->channels[1];
  CHECK(slack.type == channel_type::slack);
  CHECK(slack.effective_api_base() == "https://slack.com/api");
  CHECK(slack.scope == session_scope::thread);
  CHECK(slack.queue == queue_policy::followup);
  CHECK_FALSE(slack.stream_edits);
  const auto& hook = s->channels[2];
  CHECK(hook.type == channel_type::webhook);
  CHECK(hook.resolve_token({}, key_env_policy{}) == "s3cret");
  CHECK(hook.callback_url == "http://127.0.0.1:1/replies");
}

TEST_CASE("the printed config keeps channels but never their inline token",
          "[runtime][settings][channels]") {
  auto s = load(R"(
[[channels]]
name = "hooks"
type = "webhook"
agent = "assistant"
token = "never-print-me"
callback_url = "http://127.0.0.1:1/replies"
)");
  REQUIRE(s);
  const auto text = to_toml(*s);
  CHECK(text.find("never-print-me") == std::string::npos);
  CHECK(text.find("# token is set (not printed)") != std::string::npos);
  // Printed back, the channel loads again, without its token.
  auto again = load(text);
  REQUIRE(again);
  REQUIRE(again->channels.size() == 1);
  CHECK(again->channels.front().token.empty());
  CHECK(again->channels.front().callback_url == "http://127.0.0.1:1/replies");
  CHECK(to_toml(*again).find("# token is set") == std::string::npos);
}

TEST_CASE("channel names are unique", "[runtime][settings][channels]") {
  const auto message = error_of(R"(
[[channels]]
name = "a"
type = "telegram"
agent = "assistant"
token = "t"
[[channels]]
name = "a"
type = "telegram"
agent = "assistant"
token = "t"
)");
  CHECK_THAT(message, Catch::Contains("channel 'a' is declared twice"));
}

TEST_CASE("a channel's token variable obeys the provider keys' rule",
          "[runtime][settings][channels]") {
  const std::string entry = R"(
[[channels]]
name = "tg"
type = "telegram"
agent = "assistant"
token_env = "HOME"
)";
  CHECK_THAT(error_of(entry), Catch::Contains("token_env: 'HOME' is not allowed"));
  // Listed under [secrets] allowed_env (even after the channel), it is allowed.
  CHECK(load(entry + "[secrets]\nallowed_env = [\"HOME\"]\n"));
  CHECK_THAT(error_of(R"(
[[channels]]
name = "team"
type = "slack"
agent = "assistant"
bot_token_env = "TROUPE_KEY_BOT"
signing_secret_env = "PATH"
)"),
             Catch::Contains("signing_secret_env: 'PATH' is not allowed"));
}

TEST_CASE("a channel entry with a wrong value says which", "[runtime][settings][channels]") {
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"irc\"\nagent = \"a\"\n"),
             Catch::Contains("'irc' is not a channel type"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"telegram\"\nagent = \"a\"\n"
                      "token = \"t\"\nsession_scope = \"room\"\n"),
             Catch::Contains("'room' is not a session scope"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"telegram\"\nagent = \"a\"\n"
                      "token = \"t\"\nqueue_policy = \"later\"\n"),
             Catch::Contains("'later' is not a queue policy"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"telegram\"\nagent = \"a\"\n"
                      "token = \"t\"\nmode = \"push\"\n"),
             Catch::Contains("mode 'push' is not poll or webhook"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"slack\"\nagent = \"a\"\n"
                      "bot_token_env = \"TROUPE_KEY_B\"\nsigning_secret_env = \"TROUPE_KEY_S\"\n"
                      "mode = \"webhook\"\n"),
             Catch::Contains("mode is for telegram channels only"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"slack\"\nagent = \"a\"\n"
                      "bot_token_env = \"TROUPE_KEY_B\"\n"),
             Catch::Contains("needs bot_token_env and signing_secret_env"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"webhook\"\nagent = \"a\"\n"
                      "token = \"t\"\ncallback_url = \"ftp://x\"\n"),
             Catch::Contains("needs an http(s) callback_url"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"telegram\"\nagent = \"a\"\n"
                      "token = \"t\"\nmode = \"webhook\"\n"),
             Catch::Contains("with mode = \"webhook\" needs an http(s) callback_url"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"telegram\"\nagent = \"a\"\n"
                      "token = \"t\"\ncallback_url = \"https://x.org/\"\n"),
             Catch::Contains("callback_url is for webhook channels and telegram's webhook mode"));
  CHECK_THAT(error_of("[[channels]]\nname = \"has space\"\ntype = \"telegram\"\nagent = \"a\"\n"
                      "token = \"t\"\n"),
             Catch::Contains("name must be 1 to 64 letters"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"telegram\"\ntoken = \"t\"\n"),
             Catch::Contains("agent is required"));
  CHECK_THAT(error_of("[[channels]]\nname = \"x\"\ntype = \"telegram\"\nagent = \"a\"\n"
                      "token = \"t\"\nwebhook_secret = \"y\"\n"),
             Catch::Contains("unknown key 'webhook_secret'"));
}

TEST_CASE("thread keys follow the session scope and identities name channel and sender",
          "[runtime][channels]") {
  CHECK(channel_thread_key(session_scope::thread, "chat-1", "alice") == "chat-1");
  CHECK(channel_thread_key(session_scope::thread, "", "alice") == "alice");
  CHECK(channel_thread_key(session_scope::sender, "chat-1", "alice") == "alice");
  CHECK(channel_thread_key(session_scope::thread_sender, "chat-1", "alice") == "chat-1|alice");
  CHECK(channel_thread_key(session_scope::thread_sender, "", "") == "default");
  CHECK(channel_identity("support-tg", "42") == "channel:support-tg:42");
}

TEST_CASE("wecom, wechat_mp and whatsapp channels read their keys and print them back",
          "[runtime][settings][channels]") {
  auto s = load(R"(
[[channels]]
name = "corp"
type = "wecom"
agent = "assistant"
corp_id = "ww1234567890"
agent_id = "1000002"
secret_env = "TROUPE_KEY_WECOM_SECRET"
token_env = "TROUPE_KEY_WECOM_TOKEN"
aes_key_env = "TROUPE_KEY_WECOM_AES"

[[channels]]
name = "mp"
type = "wechat_mp"
agent = "assistant"
app_id = "wx5823bf96d3bd56c7"
app_secret_env = "TROUPE_KEY_WX_SECRET"
token_env = "TROUPE_KEY_WX_TOKEN"

[[channels]]
name = "wa"
type = "whatsapp"
agent = "assistant"
phone_number_id = "106540352242922"
access_token_env = "TROUPE_KEY_WA_TOKEN"
app_secret_env = "TROUPE_KEY_WA_SECRET"
verify_token_env = "TROUPE_KEY_WA_VERIFY"
)");
  REQUIRE(s);
  REQUIRE(s->channels.size() == 3);
  const auto& corp = s->channels[0];
  CHECK(corp.type == channel_type::wecom);
  CHECK(corp.platform.corp_id == "ww1234567890");
  CHECK(corp.platform.agent_id == "1000002");
  CHECK(corp.platform.secret_env == "TROUPE_KEY_WECOM_SECRET");
  CHECK(corp.token_env == "TROUPE_KEY_WECOM_TOKEN");
  CHECK(corp.platform.aes_key_env == "TROUPE_KEY_WECOM_AES");
  CHECK(corp.effective_api_base() == "https://qyapi.weixin.qq.com");
  CHECK(s->channels[1].type == channel_type::wechat_mp);
  CHECK(s->channels[1].platform.aes_key_env.empty());
  CHECK(s->channels[1].effective_api_base() == "https://api.weixin.qq.com");
  const auto& wa = s->channels[2];
  CHECK(wa.platform.phone_number_id == "106540352242922");
  CHECK(wa.platform.verify_token_env == "TROUPE_KEY_WA_VERIFY");
  CHECK(wa.effective_api_base() == "https://graph.facebook.com/v21.0");
  // The printed config reads back the same.
  auto again = load(to_toml(*s));
  REQUIRE(again);
  CHECK(again->channels[0].platform == corp.platform);
  CHECK(again->channels[2].platform == wa.platform);
  // The keys survive the database column's JSON.
  auto back = decode_platform_keys(encode_platform_keys(corp.platform));
  REQUIRE(back);
  CHECK(*back == corp.platform);
}

TEST_CASE("a wecom, wechat_mp or whatsapp channel missing a key is refused naming the channel and "
          "the keys",
          "[runtime][settings][channels]") {
  CHECK_THAT(error_of(R"(
[[channels]]
name = "corp"
type = "wecom"
agent = "a"
corp_id = "ww1"
token_env = "TROUPE_KEY_T"
)"),
             Catch::Contains("channel 'corp'") &&
                 Catch::Contains("agent_id, secret_env, aes_key_env"));
  CHECK_THAT(error_of(R"(
[[channels]]
name = "mp"
type = "wechat_mp"
agent = "a"
app_id = "wx1"
)"),
             Catch::Contains("channel 'mp'") && Catch::Contains("app_secret_env, token_env"));
  CHECK_THAT(error_of(R"(
[[channels]]
name = "wa"
type = "whatsapp"
agent = "a"
phone_number_id = "1"
access_token_env = "TROUPE_KEY_WA"
)"),
             Catch::Contains("channel 'wa'") &&
                 Catch::Contains("app_secret_env, verify_token_env"));
  // A *_env outside the provider-key rule is refused like token_env.
  CHECK_THAT(error_of(R"(
[[channels]]
name = "wa"
type = "whatsapp"
agent = "a"
phone_number_id = "1"
access_token_env = "HOME"
app_secret_env = "TROUPE_KEY_B"
verify_token_env = "TROUPE_KEY_C"
)"),
             Catch::Contains("access_token_env"));
}

TEST_CASE("feishu and dingtalk channels read their keys and name the missing ones",
          "[runtime][settings][channels]") {
  auto s = load(R"(
[[channels]]
name = "lark"
type = "feishu"
agent = "assistant"
app_id = "cli_a1"
app_secret_env = "TROUPE_KEY_FEISHU_SECRET"
verification_token_env = "TROUPE_KEY_FEISHU_VERIFY"
encrypt_key_env = "TROUPE_KEY_FEISHU_ENCRYPT"

[[channels]]
name = "ding"
type = "dingtalk"
agent = "assistant"
app_key = "dingk"
app_secret_env = "TROUPE_KEY_DINGTALK_SECRET"
robot_code = "dingrobot"
)");
  REQUIRE(s);
  REQUIRE(s->channels.size() == 2);
  const auto& lark = s->channels[0];
  CHECK(lark.type == channel_type::feishu);
  CHECK(lark.platform.app_id == "cli_a1");
  CHECK(lark.platform.verification_token_env == "TROUPE_KEY_FEISHU_VERIFY");
  CHECK(lark.platform.encrypt_key_env == "TROUPE_KEY_FEISHU_ENCRYPT");
  CHECK(lark.effective_api_base() == "https://open.feishu.cn/open-apis");
  const auto& ding = s->channels[1];
  CHECK(ding.type == channel_type::dingtalk);
  CHECK(ding.platform.app_key == "dingk");
  CHECK(ding.platform.robot_code == "dingrobot");
  CHECK(ding.effective_api_base() == "https://api.dingtalk.com");
  // The keys survive the database column's JSON.
  CHECK(decode_platform_keys(encode_platform_keys(lark.platform)).value() == lark.platform);
  CHECK(decode_platform_keys(encode_platform_keys(ding.platform)).value() == ding.platform);

  CHECK_THAT(error_of(R"(
[[channels]]
name = "lark"
type = "feishu"
agent = "assistant"
app_id = "cli_a1"
app_secret_env = "TROUPE_KEY_FEISHU_SECRET"
)"),
             Catch::Contains("a feishu channel needs verification_token_env"));
  CHECK_THAT(error_of(R"(
[[channels]]
name = "ding"
type = "dingtalk"
agent = "assistant"
app_secret_env = "TROUPE_KEY_DINGTALK_SECRET"
)"),
             Catch::Contains("a dingtalk channel needs app_key"));
  CHECK_THAT(error_of(R"(
[[channels]]
name = "ding"
type = "dingtalk"
agent = "assistant"
app_key = "dingk"
app_secret_env = "HOME"
)"),
             Catch::Contains("app_secret_env"));
}
