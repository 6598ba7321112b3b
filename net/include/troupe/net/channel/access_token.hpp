#pragma once

/// \file
/// A platform's access token (Feishu's tenant_access_token, DingTalk's accessToken,
/// WeCom's and WeChat's access_token), fetched when first needed, shared by every send,
/// and fetched again shortly before it expires or after the platform said it expired.
///
/// Threading: a cache is shared by the coroutines of every io thread that sends through
/// its channel. `get` runs on the executor of the `http_client` it is given; while one
/// fetch is in flight, every other `get` (on any executor) waits for its result instead of
/// fetching again (single flight). `invalidate` may be called from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::net::channel {

/// A token and when the platform said it stops working.
struct access_token {
  std::string value;
  std::chrono::steady_clock::time_point expires_at;
};

/// The cache of one channel's token.
class access_token_cache {
public:
  /// Fetches a new token through the given client (the platform's token endpoint).
  using fetcher = std::function<boost::asio::awaitable<expected<access_token>>(http_client&)>;

  /// A token is fetched again once it is missing or within `refresh_margin` of its
  /// expiry (a token that lives less than twice the margin: at half its life).
  explicit access_token_cache(fetcher fetch,
                              std::chrono::seconds refresh_margin = std::chrono::seconds(300));
  ~access_token_cache();
  access_token_cache(const access_token_cache&) = delete;
  access_token_cache& operator=(const access_token_cache&) = delete;

  /// The current token, fetched first when needed. While a fetch is in flight, waits for
  /// it (at most `wait_at_most`, then `timeout`). A failed fetch is returned as is (and
  /// the next `get` fetches again), except that a token that has not expired yet is
  /// still returned when only its early refresh failed.
  boost::asio::awaitable<expected<std::string>> get(http_client& http);

  /// Drops the cached token if it is still `stale_value` (the platform said it expired or
  /// is invalid): the next `get` fetches a new one. A newer token is kept.
  void invalidate(std::string_view stale_value);

  /// Fetches started so far (what tests and the bench count).
  std::uint64_t fetches() const;
  /// Gets waiting for the fetch in flight.
  std::size_t waiting() const;

  /// How long a `get` waits for another caller's fetch.
  std::chrono::milliseconds wait_at_most{std::chrono::seconds(60)};

private:
  struct waiter;
  void finish(const expected<access_token>& result);

  fetcher fetch_;
  std::chrono::seconds margin_;
  mutable std::mutex mutex_;
  std::optional<access_token> token_;
  /// When `get` fetches the cached token again.
  std::chrono::steady_clock::time_point refresh_at_;
  bool in_flight_ = false;
  std::uint64_t fetches_ = 0;
  std::vector<std::shared_ptr<waiter>> waiters_;
};

} // namespace troupe::net::channel
