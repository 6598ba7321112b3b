// Recovery of a channel service: at start, what a stop (or a crash) left is handed back
// to the threads (messages not answered, parts not sent, final edits not made), and a
// thread that fails has the same done for its key at once.

#include "channel_registry.hpp"
#include "troupe/actors/bridge.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

boost::asio::awaitable<std::size_t> channel_service::recover() {
  auto recovering = recover_where(std::nullopt);
  const auto handed = co_await std::move(recovering);
  // Channels that talk to their platform beyond the inbound route (Telegram's getUpdates
  // loop or setWebhook, Slack's auth.test) go live now, after what the stop left.
  auto all = options_.reads->with([](storage::connection& c) { return storage::list_channels(c); });
  if (all) {
    for (const auto& record : *all) {
      if (record.enabled && record.kind != "webhook") {
        activate(record.name);
      }
    }
  }
  co_return handed;
}

boost::asio::awaitable<std::size_t> channel_service::recover_thread(storage::row_id channel,
                                                                    std::string thread_key) {
  auto recovering = recover_where(std::pair{channel, std::move(thread_key)});
  co_return co_await std::move(recovering);
}

boost::asio::awaitable<std::size_t>
channel_service::recover_where(std::optional<std::pair<storage::row_id, std::string>> only) {
  std::size_t handed = 0;
  const auto mine = [&](storage::row_id channel, const std::string& key) {
    return !only || (only->first == channel && only->second == key);
  };
  const auto thread_of = [&](storage::row_id thread_id) -> std::optional<std::string> {
    auto row = options_.reads->with(
        [&](storage::connection& c) { return storage::find_channel_thread_by_id(c, thread_id); });
    if (!row) {
      return std::nullopt;
    }
    return row->thread_key;
  };
  if (!only) {
    // Parts whose send was under way: the platform may have them. Sent again (with the
    // same idempotency key where the platform takes one); see docs/channels.md.
    auto sending = options_.reads->with(
        [](storage::connection& c) { return storage::list_outbox_with_status(c, "sending"); });
    if (sending) {
      for (const auto& e : *sending) {
        auto op = storage::make_write(
            "outbox entry back to pending", [id = e.id](storage::connection& c) {
              return c.run(
                  "UPDATE outbox SET status = 'pending' WHERE id = ? AND status = 'sending'", id);
            });
        auto writing = write(system_, writer(), std::move(op), store_write_timeout);
        co_await std::move(writing);
      }
    }
  }
  // Parts to send, then the final edits owed by previews that were sent.
  for (const bool edits : {false, true}) {
    auto entries = options_.reads->with([&](storage::connection& c) {
      return edits ? storage::list_outbox_edits(c) : storage::list_outbox_with_status(c, "pending");
    });
    if (!entries) {
      continue;
    }
    for (auto& e : *entries) {
      const auto key = thread_of(e.thread_id);
      auto live = channel_by_id(e.channel_id);
      if (!key || !live || !mine(e.channel_id, *key)) {
        continue;
      }
      if (registry_->deliver_outbox(*live, *key, std::move(e))) {
        ++handed;
      }
    }
  }
  for (const auto* status : {"received", "processing"}) {
    auto waiting = options_.reads->with([&](storage::connection& c) {
      return storage::list_inbound(c, only ? only->first : 0, status);
    });
    if (!waiting) {
      log::error("channel recovery: the journal cannot be read: {}", waiting.error().message);
      continue;
    }
    for (auto& m : *waiting) {
      if (!mine(m.channel_id, m.thread_key)) {
        continue;
      }
      auto live = channel_by_id(m.channel_id);
      if (!live) {
        log::warn("channel recovery: message {} of channel {} left: {}", m.platform_message_id,
                  m.channel_id, live.error().message);
        continue;
      }
      // Accepted before the stop (its run row exists): wait for that run, never a second.
      auto run = options_.reads->with(
          [&](storage::connection& c) { return storage::find_run_by_uuid(c, m.run_uuid); });
      if (run) {
        m.status = "processing";
      }
      if (registry_->deliver(*live, std::move(m))) {
        ++handed;
      }
    }
  }
  co_return handed;
}

} // namespace troupe::actors
