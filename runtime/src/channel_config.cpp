#include "troupe/runtime/channel_config.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe {

namespace {

constexpr std::size_t max_channel_name = 64;

bool valid_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

} // namespace

std::string_view to_string(channel_type t) noexcept {
  switch (t) {
    case channel_type::telegram:
      return "telegram";
    case channel_type::slack:
      return "slack";
    case channel_type::webhook:
      return "webhook";
    case channel_type::wecom:
      return "wecom";
    case channel_type::wechat_mp:
      return "wechat_mp";
    case channel_type::whatsapp:
      return "whatsapp";
    case channel_type::feishu:
      return "feishu";
    case channel_type::dingtalk:
      return "dingtalk";
  }
  return "webhook";
}

expected<channel_type> parse_channel_type(std::string_view name) {
  for (auto t : {channel_type::telegram, channel_type::slack, channel_type::webhook,
                 channel_type::wecom, channel_type::wechat_mp, channel_type::whatsapp,
                 channel_type::feishu, channel_type::dingtalk}) {
    if (to_string(t) == name) {
      return t;
    }
  }
  return fail(errc::invalid_argument,
              fmt::format("'{}' is not a channel type (telegram, slack, webhook, wecom, "
                          "wechat_mp, whatsapp, feishu, dingtalk)",
                          name));
}

std::string_view to_string(session_scope s) noexcept {
  switch (s) {
    case session_scope::thread:
      return "thread";
    case session_scope::sender:
      return "sender";
    case session_scope::thread_sender:
      return "thread_sender";
  }
  return "thread";
}

expected<session_scope> parse_session_scope(std::string_view name) {
  for (auto s : {session_scope::thread, session_scope::sender, session_scope::thread_sender}) {
    if (to_string(s) == name) {
      return s;
    }
  }
  return fail(errc::invalid_argument,
              fmt::format("'{}' is not a session scope (thread, sender, thread_sender)", name));
}

std::string channel_thread_key(session_scope scope, std::string_view thread,
                               std::string_view sender) {
  const std::string who = sender.empty() ? "default" : std::string(sender);
  switch (scope) {
    case session_scope::thread:
      return thread.empty() ? who : std::string(thread);
    case session_scope::sender:
      return who;
    case session_scope::thread_sender:
      return thread.empty() ? who : fmt::format("{}|{}", thread, who);
  }
  return who;
}

std::string channel_identity(std::string_view channel, std::string_view sender) {
  return fmt::format("channel:{}:{}", channel, sender.empty() ? "default" : sender);
}

std::string channel_thread_identity(std::string_view channel, std::string_view thread_key) {
  return fmt::format("channel-thread:{}:{}", channel, thread_key);
}

std::string channel_owner_identity(session_scope scope, std::string_view channel,
                                   std::string_view thread_key, std::string_view sender) {
  return scope == session_scope::thread ? channel_thread_identity(channel, thread_key)
                                        : channel_identity(channel, sender);
}

std::string channel_settings::effective_api_base() const {
  if (!api_base.empty()) {
    return api_base;
  }
  switch (type) {
    case channel_type::telegram:
      return "https://api.telegram.org";
    case channel_type::slack:
      return "https://slack.com/api";
    case channel_type::webhook:
      return {};
    case channel_type::wecom:
      return "https://qyapi.weixin.qq.com";
    case channel_type::wechat_mp:
      return "https://api.weixin.qq.com";
    case channel_type::whatsapp:
      return "https://graph.facebook.com/v21.0";
    case channel_type::feishu:
      return "https://open.feishu.cn/open-apis";
    case channel_type::dingtalk:
      return "https://api.dingtalk.com";
  }
  return {};
}

std::string channel_settings::resolve_token(const std::map<std::string, std::string>& environment,
                                            const key_env_policy& policy) const {
  if (!token.empty()) {
    return token;
  }
  if (!token_env.empty() && policy.allows(token_env)) {
    if (const auto it = environment.find(token_env); it != environment.end()) {
      return it->second;
    }
  }
  return {};
}

expected<void> validate_channel(const channel_settings& ch, const key_env_policy& policy) {
  const auto bad = [&](std::string_view why) {
    return fail(errc::invalid_argument, fmt::format("channel '{}': {}", ch.name, why));
  };
  if (ch.name.empty() || ch.name.size() > max_channel_name ||
      !std::all_of(ch.name.begin(), ch.name.end(), valid_name_char)) {
    return bad("name must be 1 to 64 letters, digits, '-' or '_'");
  }
  if (ch.agent.empty()) {
    return bad("agent is required");
  }
  if (ch.type == channel_type::telegram) {
    if (ch.mode != "poll" && ch.mode != "webhook") {
      return bad(fmt::format("mode '{}' is not poll or webhook", ch.mode));
    }
  } else if (ch.mode != "poll") {
    // "poll" is the default; any other value names a Telegram-only choice.
    return bad("mode is for telegram channels only");
  }
  for (const auto& [field, name] :
       {std::pair<std::string_view, const std::string&>{"token_env", ch.token_env},
        {"bot_token_env", ch.bot_token_env},
        {"signing_secret_env", ch.signing_secret_env}}) {
    if (auto ok = policy.check(fmt::format("channel '{}': {}", ch.name, field), name); !ok) {
      return ok;
    }
  }
  for (const auto& [field, member] : channel_platform_keys::fields) {
    if (field.ends_with("_env")) {
      if (auto ok =
              policy.check(fmt::format("channel '{}': {}", ch.name, field), ch.platform.*member);
          !ok) {
        return ok;
      }
    }
  }
  // What each platform with several keys needs, named when missing.
  const auto need = [&](std::initializer_list<std::pair<std::string_view, const std::string*>> keys)
      -> expected<void> {
    std::string missing;
    for (const auto& [key, value] : keys) {
      if (value->empty()) {
        missing += missing.empty() ? "" : ", ";
        missing += key;
      }
    }
    if (!missing.empty()) {
      return bad(fmt::format("a {} channel needs {}", to_string(ch.type), missing));
    }
    return {};
  };
  const auto& k = ch.platform;
  switch (ch.type) {
    case channel_type::telegram:
      // A token (inline or its variable's value) is looked for when the channel starts:
      // like a provider's key, its absence is not a config error.
      break;
    case channel_type::slack:
      if (ch.bot_token_env.empty() || ch.signing_secret_env.empty()) {
        return bad("a slack channel needs bot_token_env and signing_secret_env");
      }
      break;
    case channel_type::webhook:
      if (!ch.callback_url.starts_with("http://") && !ch.callback_url.starts_with("https://")) {
        return bad("a webhook channel needs an http(s) callback_url");
      }
      break;
    case channel_type::wecom:
      if (auto ok = need({{"corp_id", &k.corp_id},
                          {"agent_id", &k.agent_id},
                          {"secret_env", &k.secret_env},
                          {"token_env", &ch.token_env},
                          {"aes_key_env", &k.aes_key_env}});
          !ok) {
        return ok;
      }
      break;
    case channel_type::wechat_mp:
      if (auto ok = need({{"app_id", &k.app_id},
                          {"app_secret_env", &k.app_secret_env},
                          {"token_env", &ch.token_env}});
          !ok) {
        return ok;
      }
      break;
    case channel_type::feishu:
      if (auto ok = need({{"app_id", &k.app_id},
                          {"app_secret_env", &k.app_secret_env},
                          {"verification_token_env", &k.verification_token_env}});
          !ok) {
        return ok;
      }
      break;
    case channel_type::whatsapp:
      if (auto ok = need({{"phone_number_id", &k.phone_number_id},
                          {"access_token_env", &k.access_token_env},
                          {"app_secret_env", &k.app_secret_env},
                          {"verify_token_env", &k.verify_token_env}});
          !ok) {
        return ok;
      }
      break;
    case channel_type::dingtalk:
      if (auto ok = need({{"app_key", &k.app_key}, {"app_secret_env", &k.app_secret_env}}); !ok) {
        return ok;
      }
      break;
  }
  // Telegram's webhook mode gives setWebhook the public URL of the channel's inbound route.
  const bool telegram_webhook = ch.type == channel_type::telegram && ch.mode == "webhook";
  if (telegram_webhook && !ch.callback_url.starts_with("http://") &&
      !ch.callback_url.starts_with("https://")) {
    return bad("a telegram channel with mode = \"webhook\" needs an http(s) callback_url (the "
               "public URL of its inbound route, given to setWebhook)");
  }
  if (!ch.callback_url.empty() && ch.type != channel_type::webhook && !telegram_webhook) {
    return bad("callback_url is for webhook channels and telegram's webhook mode only");
  }
  if (!ch.api_base.empty() && !ch.api_base.starts_with("http://") &&
      !ch.api_base.starts_with("https://")) {
    return bad("api_base must be an http(s) URL");
  }
  return {};
}

std::string encode_platform_keys(const channel_platform_keys& keys) {
  json_writer w;
  w.begin_object();
  for (const auto& [field, member] : channel_platform_keys::fields) {
    if (!(keys.*member).empty()) {
      w.key(field).value(keys.*member);
    }
  }
  w.end_object();
  return std::move(w).str();
}

expected<channel_platform_keys> decode_platform_keys(std::string_view json) {
  channel_platform_keys keys;
  if (json.empty()) {
    return keys;
  }
  auto parsed = json_object::parse(json);
  if (!parsed) {
    return tl::unexpected(parsed.error());
  }
  for (const auto& [field, member] : channel_platform_keys::fields) {
    auto value = parsed->text(field);
    if (!value) {
      return tl::unexpected(value.error());
    }
    if (*value) {
      keys.*member = std::move(**value);
    }
  }
  return keys;
}

expected<void> validate_channels(const std::vector<channel_settings>& channels,
                                 const key_env_policy& policy) {
  std::set<std::string> names;
  for (const auto& ch : channels) {
    if (auto ok = validate_channel(ch, policy); !ok) {
      return ok;
    }
    if (!names.insert(ch.name).second) {
      return fail(errc::invalid_argument,
                  fmt::format("channel '{}' is declared twice (names are unique)", ch.name));
    }
  }
  return {};
}

} // namespace troupe
