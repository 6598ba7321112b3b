#pragma once

/// \file
/// The Telegram Bot API's wire format (issue 17; reference/channels.md): decoding
/// getUpdates answers and webhook updates into the text messages a channel handles,
/// encoding the bodies of the calls troupe makes (sendMessage, sendChatAction,
/// editMessageText, setWebhook, getUpdates), classifying every answer into what to do
/// next, and checking a webhook's secret token. Pure functions; no I/O (the channel
/// adapter does the HTTP). Untrusted input is parsed whole by simdjson's DOM parser:
/// malformed bytes are an error value, never undefined behaviour.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"

namespace troupe::net::telegram {

/// The forum topic Telegram calls "General": sendMessage must omit it (Telegram rejects
/// `message_thread_id: 1`), sendChatAction keeps it.
inline constexpr std::int64_t general_topic = 1;

/// One inbound text message (a `message` update with `text`), or a press of an inline
/// button troupe sent (a `callback_query` update with `data`: `text` is the button's
/// callback data, `message_id` the bot's message that carried the button).
struct inbound_message {
  std::int64_t update_id = 0;
  std::int64_t chat_id = 0;
  /// "private", "group", "supergroup" or "channel".
  std::string chat_type;
  /// The forum topic (`message_thread_id` of a topic message), if the chat has topics.
  std::optional<std::int64_t> topic;
  std::int64_t message_id = 0;
  std::int64_t from_id = 0;
  /// First and last name, or the username when there is no name.
  std::string from_name;
  std::string from_username;
  bool from_is_bot = false;
  std::string text;
  /// Unix seconds.
  std::int64_t date = 0;
  /// A button press: the callback query's id (answered with answerCallbackQuery); empty
  /// for a typed message.
  std::string callback_query_id{};

  friend bool operator==(const inbound_message&, const inbound_message&) = default;
};

/// What a getUpdates answer (or one webhook update) holds for a channel.
struct update_batch {
  /// The text messages to handle, in update order.
  std::vector<inbound_message> messages;
  /// The `offset` of the next getUpdates: the highest update_id seen (skipped ones too)
  /// plus one; 0 when the answer held no update.
  std::int64_t next_offset = 0;
  /// Updates seen and not handled: edited messages, messages without text, callback
  /// queries without data and other kinds.
  std::size_t skipped = 0;
};

/// Decodes a successful getUpdates answer `{"ok":true,"result":[Update…]}`. Fails
/// (parse_error) on bytes that are not that shape, an update without an integer
/// update_id included; an answer with `"ok":false` is for `classify_answer`.
expected<update_batch> decode_get_updates(std::string_view body);

/// Decodes the one Update a webhook POST carries (at most one message in the batch).
expected<update_batch> decode_webhook_update(std::string_view body);

/// The thread key of a message: "<chat_id>" or "<chat_id>:<topic>" in a forum topic.
std::string thread_key(std::int64_t chat_id, std::optional<std::int64_t> topic);
inline std::string thread_key(const inbound_message& m) {
  return thread_key(m.chat_id, m.topic);
}

/// "<chat_id>:<message_id>": one user message, whatever update carries it (Telegram's
/// update ids start again at random after a week without updates, so the update_id alone
/// does not identify a redelivered message); "callback:<id>" for a button press (many
/// presses share the message that carried the buttons).
std::string message_key(const inbound_message& m);

/// `{api_base}/bot{token}/{method}`; a trailing slash of `api_base` is not doubled.
std::string method_url(std::string_view api_base, std::string_view token, std::string_view method);

/// A button under a message (`inline_keyboard`); pressing it sends `callback_data` (at most
/// 64 bytes) back as a callback query.
struct inline_button {
  std::string text;
  std::string callback_data;
};

/// A sendMessage call.
struct send_message {
  std::int64_t chat_id = 0;
  std::optional<std::int64_t> topic;
  std::string text;
  /// `parse_mode: "HTML"`; false sends plain text (the retry after "can't parse entities").
  bool html = true;
  /// Answer to this message (`reply_parameters.message_id`, allowed to be gone).
  std::optional<std::int64_t> reply_to;
  bool disable_link_preview = false;
  /// One row of inline buttons (`reply_markup.inline_keyboard`); none: no markup.
  std::vector<inline_button> buttons{};
};

std::string encode_send_message(const send_message& m);
/// answerCallbackQuery: stops the pressed button's spinner, with `text` as a short notice
/// when not empty.
std::string encode_answer_callback_query(std::string_view callback_query_id,
                                         std::string_view text = {});
/// The updates a channel asks for: typed messages and button presses.
const std::vector<std::string>& channel_updates();
/// sendChatAction (`action` "typing" by default); the General topic is kept.
std::string encode_send_chat_action(std::int64_t chat_id, std::optional<std::int64_t> topic,
                                    std::string_view action = "typing");
/// editMessageText of a message troupe sent.
std::string encode_edit_message_text(std::int64_t chat_id, std::int64_t message_id,
                                     std::string_view text, bool html = true);

/// A setWebhook call.
struct webhook_settings {
  std::string url;
  /// Echoed by Telegram in X-Telegram-Bot-Api-Secret-Token (see valid_secret_token).
  std::string secret_token;
  /// 1 to 100 (Telegram's default 40); 0 leaves it out.
  unsigned max_connections = 0;
  std::vector<std::string> allowed_updates{"message", "callback_query"};
  bool drop_pending_updates = false;
};

std::string encode_set_webhook(const webhook_settings& s);

/// A getUpdates call: long polling for `timeout` seconds from `offset`.
std::string encode_get_updates(std::int64_t offset, std::chrono::seconds timeout,
                               unsigned limit = 100,
                               const std::vector<std::string>& allowed_updates = channel_updates());

/// What an answer of the Bot API means for the call that got it.
enum class answer_kind {
  /// `ok: true`.
  ok,
  /// 429: retry after `retry_after`.
  rate_limited,
  /// 400 "can't parse entities": the HTML was refused; send again as plain text.
  parse_entities,
  /// 400 "message is not modified": an edit with the same text; nothing to do.
  not_modified,
  /// 400 with `migrate_to_chat_id`: the group became a supergroup; send there.
  migrated,
  /// 409: another getUpdates is running, or a webhook is set (getUpdates is refused).
  conflict,
  /// 401, or 404 (Telegram's answer to a malformed token): the token is wrong. Not
  /// retried.
  unauthorized,
  /// 5xx: Telegram's side failed; retry with back-off.
  server_error,
  /// Any other refusal (403 bot blocked, 400 chat not found, …). Not retried.
  permanent,
  /// Bytes that are not the Bot API's shape. Retry with back-off.
  malformed,
};

std::string_view to_string(answer_kind k) noexcept;

/// A classified answer.
struct answer {
  answer_kind kind = answer_kind::malformed;
  /// `error_code` (the HTTP status when the body has none).
  unsigned error_code = 0;
  /// `description`, or why the body could not be read.
  std::string description;
  /// `parameters.retry_after` of a 429.
  std::optional<std::chrono::seconds> retry_after;
  /// `parameters.migrate_to_chat_id`.
  std::optional<std::int64_t> migrate_to_chat_id;
  /// `result.message_id` of a sendMessage or editMessageText answer.
  std::optional<std::int64_t> message_id;
  /// `result.username` of a getMe answer (the bot's @-name, without the @).
  std::string username;

  bool ok() const noexcept {
    return kind == answer_kind::ok;
  }
  /// True when the same call may succeed later (rate limit, server error, malformed).
  bool retryable() const noexcept {
    return kind == answer_kind::rate_limited || kind == answer_kind::server_error ||
           kind == answer_kind::malformed;
  }
};

/// Classifies the answer of any Bot API call from its HTTP status and body.
answer classify_answer(unsigned http_status, std::string_view body);

/// The HTTP header Telegram sends the webhook's secret token in.
inline constexpr std::string_view secret_token_header = "X-Telegram-Bot-Api-Secret-Token";

/// True when `token` is a secret setWebhook accepts: 1 to 256 of A-Z a-z 0-9 _ -.
bool valid_secret_token(std::string_view token) noexcept;

/// True when a webhook POST's secret header equals the channel's secret, compared in
/// constant time. An empty secret accepts nothing.
bool verify_secret_token(std::string_view header_value, std::string_view secret) noexcept;

} // namespace troupe::net::telegram
