#pragma once

// A fake of the Telegram Bot API for tests and the bench: `POST /bot<token>/<method>` on 127.0.0.1
// with Telegram's exact answers — getUpdates (long polling that waits for updates until its
// timeout, offset confirmation, 409 while a webhook is set or when a newer poll takes
// over), sendMessage (HTML parse_mode checked the way Telegram refuses it: 400 "can't
// parse entities"; empty and over-long texts refused), editMessageText (400 "message is
// not modified"), deleteMessage, sendChatAction, answerCallbackQuery, inline buttons
// (callback_data over 64 bytes refused: BUTTON_DATA_INVALID) and their presses, setWebhook,
// deleteWebhook, getMe, set/delete/getMyCommands (checked as Telegram checks them); chat_id as an
// integer or a numeric string, as Telegram takes it; 401 for a wrong token, 404 for an unknown
// method. Failures on demand per method: 429 with retry_after, 500, 400 can't parse entities, 403
// blocked. Every call is recorded. With a webhook set, `deliver_webhook` POSTs an update to it with
// the secret header, as Telegram does.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/fake_platform.hpp"

namespace troupe::test {

/// A failure the fake answers a call with instead of doing it.
struct telegram_fault {
  enum class kind {
    /// 429 "Too Many Requests: retry after N" with parameters.retry_after.
    rate_limited,
    /// 500 "Internal Server Error".
    server_error,
    /// 400 "Bad Request: can't parse entities: …" (whatever the text).
    parse_entities,
    /// 403 "Forbidden: bot was blocked by the user".
    blocked,
  };
  kind what = kind::server_error;
  /// Seconds, for rate_limited.
  unsigned retry_after = 1;
};

/// A message the bot sent (sendMessage that succeeded), with its edits applied.
struct telegram_sent {
  std::int64_t chat_id = 0;
  std::optional<std::int64_t> topic;
  std::int64_t message_id = 0;
  std::string text;
  /// "HTML" or "" (plain text).
  std::string parse_mode;
  unsigned edits = 0;
  /// deleteMessage removed it.
  bool deleted = false;
  /// Its inline buttons (`reply_markup.inline_keyboard`) as (text, callback_data).
  std::vector<std::pair<std::string, std::string>> buttons{};
};

/// An inbound text message to queue as an update.
struct telegram_incoming {
  std::int64_t chat_id = 1001;
  std::string text;
  std::int64_t from_id = 1001;
  std::string from_first_name = "Test";
  bool from_is_bot = false;
  /// A forum topic (message_thread_id with is_topic_message).
  std::optional<std::int64_t> topic;
  /// "private" for a positive chat id, "supergroup" for a negative one, unless given.
  std::string chat_type;
};

class fake_telegram {
public:
  explicit fake_telegram(std::string token = "123456:TEST-fake-token");
  ~fake_telegram();
  fake_telegram(const fake_telegram&) = delete;
  fake_telegram& operator=(const fake_telegram&) = delete;

  /// The base URL to configure as the channel's api_base ("http://127.0.0.1:<port>").
  std::string api_base() const;
  const std::string& token() const noexcept;
  std::uint16_t port() const noexcept;

  /// Queues a text message; returns its update_id. A waiting getUpdates answers at once.
  std::int64_t push_message(const telegram_incoming& message);
  /// Queues a press of the inline button with `callback_data` under message `sent` by user
  /// `from_id` (a `callback_query` update, as Telegram sends it); returns its update_id.
  std::int64_t press_button(const telegram_sent& sent, std::string_view callback_data,
                            std::int64_t from_id);
  /// Queues an update given as its JSON fields without update_id (e.g.
  /// `"edited_message":{…}`); returns the update_id it got.
  std::int64_t push_update(std::string fields_json);
  /// Queues the message of update `update_id` again under a new update_id (as after
  /// Telegram's update_id reset: the same chat and message_id); returns the new id. An
  /// update is redelivered with its own id anyway, to every getUpdates, until an offset
  /// confirms it.
  std::int64_t repeat_update(std::int64_t update_id);
  /// The body of update `update_id` as Telegram sends it.
  std::string update_json(std::int64_t update_id) const;

  /// Called with the text of every message sendMessage accepts, as sent (HTML and all; not
  /// editMessageText's edits: a channel without `stream_edits` sends each reply once, in
  /// its final text), on the fake's io thread, outside its lock (the bench's reply
  /// tracker); set before traffic starts.
  void on_send(std::function<void(std::string_view text)> hook);
  /// The same moment, with the whole message (its chat, for a bench that tells its
  /// simulated users apart by chat).
  void on_sent(std::function<void(const telegram_sent& message)> hook);

  /// The next `times` calls of `method` get `fault`.
  void fail(std::string method, telegram_fault fault, std::size_t times = 1);
  void fail_always(std::string method, telegram_fault fault);
  void clear_faults();

  /// Every call answered, in order; the calls of one method.
  std::vector<recorded_call> calls() const;
  std::vector<recorded_call> calls(std::string_view method) const;
  bool wait_for_calls(std::string_view method, std::size_t n,
                      std::chrono::milliseconds deadline) const;
  /// Messages sent, in order (edits applied); of one chat.
  std::vector<telegram_sent> sent() const;
  std::vector<telegram_sent> sent_to(std::int64_t chat_id) const;
  bool wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const;

  /// getUpdates calls waiting for updates now (asks the io thread: call from a test thread).
  std::size_t waiting_polls() const;
  /// Updates confirmed by an offset so far (the highest update_id below the last offset).
  std::int64_t confirmed_through() const;
  /// The webhook set by setWebhook ("" when none) and its secret token.
  std::string webhook_url() const;
  std::string webhook_secret() const;

  /// POSTs update `update_id` to the webhook, with X-Telegram-Bot-Api-Secret-Token, and
  /// returns the answer (as Telegram, the caller repeats on a non-2xx).
  expected<net::http_client_response>
  deliver_webhook(std::int64_t update_id,
                  std::chrono::milliseconds deadline = std::chrono::seconds(10)) const;
  /// The request `deliver_webhook` would make (the bench sends it through its own client);
  /// an error when no webhook is set.
  expected<net::http_client_request>
  webhook_request(std::int64_t update_id,
                  std::chrono::milliseconds deadline = std::chrono::seconds(10)) const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

/// Why Telegram would refuse `text` with parse_mode HTML ("Unsupported start tag \"x\"
/// at byte offset 3"), or nullopt when it parses. Tags Telegram supports: b strong i em u
/// ins s strike del span tg-spoiler a tg-emoji code pre blockquote; entities &lt; &gt;
/// &amp; &quot; and numeric ones.
std::optional<std::string> telegram_html_problem(std::string_view text);

/// The text Telegram shows for `text` with parse_mode HTML (tags dropped, entities
/// decoded): what its 4,096-character limit counts.
std::string telegram_visible_text(std::string_view text);

} // namespace troupe::test
