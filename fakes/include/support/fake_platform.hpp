#pragma once

// What the fakes of messaging platforms (fake_telegram.hpp, fake_slack.hpp, fake_wechat.hpp,
// fake_whatsapp.hpp, fake_feishu.hpp, fake_dingtalk.hpp, all here) share: a loopback server on
// net's HTTP server with an io thread of its own, a log of every call it answered that tests wait
// on, and failures injected per method. The fakes speak the platforms' exact wire format; tests and
// `troupe bench --scenario channel` reach them with net's HTTP client.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/metrics.hpp"

namespace troupe::test {

namespace asio = boost::asio;

/// One call a fake answered.
struct recorded_call {
  /// The API method ("sendMessage", "chat.postMessage").
  std::string method;
  std::vector<net::http_header> headers;
  std::string body;
  /// What the fake answered.
  unsigned status = 0;
  std::string answer;
  std::chrono::steady_clock::time_point at;

  /// The first header named `name` (case-insensitive), or empty.
  std::string_view header(std::string_view name) const noexcept;
};

/// The calls a fake answered, in order; safe from any thread.
class call_log {
public:
  void add(recorded_call call);
  std::vector<recorded_call> all() const;
  std::vector<recorded_call> of(std::string_view method) const;
  std::size_t count(std::string_view method) const;
  /// Waits until `method` was answered at least `n` times (true) or `deadline` passed.
  bool wait_for(std::string_view method, std::size_t n, std::chrono::milliseconds deadline) const;

private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<recorded_call> calls_;
};

/// Failures to answer instead of doing a method, each for a number of calls.
template <class Fault> class fault_plan {
public:
  static constexpr std::size_t always = std::numeric_limits<std::size_t>::max();

  void add(std::string method, Fault fault, std::size_t times) {
    const std::lock_guard lock(mutex_);
    plans_[std::move(method)].push_back({std::move(fault), times});
  }
  void clear() {
    const std::lock_guard lock(mutex_);
    plans_.clear();
  }
  /// The fault the next call of `method` gets, if any (counting it).
  std::optional<Fault> take(const std::string& method) {
    const std::lock_guard lock(mutex_);
    auto it = plans_.find(method);
    if (it == plans_.end() || it->second.empty()) {
      return std::nullopt;
    }
    auto& next = it->second.front();
    auto fault = next.fault;
    if (next.times != always && --next.times == 0) {
      it->second.erase(it->second.begin());
    }
    return fault;
  }

private:
  struct entry {
    Fault fault;
    std::size_t times;
  };
  std::mutex mutex_;
  std::map<std::string, std::vector<entry>> plans_;
};

/// net's HTTP server on 127.0.0.1 (a free port) with one io thread, stopped on
/// destruction after `before_stop` (run on the io thread: end long polls there).
class loopback_server {
public:
  loopback_server(net::router routes, std::string name, std::function<void()> before_stop = {});
  ~loopback_server();
  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;

  std::uint16_t port() const noexcept {
    return port_;
  }
  /// "http://127.0.0.1:<port>".
  std::string origin() const;
  asio::io_context& io() noexcept {
    return io_;
  }

private:
  asio::io_context io_;
  metrics_registry metrics_;
  std::unique_ptr<net::http_server> server_;
  std::function<void()> before_stop_;
  std::thread thread_;
  std::uint16_t port_ = 0;
};

/// One HTTP call through net's client on a private io_context, waited for on the calling
/// thread (its deadlines are the request's).
expected<net::http_client_response> blocking_fetch(net::http_client_request request);

} // namespace troupe::test
