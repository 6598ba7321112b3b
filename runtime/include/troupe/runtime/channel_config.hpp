#pragma once

/// \file
/// Messaging channels as written in the config file (`[[channels]]`) or sent to
/// `POST /api/v1/channels`, each bound to an agent. These keys are a contract:
///
///     [[channels]]
///     name = "support-tg"              # unique; appears in routes and identities
///     type = "telegram"                # telegram | slack | webhook | wecom | wechat_mp |
///                                      # whatsapp | feishu | dingtalk
///     agent = "assistant"
///     mode = "poll"                    # telegram only: poll (getUpdates) | webhook
///     token_env = "TROUPE_KEY_TG"      # or token = "…"; Slack: bot_token_env +
///                                      # signing_secret_env
///     api_base = "https://api.telegram.org"  # Slack: "https://slack.com/api"
///     session_scope = "thread"         # thread | sender | thread_sender
///     queue_policy = "followup"        # as for agents
///     stream_edits = false             # post a first part early and edit it
///
///     [[channels]]                     # the generic JSON webhook
///     name = "hooks"
///     type = "webhook"
///     agent = "assistant"
///     token_env = "TROUPE_KEY_HOOK"    # X-Webhook-Token of inbound requests, and the
///                                      # HMAC-SHA256 key of X-Troupe-Signature outbound
///     callback_url = "https://example.org/troupe-replies"
///
///     [[channels]]                     # WeCom (企业微信) self-built app
///     type = "wecom"
///     corp_id = "ww…"  agent_id = "1000002"
///     secret_env = "…"  token_env = "…"  aes_key_env = "…"
///
///     [[channels]]                     # WeChat Official Account
///     type = "wechat_mp"
///     app_id = "wx…"  app_secret_env = "…"  token_env = "…"
///     aes_key_env = "…"                # optional: plain (unencrypted) mode without it
///
///     [[channels]]                     # WhatsApp Business Cloud API
///     type = "whatsapp"
///     phone_number_id = "…"  access_token_env = "…"  app_secret_env = "…"
///     verify_token_env = "…"
///     [[channels]]                     # Feishu / Lark (event subscription v2)
///     type = "feishu"
///     app_id = "cli_…"  app_secret_env = "…"  verification_token_env = "…"
///     encrypt_key_env = "…"            # optional: plain, unsigned bodies without it
///
///     [[channels]]                     # DingTalk robot (HTTP callback mode)
///     type = "dingtalk"
///     app_key = "ding…"  app_secret_env = "…"
///     robot_code = "ding…"             # optional: the app_key
///
/// Secrets (`token`, the values behind `*_env`) are write-only: never logged, printed or
/// returned by the API.

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe {

/// Which platform a channel speaks.
enum class channel_type { telegram, slack, webhook, wecom, wechat_mp, whatsapp, feishu, dingtalk };

std::string_view to_string(channel_type t) noexcept;
expected<channel_type> parse_channel_type(std::string_view name);

/// What one conversation of a channel gathers: one per platform thread, one per sender
/// (across threads), or one per sender within each thread.
enum class session_scope { thread, sender, thread_sender };

std::string_view to_string(session_scope s) noexcept;
expected<session_scope> parse_session_scope(std::string_view name);

/// The thread key of a message under `scope`: the platform thread, the sender, or both
/// (an empty thread falls back to the sender, an empty sender to "default").
std::string channel_thread_key(session_scope scope, std::string_view thread,
                               std::string_view sender);

/// The identity of a channel sender: `channel:<channel>:<sender>`. It owns the sender's
/// memory always, and the conversations and archives of the sender's threads under the
/// `sender` and `thread_sender` scopes.
std::string channel_identity(std::string_view channel, std::string_view sender);

/// The identity of a shared platform thread under the `thread` scope:
/// `channel-thread:<channel>:<thread key>`. It owns the thread's conversations and their
/// archives, which every sender of the thread shares (never any one sender's memory);
/// it can never be a sender's identity (those start `channel:`).
std::string channel_thread_identity(std::string_view channel, std::string_view thread_key);

/// Who owns the conversations (and archives) of thread `thread_key` under `scope`: the
/// thread's identity under `thread`, else the sender's.
std::string channel_owner_identity(session_scope scope, std::string_view channel,
                                   std::string_view thread_key, std::string_view sender);

/// The keys of the platforms that name their app by ids and hold several secrets
/// (WeCom, WeChat Official Accounts, WhatsApp, Feishu, DingTalk): ids as they are, secrets
/// by the variable holding them (`*_env`, under the provider-key rule). Empty: not set.
struct channel_platform_keys {
  /// WeCom: the corp id (the receive id of its encrypted messages).
  std::string corp_id;
  /// WeCom: the self-built app's AgentId (config key `agent_id`).
  std::string agent_id;
  /// WeCom: the app's Secret (for gettoken).
  std::string secret_env;
  /// WeCom and WeChat: the callback's EncodingAESKey (43 characters).
  std::string aes_key_env;
  /// WeChat Official Account: its AppID; Feishu: the app's App ID (cli_…).
  std::string app_id;
  /// WeChat: the AppSecret; WhatsApp: the Meta app secret (X-Hub-Signature-256); Feishu
  /// and DingTalk: the app's secret (token requests; DingTalk's callback signature).
  std::string app_secret_env;
  /// WhatsApp: the business phone number's id.
  std::string phone_number_id;
  /// WhatsApp: the (system user) access token.
  std::string access_token_env;
  /// WhatsApp: the verify token of the GET subscription check.
  std::string verify_token_env;
  /// Feishu: the event subscription's Verification Token.
  std::string verification_token_env;
  /// Feishu: the event subscription's Encrypt Key (optional).
  std::string encrypt_key_env;
  /// DingTalk: the app's AppKey (Client ID).
  std::string app_key;
  /// DingTalk: the robot's code for the send API (optional: the app_key).
  std::string robot_code;

  /// Every key's name and member, in a fixed order: the config, the API and the
  /// database read and write them through this table.
  static constexpr std::array<std::pair<std::string_view, std::string channel_platform_keys::*>, 13>
      fields{{{"corp_id", &channel_platform_keys::corp_id},
              {"agent_id", &channel_platform_keys::agent_id},
              {"secret_env", &channel_platform_keys::secret_env},
              {"aes_key_env", &channel_platform_keys::aes_key_env},
              {"app_id", &channel_platform_keys::app_id},
              {"app_secret_env", &channel_platform_keys::app_secret_env},
              {"phone_number_id", &channel_platform_keys::phone_number_id},
              {"access_token_env", &channel_platform_keys::access_token_env},
              {"verify_token_env", &channel_platform_keys::verify_token_env},
              {"verification_token_env", &channel_platform_keys::verification_token_env},
              {"encrypt_key_env", &channel_platform_keys::encrypt_key_env},
              {"app_key", &channel_platform_keys::app_key},
              {"robot_code", &channel_platform_keys::robot_code}}};

  friend bool operator==(const channel_platform_keys&, const channel_platform_keys&) = default;
};

/// The keys as a JSON object of the non-empty ones (the database column).
std::string encode_platform_keys(const channel_platform_keys& keys);
/// The inverse of `encode_platform_keys`; unknown members are ignored.
expected<channel_platform_keys> decode_platform_keys(std::string_view json);

/// One channel.
struct channel_settings {
  std::string name;
  channel_type type = channel_type::webhook;
  /// The agent's name (or uuid) answering on the channel.
  std::string agent;
  /// Telegram only: "poll" (getUpdates) or "webhook" (setWebhook).
  std::string mode = "poll";
  /// The variable holding the token (Telegram's bot token, the webhook's shared token).
  std::string token_env;
  /// The token itself (prefer token_env).
  std::string token;
  /// Slack: the variable holding the bot token (xoxb-…).
  std::string bot_token_env;
  /// Slack: the variable holding the signing secret.
  std::string signing_secret_env;
  /// The keys of WeCom, WeChat, WhatsApp, Feishu and DingTalk (`token_env` is WeCom's and
  /// WeChat's callback Token).
  channel_platform_keys platform;
  /// The platform's API base URL; empty: the type's public default.
  std::string api_base;
  session_scope scope = session_scope::thread;
  queue_policy queue = queue_policy::followup;
  /// The generic webhook: where replies are POSTed.
  std::string callback_url;
  /// Post a first part of the answer early and edit it as tokens arrive.
  bool stream_edits = false;
  /// Turned off over the API: inbound requests are refused (404), nothing is sent.
  bool enabled = true;

  /// `api_base`, else the type's public default (empty for the generic webhook).
  std::string effective_api_base() const;
  /// The value of `token`, else of the variable `token_env` names when `policy` allows it.
  std::string resolve_token(const std::map<std::string, std::string>& environment,
                            const key_env_policy& policy) const;
};

/// Checks one channel on its own: a name of letters, digits, '-' and '_' (1 to 64), an
/// agent, `mode` only for Telegram, what the type needs (Slack: bot_token_env and
/// signing_secret_env; webhook: an http(s) callback_url), and every `*_env` allowed by
/// `policy`. Errors start with the channel. A missing token is not checked here (as a
/// provider's key, it is looked for when the channel is used: 503 naming it).
expected<void> validate_channel(const channel_settings& channel, const key_env_policy& policy);

/// `validate_channel` for each, and unique names.
expected<void> validate_channels(const std::vector<channel_settings>& channels,
                                 const key_env_policy& policy);

} // namespace troupe
