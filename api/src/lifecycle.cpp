#include "lifecycle.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "troupe/runtime/log.hpp"
#include "troupe/storage/file_store.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

// Removes a deleted conversation's file bytes and workspace, on the blocking pool when the
// node has one. Arguments by value: this is a coroutine.
asio::awaitable<void> remove_leftovers(state_ptr state, std::string uuid,
                                       std::vector<std::string> paths) {
  auto job = [dir = state->data_dir, uuid, paths = std::move(paths)]() -> expected<void> {
    auto removed = storage::remove_conversation_bytes(dir, uuid, paths);
    if (!removed) {
      return tl::unexpected(removed.error());
    }
    return {};
  };
  auto removing = off_the_shard(state, std::move(job));
  auto done = co_await std::move(removing);
  if (!done) {
    log::warn("conversation {}: its rows are deleted, but not all it left on disk: {}", uuid,
              done.error().message);
  }
}

// What one deleting write found: the files' storage paths, and whether it deleted.
struct deletion {
  std::vector<std::string> paths;
  bool deleted = false;
};

asio::awaitable<void> expiry_loop(std::weak_ptr<api_state> weak) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    std::chrono::milliseconds interval{0};
    {
      auto state = weak.lock();
      if (!state) {
        co_return;
      }
      auto expiring = expire_ephemeral_conversations(state, 100);
      auto expired = co_await std::move(expiring);
      if (!expired) {
        log::warn("ephemeral conversations: expiry failed: {}", expired.error().message);
      } else if (*expired > 0) {
        log::debug("ephemeral conversations: deleted {}", *expired);
      }
      interval = std::clamp<std::chrono::milliseconds>(
          state->config.ephemeral_retention / 4, std::chrono::seconds(1), std::chrono::seconds(60));
      if (expired && *expired == 100) {
        // A full batch: more are waiting.
        interval = std::chrono::milliseconds(0);
      }
    }
    timer.expires_after(interval);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return;
    }
  }
}

} // namespace

asio::awaitable<expected<void>> discard_conversation(state_ptr state,
                                                     storage::conversation_record conversation) {
  auto found = std::make_shared<deletion>();
  auto pending =
      store(state, "delete conversation",
            [id = conversation.id, found](storage::connection& c) -> expected<std::int64_t> {
              auto paths = storage::conversation_file_paths(c, id);
              if (!paths) {
                return tl::unexpected(paths.error());
              }
              if (auto ok = storage::delete_conversation(c, id); !ok) {
                return tl::unexpected(ok.error());
              }
              found->paths = std::move(*paths);
              found->deleted = true;
              return 1;
            });
  auto done = co_await std::move(pending);
  if (!done) {
    co_return tl::unexpected(done.error());
  }
  auto removing = remove_leftovers(state, conversation.uuid, std::move(found->paths));
  co_await std::move(removing);
  co_return expected<void>{};
}

asio::awaitable<expected<std::size_t>> expire_ephemeral_conversations(state_ptr state,
                                                                      std::size_t batch) {
  const auto idle_since = storage::now_millis() - state->config.ephemeral_retention.count();
  auto listed = read(state, [&](storage::connection& c) {
    return storage::expired_ephemeral_conversations(c, idle_since,
                                                    static_cast<std::int64_t>(batch));
  });
  if (!listed) {
    co_return tl::unexpected(listed.error());
  }
  std::size_t deleted = 0;
  for (const auto& conversation : *listed) {
    auto found = std::make_shared<deletion>();
    // Checked again in the write: a message or a run may have come since the read.
    auto pending = store(state, "expire ephemeral conversation",
                         [id = conversation.id, idle_since,
                          found](storage::connection& c) -> expected<std::int64_t> {
                           auto paths = storage::conversation_file_paths(c, id);
                           if (!paths) {
                             return tl::unexpected(paths.error());
                           }
                           auto gone = storage::delete_expired_ephemeral(c, id, idle_since);
                           if (!gone) {
                             return tl::unexpected(gone.error());
                           }
                           found->deleted = *gone;
                           found->paths = std::move(*paths);
                           return *gone ? 1 : 0;
                         });
    auto done = co_await std::move(pending);
    if (!done) {
      co_return tl::unexpected(done.error());
    }
    if (!found->deleted) {
      continue;
    }
    ++deleted;
    auto removing = remove_leftovers(state, conversation.uuid, std::move(found->paths));
    co_await std::move(removing);
  }
  co_return deleted;
}

void start_ephemeral_expiry(const state_ptr& state, asio::any_io_executor executor) {
  asio::co_spawn(executor, expiry_loop(state), [](const std::exception_ptr& failure) {
    if (failure) {
      log::error("ephemeral conversations: the expiry stopped by an exception");
    }
  });
}

} // namespace troupe::api
