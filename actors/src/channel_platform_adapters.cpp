// The adapters of the platforms named by ids and several secrets (WeCom, WeChat Official
// Accounts, WhatsApp, Feishu, DingTalk; issue 22): their secrets read from the variables their keys
// name, a missing one named in the error (the channel answers 503, as for a provider's key).

#include <cstdlib>

#include <fmt/format.h>

#include "troupe/actors/channel_service.hpp"
#include "troupe/net/channel/dingtalk_adapter.hpp"
#include "troupe/net/channel/feishu_adapter.hpp"
#include "troupe/net/channel/wechat_mp_adapter.hpp"
#include "troupe/net/channel/wecom_adapter.hpp"
#include "troupe/net/channel/whatsapp_adapter.hpp"

namespace troupe::actors {

namespace {

/// The channel's api_base, else its platform's public one.
std::string platform_api_base(const storage::channel_record& r) {
  channel_settings s;
  s.type = parse_channel_type(r.kind).value_or(channel_type::webhook);
  s.api_base = r.api_base;
  return s.effective_api_base();
}

using adapter_ptr = std::shared_ptr<net::channel::channel_adapter>;

template <class Adapter> expected<adapter_ptr> as_adapter(std::shared_ptr<Adapter> made) {
  return adapter_ptr(std::move(made));
}

template <class Adapter> expected<adapter_ptr> as_adapter(expected<std::shared_ptr<Adapter>> made) {
  if (!made) {
    return tl::unexpected(made.error());
  }
  return adapter_ptr(std::move(*made));
}

} // namespace

expected<std::shared_ptr<net::channel::channel_adapter>>
channel_service::make_platform_adapter(const storage::channel_record& record,
                                       const std::string& callback_token) const {
  const auto& k = record.platform;
  // Each secret from its variable; a missing one is named (503 on the inbound route, as a
  // provider's missing key), never a start-up error.
  std::string missing;
  const auto secret = [&](const std::string& variable, std::string_view what) {
    channel_settings from;
    from.token_env = variable;
    auto value = from.resolve_token(options_.environment, options_.key_env);
    if (value.empty() && missing.empty()) {
      missing = fmt::format("channel '{}' has no {}: set {}", record.name, what,
                            variable.empty() ? std::string("its variable") : variable);
    }
    return value;
  };
  const auto need_token = [&] {
    if (callback_token.empty() && missing.empty()) {
      missing = fmt::format("channel '{}' has no callback token: set {} or token", record.name,
                            record.token_env.empty() ? "token_env" : record.token_env);
    }
  };
  // The adapter `make` builds, unless a secret or the callback token was missing.
  const auto unless_missing = [&missing](auto make) -> expected<adapter_ptr> {
    if (!missing.empty()) {
      return fail(errc::unavailable, missing);
    }
    return as_adapter(make());
  };
  switch (parse_channel_type(record.kind).value_or(channel_type::webhook)) {
    case channel_type::wecom: {
      net::channel::wecom_options o;
      o.channel = record.name;
      o.corp_id = k.corp_id;
      o.agent_id = k.agent_id;
      o.secret = secret(k.secret_env, "secret");
      o.encoding_aes_key = secret(k.aes_key_env, "EncodingAESKey");
      o.token = callback_token;
      need_token();
      o.api_base = platform_api_base(record);
      return unless_missing([&] { return net::channel::wecom_adapter::make(std::move(o)); });
    }
    case channel_type::wechat_mp: {
      net::channel::wechat_mp_options o;
      o.channel = record.name;
      o.app_id = k.app_id;
      o.app_secret = secret(k.app_secret_env, "app secret");
      if (!k.aes_key_env.empty()) {
        o.encoding_aes_key = secret(k.aes_key_env, "EncodingAESKey");
      }
      o.token = callback_token;
      need_token();
      o.api_base = platform_api_base(record);
      return unless_missing([&] { return net::channel::wechat_mp_adapter::make(std::move(o)); });
    }
    case channel_type::whatsapp: {
      net::channel::whatsapp_options o;
      o.channel = record.name;
      o.phone_number_id = k.phone_number_id;
      o.app_secret = secret(k.app_secret_env, "app secret");
      o.verify_token = secret(k.verify_token_env, "verify token");
      // The access token is read again when WhatsApp refuses it: the variable as the
      // process sees it now (a rotated token), else as it was at start.
      channel_settings from;
      from.token_env = k.access_token_env;
      const auto at_start = from.resolve_token(options_.environment, options_.key_env);
      const bool allowed =
          !k.access_token_env.empty() && options_.key_env.allows(k.access_token_env);
      o.token_source = [variable = k.access_token_env, at_start, allowed]() -> std::string {
        if (allowed) {
          if (const char* now = std::getenv(variable.c_str()); now != nullptr && *now != '\0') {
            return now;
          }
        }
        return at_start;
      };
      if (at_start.empty() && missing.empty()) {
        missing = fmt::format("channel '{}' has no access token: set {}", record.name,
                              k.access_token_env);
      }
      o.api_base = platform_api_base(record);
      return unless_missing(
          [&] { return std::make_shared<net::channel::whatsapp_adapter>(std::move(o)); });
    }
    case channel_type::feishu: {
      net::channel::feishu_options o;
      o.channel = record.name;
      o.api_base = platform_api_base(record);
      o.app_id = k.app_id;
      o.app_secret = secret(k.app_secret_env, "app secret");
      o.verification_token = secret(k.verification_token_env, "verification token");
      if (!k.encrypt_key_env.empty()) {
        o.encrypt_key = secret(k.encrypt_key_env, "encrypt key");
      }
      return unless_missing(
          [&] { return std::make_shared<net::channel::feishu_adapter>(std::move(o)); });
    }
    case channel_type::dingtalk: {
      net::channel::dingtalk_options o;
      o.channel = record.name;
      o.api_base = platform_api_base(record);
      o.app_key = k.app_key;
      o.robot_code = k.robot_code;
      o.app_secret = secret(k.app_secret_env, "app secret");
      return unless_missing(
          [&] { return std::make_shared<net::channel::dingtalk_adapter>(std::move(o)); });
    }
    default:
      break;
  }
  return fail(errc::internal, "not a platform adapter type");
}

} // namespace troupe::actors
