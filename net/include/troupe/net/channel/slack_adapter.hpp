#pragma once

/// \file
/// The Slack channel (Events API in, Web API out; the wire format is slack_wire.hpp).
/// Inbound requests on the channel's route are verified by their v0 signature
/// (`X-Slack-Signature`: HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<body>` under the
/// signing secret, compared in constant time, the timestamp within 5 minutes of now). A
/// `url_verification` is answered with its challenge; an `event_callback` carrying a
/// `message` or `app_mention` from a person becomes a message (events with `bot_id`, the
/// bot's own messages, edits, deletions and other subtypes are skipped). A message's
/// journal key is "<channel>:<ts>" (it also drops the second copy of an @-mention, which
/// arrives once as `message` and once as `app_mention` under two event ids), its second
/// key "event:<event_id>" (Slack's redeliveries of an event). Its thread is the channel
/// and the thread's ts (the message's own ts when it starts one), and replies go there.
/// A slash command, form-encoded on the same route and signed the same way, becomes a
/// message of its channel keyed "command:<trigger_id>", answered at the channel's top
/// level; Slack gets an empty 200 for it.
///
/// Outbound, each part (at most 3,500 characters, split_message) is a `chat.postMessage`
/// with `thread_ts`, the bot token as a Bearer token and the text as mrkdwn. HTTP 429
/// waits for its Retry-After; an answer `{"ok":false,"error":"ratelimited"}` is retried
/// too, Slack's own failures (5xx, internal_error, …) with a back-off; any other error
/// word (channel_not_found, invalid_auth, …) is final. At start, `auth.test` names the
/// bot's user id, which marks its own messages and is stripped from a leading mention.
/// `edit` changes a posted message with `chat.update`: a channel with `stream_edits` posts
/// a run's first part early and updates it as tokens arrive
/// (actors/src/channel_preview.cpp).

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "troupe/net/channel/adapter.hpp"
#include "troupe/net/channel/slack_wire.hpp"

namespace troupe::net::channel {

struct slack_options {
  /// The channel's name (logs).
  std::string channel;
  std::string bot_token;
  std::string signing_secret;
  /// "https://slack.com/api" or a fake's base.
  std::string api_base;
  /// The deadline of auth.test.
  std::chrono::milliseconds call_deadline{10'000};
  /// The back-off of auth.test: first, doubling.
  std::chrono::milliseconds first_backoff{1'000};
  std::chrono::milliseconds max_backoff{60'000};
};

/// The messages of a decoded envelope that a channel answers.
std::vector<inbound_message> slack_inbound(const slack::envelope& envelope,
                                           std::string_view bot_user_id);

/// The message a slash command stands for: journaled under "command:<trigger_id>", in the
/// thread of its channel (it carries no thread_ts), its text the command and its
/// argument ("/continue 2"), answered at the channel's top level.
inbound_message slack_command_inbound(const slack::slash_command& command);

/// "<channel>:<thread_ts>" (what `reply_to` holds) back into its parts; an empty
/// thread_ts ("<channel>:") posts at the channel's top level.
struct slack_thread {
  std::string channel;
  std::string thread_ts;
};
std::optional<slack_thread> parse_slack_reply_to(std::string_view reply_to);

class slack_adapter final : public channel_adapter,
                            public std::enable_shared_from_this<slack_adapter> {
public:
  explicit slack_adapter(slack_options options);
  ~slack_adapter() override;

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
  void start(http_client& http, inbound_sink sink) override;
  void stop(bool wait) override;

  /// The bot's user id, once auth.test answered (empty before).
  std::string bot_user_id() const;

private:
  boost::asio::awaitable<void> learn_identity(http_client& http);

  slack_options options_;
  mutable std::mutex mutex_;
  std::string bot_user_id_;
  background_task task_;
};

} // namespace troupe::net::channel
