#pragma once

// The platforms `troupe bench --scenario channel` drives (`--channel-type`), every one troupe
// has an adapter for: one driver per platform, each in its own file, behind one interface — how to
// create the channel, how to make (and sign) the platform's delivery of message i, and the
// platform's side that receives the replies (the generic webhook's callback receiver, or a fake
// platform shared with the tests, fakes/), which hands each reply's text to a reply_tracker. Every
// driver tags message i with "bench c<i>"; the mock-llm repeats it in the reply.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "scenario_support.hpp"

namespace troupe::bench::detail {

std::int64_t channel_now_ns();

/// The messages of a run: message `i` goes to thread `i % threads` as its `i / threads`-th
/// message, so a thread's messages are sent a whole round of threads apart, in order.
struct channel_load {
  std::size_t threads = 0;
  std::size_t total = 0;
  std::vector<std::atomic<std::int64_t>> sent_ns;
  std::vector<std::atomic<std::int64_t>> replied_ns;
  std::size_t next = 0; // the load generator's thread only

  channel_load(std::size_t thread_count, std::size_t per_thread)
      : threads(thread_count), total(thread_count * per_thread), sent_ns(total), replied_ns(total) {
  }
};

/// Records the first reply to each message (found by its "bench c<i>" tag) and counts the
/// rest; safe from any thread.
class reply_tracker {
public:
  explicit reply_tracker(channel_load& load) : load_(load) {}

  /// A reply's text, as the platform received it now.
  void take(std::string_view text);
  /// Waits until `n` messages have a reply or `limit` passes; true when they have.
  bool wait_for(std::size_t n, std::chrono::milliseconds limit);

  std::size_t answered() const;
  std::size_t duplicates() const;
  std::size_t unrecognised() const;
  std::size_t out_of_order() const;

private:
  channel_load& load_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t answered_ = 0;
  std::size_t duplicates_ = 0;
  std::size_t unrecognised_ = 0;
  std::size_t out_of_order_ = 0;
};

/// One platform.
class channel_driver {
public:
  virtual ~channel_driver() = default;

  /// Starts the platform's side, handing every reply it receives to `replies`.
  virtual expected<void> start(reply_tracker& replies) = 0;
  /// Settings of a troupe started here (the channel's secret variables allowed).
  virtual std::vector<std::pair<std::string, std::string>> settings() const {
    return {};
  }
  /// The body of `POST /api/v1/channels` creating channel `name` for `agent`, whose inbound
  /// route is `route` (what a platform told of it needs: Telegram's setWebhook). Replies
  /// are one send each: a channel that could stream previews has `stream_edits` off.
  virtual std::string channel_body(std::string_view name, std::string_view agent,
                                   std::string_view route) const = 0;
  /// Waits, at most `limit`, until the platform has what the channel sets up there when it
  /// starts (Telegram: the webhook troupe registers); deliveries begin after.
  virtual expected<void> await_channel(std::chrono::milliseconds limit) const {
    (void)limit;
    return {};
  }
  /// The delivery of message `i` of thread `thread`, whose text is `text`, to the channel's
  /// inbound route `route`, made (signed, encrypted) as the platform makes it.
  virtual request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                                    const std::string& text) const = 0;
  /// For the report: what stands in for the platform.
  virtual std::string describe() const = 0;
};

/// A request a fake platform's sender made (fakes/), as the load generator sends it.
request_template as_template(const net::http_client_request& request);

/// The driver of `--channel-type` `type`; an `invalid_argument` naming the known ones.
expected<std::unique_ptr<channel_driver>> make_channel_driver(std::string_view type);
/// The known types, for the CLI's help.
const std::vector<std::string_view>& channel_driver_types();

std::unique_ptr<channel_driver> make_webhook_driver();
std::unique_ptr<channel_driver> make_feishu_driver();
std::unique_ptr<channel_driver> make_dingtalk_driver();
std::unique_ptr<channel_driver> make_wecom_driver();
std::unique_ptr<channel_driver> make_wechat_mp_driver();
std::unique_ptr<channel_driver> make_whatsapp_driver();
std::unique_ptr<channel_driver> make_slack_driver();
std::unique_ptr<channel_driver> make_telegram_driver();

} // namespace troupe::bench::detail
