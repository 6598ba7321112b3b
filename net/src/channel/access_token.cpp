#include "troupe/net/channel/access_token.hpp"

#include <algorithm>
#include <exception>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace troupe::net::channel {

namespace asio = boost::asio;

/// A `get` waiting for another caller's fetch: woken by cancelling its timer, on its own
/// executor (a timer is not thread-safe).
struct access_token_cache::waiter {
  explicit waiter(asio::any_io_executor executor) : timer(std::move(executor)) {}
  asio::steady_timer timer;
  /// Set, under the cache's mutex, when the fetch ended.
  bool done = false;
  /// The fetch's error, when it failed.
  std::optional<error> failure;
};

access_token_cache::access_token_cache(fetcher fetch, std::chrono::seconds refresh_margin)
    : fetch_(std::move(fetch)), margin_(refresh_margin) {}

access_token_cache::~access_token_cache() = default;

std::uint64_t access_token_cache::fetches() const {
  std::lock_guard lock(mutex_);
  return fetches_;
}

std::size_t access_token_cache::waiting() const {
  std::lock_guard lock(mutex_);
  return waiters_.size();
}

void access_token_cache::invalidate(std::string_view stale_value) {
  std::lock_guard lock(mutex_);
  if (token_ && token_->value == stale_value) {
    token_.reset();
  }
}

void access_token_cache::finish(const expected<access_token>& result) {
  std::vector<std::shared_ptr<waiter>> woken;
  {
    std::lock_guard lock(mutex_);
    in_flight_ = false;
    if (result) {
      // A token that lives less than twice the margin is refreshed at half its life.
      const auto now = std::chrono::steady_clock::now();
      const auto life = result->expires_at - now;
      token_ = *result;
      refresh_at_ =
          result->expires_at - std::min<std::chrono::steady_clock::duration>(margin_, life / 2);
    }
    woken.swap(waiters_);
    for (const auto& w : woken) {
      w->done = true;
      if (!result) {
        w->failure = result.error();
      }
    }
  }
  for (const auto& w : woken) {
    asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
  }
}

asio::awaitable<expected<std::string>> access_token_cache::get(http_client& http) {
  std::optional<std::string> still_valid;
  {
    std::unique_lock lock(mutex_);
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (token_ && now < refresh_at_) {
        co_return token_->value;
      }
      if (!in_flight_) {
        break;
      }
      // Another caller is fetching: wait for its result, then look again.
      auto w = std::make_shared<waiter>(http.get_executor());
      w->timer.expires_after(wait_at_most);
      waiters_.push_back(w);
      lock.unlock();
      // Nothing runs on this executor between the unlock and the wait, so the wake-up
      // posted here cannot come before the wait starts.
      co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
      lock.lock();
      if (!w->done) {
        std::erase(waiters_, w);
        co_return fail(errc::timeout, "the platform's access token is still being fetched");
      }
      if (w->failure) {
        if (token_ && std::chrono::steady_clock::now() < token_->expires_at) {
          co_return token_->value;
        }
        co_return tl::unexpected<error>(*w->failure);
      }
    }
    in_flight_ = true;
    ++fetches_;
    if (token_ && std::chrono::steady_clock::now() < token_->expires_at) {
      still_valid = token_->value;
    }
  }
  expected<access_token> fetched = fail(errc::internal, "the token fetch did not end");
  try {
    auto fetching = fetch_(http);
    fetched = co_await std::move(fetching);
  } catch (...) {
    finish(fail(errc::cancelled, "the token fetch was abandoned"));
    throw;
  }
  if (fetched && fetched->value.empty()) {
    fetched = fail(errc::unavailable, "the platform answered an empty access token");
  }
  finish(fetched);
  if (!fetched) {
    if (still_valid) {
      // Only the early refresh failed: the token works until it expires.
      co_return *still_valid;
    }
    co_return tl::unexpected<error>(fetched.error());
  }
  co_return fetched->value;
}

} // namespace troupe::net::channel
