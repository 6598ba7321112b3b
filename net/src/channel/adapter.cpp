#include "troupe/net/channel/adapter.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "troupe/net/provider_wire.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::channel {

send_result classify_http_status(unsigned status, std::string_view retry_after_header,
                                 std::string_view body) {
  send_result out;
  if (status >= 200 && status < 300) {
    out.outcome = send_outcome::sent;
    return out;
  }
  // A short excerpt of what the platform said, for last_error (never the request).
  constexpr std::size_t excerpt = 200;
  out.error = fmt::format("HTTP {}", status);
  if (!body.empty()) {
    out.error += ": " + std::string(body.substr(0, excerpt));
  }
  if (status == 429 || status == 408 || status == 425 || status >= 500) {
    out.outcome = send_outcome::retry;
    out.retry_after = parse_retry_after(retry_after_header).value_or(std::chrono::milliseconds{0});
    return out;
  }
  out.outcome = send_outcome::failed;
  return out;
}

http_client_request json_post(std::string url, std::string body,
                              std::chrono::milliseconds deadline) {
  http_client_request request;
  request.method = http_method::post;
  request.url = std::move(url);
  request.body = std::move(body);
  request.headers = {{"Content-Type", "application/json"}};
  request.deadlines.connect = std::min(deadline, request.deadlines.connect);
  request.deadlines.first_byte = deadline;
  request.deadlines.idle = deadline;
  request.deadlines.total = deadline;
  return request;
}

expected<handshake_answer> channel_adapter::answer_get(const http_request&) const {
  return fail(errc::not_found, "this channel's platform makes no GET request");
}

std::vector<std::string> channel_adapter::split(std::string_view text) const {
  return {std::string(text)};
}

boost::asio::awaitable<void> channel_adapter::typing(http_client&, std::string,
                                                     std::chrono::milliseconds) {
  co_return;
}

boost::asio::awaitable<send_result> channel_adapter::edit(http_client&, outbound_part, std::string,
                                                          std::chrono::milliseconds) {
  send_result out;
  out.error = "this platform's messages cannot be edited";
  co_return out;
}

void channel_adapter::start(http_client&, inbound_sink) {}

void channel_adapter::stop(bool) {}

boost::asio::awaitable<void> keep_typing(std::shared_ptr<channel_adapter> adapter,
                                         http_client& http, std::string reply_to,
                                         std::shared_ptr<const std::atomic<bool>> active,
                                         std::chrono::milliseconds cap) {
  namespace asio = boost::asio;
  const auto interval = adapter->typing_interval();
  if (interval <= std::chrono::milliseconds{0}) {
    co_return;
  }
  const auto until = std::chrono::steady_clock::now() + cap;
  asio::steady_timer timer(http.get_executor());
  while (active->load() && std::chrono::steady_clock::now() < until) {
    const auto next = std::chrono::steady_clock::now() + interval;
    // One call's deadline is the interval: a slow platform never piles calls up.
    auto showing = adapter->typing(http, reply_to, interval);
    co_await std::move(showing);
    timer.expires_at(std::min(next, until));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

background_task::~background_task() {
  stop(false);
}

void background_task::start(boost::asio::any_io_executor executor,
                            std::function<boost::asio::awaitable<void>()> body) {
  namespace asio = boost::asio;
  if (started_) {
    return;
  }
  started_ = true;
  executor_ = executor;
  signal_ = std::make_shared<asio::cancellation_signal>();
  auto finished = std::make_shared<std::promise<void>>();
  done_ = finished->get_future().share();
  asio::co_spawn(
      executor,
      [body = std::move(body)]() -> asio::awaitable<void> {
        auto running = body();
        co_await std::move(running);
      },
      asio::bind_cancellation_slot(signal_->slot(), [finished](const std::exception_ptr& e) {
        if (e) {
          try {
            std::rethrow_exception(e);
          } catch (const boost::system::system_error& aborted) {
            // The cancellation, thrown by the operation it ended: the normal way out.
          } catch (const std::exception& other) {
            log::error("channel adapter task ended by an exception: {}", other.what());
          }
        }
        finished->set_value();
      }));
}

boost::asio::awaitable<bool> background_task::pause(boost::asio::any_io_executor executor,
                                                    std::chrono::milliseconds wait) const {
  namespace asio = boost::asio;
  if (stopping()) {
    co_return false;
  }
  asio::steady_timer timer(executor, wait);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return !stopping();
}

void background_task::stop(bool wait, std::chrono::milliseconds wait_at_most) {
  if (!started_ || stopping_->exchange(true)) {
    if (wait && done_.valid()) {
      done_.wait_for(wait_at_most);
    }
    return;
  }
  // The signal belongs to the executor's thread: emitted there.
  boost::asio::post(executor_,
                    [signal = signal_] { signal->emit(boost::asio::cancellation_type::terminal); });
  if (wait) {
    done_.wait_for(wait_at_most);
  }
}

} // namespace troupe::net::channel
