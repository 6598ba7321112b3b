#pragma once

/// \file
/// The Telegram channel (Bot API; the wire format is telegram_wire.hpp). Inbound, in one
/// of two modes:
///  - `poll`: a getUpdates long-polling loop (one per channel) hands each batch to the
///    channel core, and only once the batch is journaled does the next call confirm it
///    (`offset` = the last update_id + 1); an answer that comes at once with nothing, or
///    an error, is followed by a doubling back-off; every call has a deadline, and the
///    loop ends at once at `stop` (its call in flight is cancelled).
///  - `webhook`: `setWebhook` at start with the channel's `callback_url` and a secret
///    token derived from the bot token (`telegram_webhook_secret`), which Telegram echoes
///    in `X-Telegram-Bot-Api-Secret-Token`: verified in constant time.
/// Only text `message` updates from people are answered: edits, other update kinds and
/// messages from bots are skipped. A message's journal key is "<chat_id>:<message_id>"
/// (it still holds after Telegram's update ids start again), its second key
/// "update:<update_id>" (the delivery); its thread is the chat, or the chat and the forum
/// topic.
///
/// Outbound, each part is a `sendMessage` with `parse_mode: "HTML"`
/// (markdown_to_telegram_html of the part); a 400 "can't parse entities" is sent again at
/// once as the plain text; 429 is retried after `parameters.retry_after`; a group that
/// became a supergroup is answered at its new id. Parts are at most 4,000 characters
/// (split_message). While a run is active the thread shows `typing` (sendChatAction).
/// `edit` changes a message the bot sent with `editMessageText` (the same HTML rule;
/// "message is not modified" counts as done): a channel with `stream_edits` posts a run's
/// first part early and edits it as tokens arrive (actors/src/channel_preview.cpp).
/// At start, `getMe` names the bot (its username), so `/cmd@other_bot` is not ours.

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "troupe/net/channel/adapter.hpp"
#include "troupe/net/channel/telegram_wire.hpp"

namespace troupe::net::channel {

struct telegram_options {
  /// The channel's name (logs, and the webhook secret).
  std::string channel;
  std::string token;
  /// "https://api.telegram.org" or a fake's base.
  std::string api_base;
  /// "poll" or "webhook".
  std::string mode = "poll";
  /// Webhook mode: the public URL of the channel's inbound route, given to setWebhook.
  std::string webhook_url;
  /// The long poll's `timeout`; each call's deadline is this plus `call_grace`.
  std::chrono::seconds poll_timeout{25};
  std::chrono::milliseconds call_grace{10'000};
  /// The back-off after an empty answer that came at once, or an error: first, doubling.
  std::chrono::milliseconds first_backoff{1'000};
  std::chrono::milliseconds max_backoff{30'000};
};

/// The secret_token troupe gives setWebhook for `channel`: the hex HMAC-SHA256 of the
/// channel's name under the bot token (stable across restarts, never stored, and of the
/// characters Telegram allows).
std::string telegram_webhook_secret(std::string_view token, std::string_view channel);

/// The messages of a decoded batch that a channel answers: text messages not from a bot.
std::vector<inbound_message> telegram_inbound(const telegram::update_batch& batch);

/// "<chat_id>" or "<chat_id>:<topic>" back into its parts (what `reply_to` holds).
struct telegram_chat {
  std::int64_t chat_id = 0;
  std::optional<std::int64_t> topic;
};
std::optional<telegram_chat> parse_telegram_reply_to(std::string_view reply_to);

class telegram_adapter final : public channel_adapter,
                               public std::enable_shared_from_this<telegram_adapter> {
public:
  explicit telegram_adapter(telegram_options options);
  ~telegram_adapter() override;

  expected<void> verify(const http_request& request) const override;
  expected<decoded_request> decode(const http_request& request) const override;
  boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                           std::chrono::milliseconds deadline) override;
  std::vector<std::string> split(std::string_view text) const override;
  bool supports_edits() const override {
    return true;
  }
  boost::asio::awaitable<send_result> edit(http_client& http, outbound_part part,
                                           std::string platform_message_id,
                                           std::chrono::milliseconds deadline) override;
  std::string bot_name() const override;
  std::chrono::milliseconds typing_interval() const override {
    return std::chrono::seconds(4);
  }
  boost::asio::awaitable<void> typing(http_client& http, std::string reply_to,
                                      std::chrono::milliseconds deadline) override;
  void start(http_client& http, inbound_sink sink) override;
  void stop(bool wait) override;

  const telegram_options& options() const noexcept {
    return options_;
  }

private:
  /// One Bot API call; its answer classified (a transport error is `malformed` with the
  /// error's message, and `transport` set).
  struct call_result {
    telegram::answer answer;
    bool transport = false;
    std::string body;
  };
  boost::asio::awaitable<call_result> call(http_client& http, std::string_view method,
                                           std::string body,
                                           std::chrono::milliseconds deadline) const;
  boost::asio::awaitable<void> poll(http_client& http, inbound_sink sink);
  boost::asio::awaitable<void> register_webhook(http_client& http);
  /// What `start` runs: getMe, then the poll loop or the webhook's registration.
  boost::asio::awaitable<void> run(http_client& http, inbound_sink sink);
  /// Asks getMe for the bot's username (once, at start; a failure leaves it unknown).
  boost::asio::awaitable<void> learn_name(http_client& http);

  telegram_options options_;
  std::string secret_;
  background_task task_;
  mutable std::mutex name_mutex_;
  std::string bot_name_;
};

} // namespace troupe::net::channel
