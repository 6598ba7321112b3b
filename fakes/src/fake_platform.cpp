#include "support/fake_platform.hpp"

#include <exception>
#include <optional>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

namespace troupe::test {

std::string_view recorded_call::header(std::string_view name) const noexcept {
  for (const auto& h : headers) {
    if (net::iequals(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

void call_log::add(recorded_call call) {
  {
    const std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
  }
  changed_.notify_all();
}

std::vector<recorded_call> call_log::all() const {
  const std::lock_guard lock(mutex_);
  return calls_;
}

std::vector<recorded_call> call_log::of(std::string_view method) const {
  const std::lock_guard lock(mutex_);
  std::vector<recorded_call> out;
  for (const auto& c : calls_) {
    if (c.method == method) {
      out.push_back(c);
    }
  }
  return out;
}

std::size_t call_log::count(std::string_view method) const {
  const std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& c : calls_) {
    n += c.method == method ? 1 : 0;
  }
  return n;
}

bool call_log::wait_for(std::string_view method, std::size_t n,
                        std::chrono::milliseconds deadline) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, deadline, [&] {
    std::size_t seen = 0;
    for (const auto& c : calls_) {
      seen += c.method == method ? 1 : 0;
    }
    return seen >= n;
  });
}

loopback_server::loopback_server(net::router routes, std::string name,
                                 std::function<void()> before_stop)
    : before_stop_(std::move(before_stop)) {
  net::http_server_options options;
  options.server_name = std::move(name);
  // Long polls (getUpdates) hold a request for their whole timeout.
  options.request_timeout = std::chrono::milliseconds(120'000);
  server_ = std::make_unique<net::http_server>(io_, std::move(routes), options, metrics_);
  auto bound = server_->listen({"127.0.0.1", 0});
  if (!bound) {
    throw std::runtime_error("fake platform server: " + bound.error().message);
  }
  port_ = bound->port;
  server_->start();
  thread_ = std::thread([this] { io_.run(); });
}

loopback_server::~loopback_server() {
  asio::post(io_, [this] {
    if (before_stop_) {
      before_stop_();
    }
    server_->stop(std::chrono::milliseconds(200), [this] { io_.stop(); });
  });
  thread_.join();
}

std::string loopback_server::origin() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

namespace {

asio::awaitable<expected<net::http_client_response>> fetch(net::http_client& client,
                                                           net::http_client_request request) {
  co_return co_await client.fetch(std::move(request));
}

} // namespace

expected<net::http_client_response> blocking_fetch(net::http_client_request request) {
  asio::io_context io;
  net::http_client client(io.get_executor());
  std::optional<expected<net::http_client_response>> out;
  std::exception_ptr failure;
  bool done = false;
  asio::co_spawn(io, fetch(client, std::move(request)),
                 [&](std::exception_ptr e, expected<net::http_client_response> value) {
                   failure = e;
                   if (!e) {
                     out.emplace(std::move(value));
                   }
                   done = true;
                 });
  // Runs until the fetch is done (curl's timers may leave other work pending).
  while (!done) {
    if (io.stopped()) {
      io.restart();
    }
    io.run_one();
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
  return std::move(*out);
}

} // namespace troupe::test
