#pragma once

// A local HTTP server standing in for the generic webhook channel's receiver (the
// `callback_url` troupe POSTs replies to): it records every request it gets, checks
// nothing itself, and answers with the statuses a test scripts (a 429 with Retry-After
// first, then 200, ..., each after a delay if scripted), so tests see exactly what troupe
// sent and how it reacted to the receiver's failures. Runs on a thread of its own on
// 127.0.0.1.

#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "troupe/net/http_server.hpp"
#include "troupe/runtime/metrics.hpp"

namespace troupe::test {

class callback_receiver {
public:
  /// One scripted answer.
  struct answer {
    unsigned status = 200;
    /// Sent as Retry-After when not empty.
    std::string retry_after;
    std::string body = R"({"ok":true})";
    /// How long the answer waits after the request arrived (it counts as received, and
    /// as accepted when 2xx, at once).
    std::chrono::milliseconds delay{0};
  };

  callback_receiver() : server_(io_, routes(), {}, metrics_) {
    port_ = server_.listen({"127.0.0.1", 0}).value().port;
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~callback_receiver() {
    std::promise<void> done;
    server_.stop(std::chrono::milliseconds(0), [&done] { done.set_value(); });
    done.get_future().wait();
    work_.reset();
    io_.stop();
    thread_.join();
  }
  callback_receiver(const callback_receiver&) = delete;
  callback_receiver& operator=(const callback_receiver&) = delete;

  /// The URL replies are to go to.
  std::string url() const {
    return fmt::format("http://127.0.0.1:{}/replies", port_);
  }

  /// Answers the next requests with `answers`, in order; afterwards 200.
  void script(std::vector<answer> answers) {
    std::lock_guard lock(mutex_);
    for (auto& a : answers) {
      script_.push_back(std::move(a));
    }
  }

  /// Every request received so far, in order.
  std::vector<net::http_request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }
  /// When each request arrived, in order.
  std::vector<std::chrono::steady_clock::time_point> arrivals() const {
    std::lock_guard lock(mutex_);
    return arrivals_;
  }
  /// The requests answered 2xx.
  std::size_t accepted() const {
    std::lock_guard lock(mutex_);
    return accepted_;
  }

private:
  net::router routes() {
    net::router r;
    r.add(net::http_method::post, "/replies",
          [this](net::request_context& ctx) { return respond(this, ctx.request()); });
    return r;
  }

  /// A coroutine with its state in parameters (no captures: they would dangle).
  static boost::asio::awaitable<net::http_response> respond(callback_receiver* self,
                                                            net::http_request request) {
    auto [response, delay] = self->take(request);
    if (delay.count() > 0) {
      boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, delay);
      boost::system::error_code ignored;
      co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ignored));
    }
    co_return response;
  }

  std::pair<net::http_response, std::chrono::milliseconds> take(const net::http_request& request) {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
    arrivals_.push_back(std::chrono::steady_clock::now());
    answer a;
    if (!script_.empty()) {
      a = std::move(script_.front());
      script_.pop_front();
    }
    if (a.status >= 200 && a.status < 300) {
      ++accepted_;
    }
    auto response = net::http_response::json(a.status, a.body);
    if (!a.retry_after.empty()) {
      response.headers.push_back({"Retry-After", a.retry_after});
    }
    return {std::move(response), a.delay};
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  metrics_registry metrics_;
  net::http_server server_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::deque<answer> script_;
  std::vector<net::http_request> requests_;
  std::vector<std::chrono::steady_clock::time_point> arrivals_;
  std::size_t accepted_ = 0;
};

} // namespace troupe::test
