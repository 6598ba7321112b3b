#pragma once

/// \file
/// The seam between troupe's channel core and one messaging platform. An adapter knows
/// its platform's wire format and nothing else: it verifies that an inbound request
/// came from the platform, decodes it into messages, and sends one outbound part with a
/// deadline, saying whether it was sent, should be retried (and when), or failed for
/// good. Journaling, dedupe, threads, conversations, the outbox and its retries belong
/// to the core (actors/channel_*), so every platform gets them the same way.
///
/// Threading: `verify`, `decode` and `split` are pure and may run anywhere (an adapter
/// that learns something at `start`, as Slack's bot user id, guards it); `send` and
/// `typing` are coroutines on the executor of the `http_client` they are given; `start`
/// runs its work there too, and `stop` may be called from any thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/net/http_message.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::net::channel {

/// One platform message decoded from an inbound request.
struct inbound_message {
  /// The platform's id of the message, unique per channel (Telegram's chat and
  /// message_id, Slack's channel and ts, the generic webhook's message_id): the journal's
  /// dedupe key.
  std::string message_id;
  /// The platform's id of the delivery that carried it, when it has one (Telegram's
  /// `update:<update_id>`, Slack's `event:<event_id>`): a second dedupe key.
  std::string delivery_id;
  /// The platform thread (Telegram chat + topic, Slack channel + thread_ts, the generic
  /// webhook's `thread`); empty when the platform has none.
  std::string thread;
  /// Who wrote it, as the platform names them.
  std::string sender;
  std::string text;
  /// Where a reply goes, in the adapter's own encoding (handed back in `outbound_part`).
  std::string reply_to;
};

/// What an inbound request carried, and what to answer the platform at once.
struct decoded_request {
  std::vector<inbound_message> messages;
  /// The answer's body (Slack's url_verification challenge); empty: `{"ok":true}`.
  std::string response_body;
  std::string response_content_type = "application/json";
  /// Answer with an empty body instead (Slack shows a slash command's answer body).
  bool empty_response = false;
};

/// The answer to a platform's GET on a channel's route: its URL check (WeChat's and
/// WeCom's `echostr`, WhatsApp's `hub.challenge`). Never journaled.
struct handshake_answer {
  unsigned status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

/// An answer the reader can give with one tap, where the platform offers buttons
/// (Telegram's inline keyboard): a press comes back as a message of the reader with `reply`
/// as its text. Platforms without buttons ignore it: the text says how to answer.
struct reply_choice {
  std::string label;
  std::string reply;
};

/// One part of a reply, as the outbox hands it to the adapter.
struct outbound_part {
  /// The `reply_to` of the message that started the thread.
  std::string reply_to;
  /// The channel's thread key and the run and part (a stable idempotency key: the
  /// platform, where it can, uses it to drop a second copy).
  std::string thread_key;
  std::string run_id;
  std::int64_t part = 0;
  std::string text;
  /// Buttons under the part, where the platform has them (an approval's /approve ID and
  /// /deny ID).
  std::vector<reply_choice> choices{};
};

/// How a send ended.
enum class send_outcome {
  /// The platform has the message.
  sent,
  /// Not sent; try again after `retry_after` (429, 5xx, a network error before sending).
  retry,
  /// Not sent, and sending it again will not help (4xx other than 429).
  failed,
};

struct send_result {
  send_outcome outcome = send_outcome::failed;
  /// With `retry`: the least wait the platform asked for (Retry-After / retry_after), or
  /// zero when it asked for none (the outbox then backs off on its own).
  std::chrono::milliseconds retry_after{0};
  /// With `sent`: the platform's id of the message, when it gives one.
  std::string platform_message_id;
  /// With `retry` or `failed`: what went wrong, for the outbox's last_error.
  std::string error;
};

/// Classifies an HTTP answer the common way: 2xx sent; 429 retry after its Retry-After
/// (seconds); 408, 425 and 5xx retry; other statuses failed.
send_result classify_http_status(unsigned status, std::string_view retry_after_header,
                                 std::string_view body);

/// Where an adapter that fetches its own messages (Telegram's getUpdates) hands them: the
/// channel core journals them, durably, before the coroutine returns. An error: not all
/// were journaled; fetch them again (the journal drops the ones it has).
using inbound_sink =
    std::function<boost::asio::awaitable<expected<void>>(std::vector<inbound_message>)>;

/// A JSON POST to `url` whose every deadline is at most `deadline` (the adapters' calls).
http_client_request json_post(std::string url, std::string body,
                              std::chrono::milliseconds deadline);

/// One platform.
class channel_adapter {
public:
  virtual ~channel_adapter() = default;

  /// Whether `request` came from the platform (a shared token or a signature, compared
  /// in constant time). An error (`permission_denied`) is answered 401 and nothing of the
  /// request is journaled.
  virtual expected<void> verify(const http_request& request) const = 0;

  /// Answers a GET on the channel's route: the platform's URL check, its own
  /// verification included (in constant time). An error is answered by its code:
  /// `permission_denied` 403, `invalid_argument` 400, anything else 405 (the default: the
  /// platform makes no GET). Pure; may run anywhere.
  virtual expected<handshake_answer> answer_get(const http_request& request) const;

  /// The messages of a verified request (possibly none: a ping, a bot's own message).
  /// An error (`invalid_argument`) is answered 400.
  virtual expected<decoded_request> decode(const http_request& request) const = 0;

  /// Sends one part through `http`, giving up at `deadline`.
  virtual boost::asio::awaitable<send_result> send(http_client& http, outbound_part part,
                                                   std::chrono::milliseconds deadline) = 0;

  /// Whether the bot can change the text of a message it sent (`edit`): what a
  /// channel's `stream_edits` needs. False by default.
  virtual bool supports_edits() const {
    return false;
  }
  /// Replaces the text of the bot's message `platform_message_id` (as `send` answered it)
  /// in the thread `part.reply_to` with `part.text`, giving up at `deadline`. An edit
  /// that changes nothing (the same text) is `sent`. By default `failed`: no edits.
  virtual boost::asio::awaitable<send_result> edit(http_client& http, outbound_part part,
                                                   std::string platform_message_id,
                                                   std::chrono::milliseconds deadline);

  /// The bot's own name on the platform, once the adapter learnt it (Telegram getMe's
  /// username, at start); empty before and where the platform has none. Any thread.
  virtual std::string bot_name() const {
    return {};
  }

  /// A reply's text in the parts the platform accepts, in order (each part is one outbox
  /// row, sent on its own). One part by default.
  virtual std::vector<std::string> split(std::string_view text) const;

  /// How often the platform's typing indicator is shown again while a run of the thread
  /// is active (Telegram's lasts 5 s); zero (the default): the platform shows none.
  virtual std::chrono::milliseconds typing_interval() const {
    return std::chrono::milliseconds{0};
  }
  /// Shows the typing indicator once in the thread `reply_to`, giving up at `deadline`.
  /// Its failures are the adapter's to log: they never touch a reply.
  virtual boost::asio::awaitable<void> typing(http_client& http, std::string reply_to,
                                              std::chrono::milliseconds deadline);

  /// Starts what the platform needs besides the inbound route, on `http`'s executor
  /// (Telegram: the getUpdates loop handing messages to `sink`, or setWebhook; Slack:
  /// auth.test for the bot's user id). Called once, when the channel goes live.
  virtual void start(http_client& http, inbound_sink sink);
  /// Ends what `start` began. With `wait`, returns once it ended (or after a few
  /// seconds); never wait on a thread that runs `http`'s executor.
  virtual void stop(bool wait);
};

/// Shows the typing indicator of `adapter` in `reply_to` every `typing_interval` while
/// `active` holds, for at most `cap`. A coroutine on `http`'s executor.
boost::asio::awaitable<void> keep_typing(std::shared_ptr<channel_adapter> adapter,
                                         http_client& http, std::string reply_to,
                                         std::shared_ptr<const std::atomic<bool>> active,
                                         std::chrono::milliseconds cap);

/// A coroutine an adapter runs beside the inbound route, cancelled by `stop`: the
/// cancellation reaches the operation it awaits (an HTTP call, a timer) at once.
class background_task {
public:
  background_task() = default;
  ~background_task();
  background_task(const background_task&) = delete;
  background_task& operator=(const background_task&) = delete;

  /// Runs `body` on `executor` (once; a second call is ignored).
  void start(boost::asio::any_io_executor executor,
             std::function<boost::asio::awaitable<void>()> body);
  /// Asks it to end; with `wait`, returns when it ended or `wait_at_most` passed.
  void stop(bool wait, std::chrono::milliseconds wait_at_most = std::chrono::seconds(3));
  /// True once `stop` was called: the body checks it after every wait.
  bool stopping() const noexcept {
    return stopping_->load();
  }
  /// Waits `wait` on `executor` (ended early by `stop`); false when stopping.
  boost::asio::awaitable<bool> pause(boost::asio::any_io_executor executor,
                                     std::chrono::milliseconds wait) const;

private:
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<boost::asio::cancellation_signal> signal_;
  boost::asio::any_io_executor executor_;
  std::shared_future<void> done_;
  bool started_ = false;
};

} // namespace troupe::net::channel
