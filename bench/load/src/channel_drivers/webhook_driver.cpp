// The generic webhook channel: deliveries carry the channel's token in X-Webhook-Token;
// replies arrive as POSTs at a local receiver standing in for the channel's callback_url.

#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/metrics.hpp"

namespace troupe::bench::detail {

namespace asio = boost::asio;

namespace {

constexpr std::string_view channel_token = "troupe-bench-channel-token";

/// The channel's callback_url: every reply's `text` goes to the tracker.
class reply_receiver {
public:
  reply_receiver() : server_(io_, routes(), {}, metrics_) {}
  ~reply_receiver() {
    if (thread_.joinable()) {
      std::promise<void> done;
      asio::post(io_, [this, &done] {
        server_.stop(std::chrono::milliseconds(0), [&done] { done.set_value(); });
      });
      done.get_future().wait();
    }
    work_.reset();
    io_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  reply_receiver(const reply_receiver&) = delete;
  reply_receiver& operator=(const reply_receiver&) = delete;

  expected<std::string> start(reply_tracker& tracker) {
    tracker_ = &tracker;
    auto bound = server_.listen({"127.0.0.1", 0});
    if (!bound) {
      return tl::unexpected(bound.error());
    }
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
    return fmt::format("http://127.0.0.1:{}/replies", bound->port);
  }

private:
  net::router routes() {
    net::router r;
    r.add(net::http_method::post, "/replies",
          [this](net::request_context& ctx) -> asio::awaitable<net::http_response> {
            const auto reply = parse_object(ctx.request().body);
            tracker_->take(reply ? string_field(*reply, "text") : std::string());
            co_return net::http_response::json(200, R"({"ok":true})");
          });
    return r;
  }

  reply_tracker* tracker_ = nullptr;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  metrics_registry metrics_;
  net::http_server server_;
  std::thread thread_;
};

class webhook_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    auto url = receiver_.start(replies);
    if (!url) {
      return tl::unexpected(url.error());
    }
    callback_url_ = std::move(*url);
    return {};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view /*route*/) const override {
    return fmt::format(R"({{"name":{},"type":"webhook","agent":{},"token":{},"callback_url":{},)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), json_text(channel_token),
                       json_text(callback_url_));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    request_template t;
    t.url = route;
    t.headers = {{"Content-Type", "application/json"},
                 {"X-Webhook-Token", std::string(channel_token)}};
    t.body =
        fmt::format(R"({{"thread":"bench-t{}","sender":"bench-s{}","message_id":{},"text":{}}})",
                    thread, thread, json_text(fmt::format("bench c{}", i)), json_text(text));
    return t;
  }
  std::string describe() const override {
    return "a generic webhook channel; replies at a local callback receiver";
  }

private:
  reply_receiver receiver_;
  std::string callback_url_;
};

} // namespace

std::unique_ptr<channel_driver> make_webhook_driver() {
  return std::make_unique<webhook_driver>();
}

} // namespace troupe::bench::detail
