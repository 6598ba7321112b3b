#pragma once

/// \file
/// Private to the channel service: the registry of live channel_thread actors, shared by
/// the service (channel_service.cpp, channel_recovery.cpp) and the actors, which leave it
/// when they passivate (channel_registry.cpp).

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "troupe/actors/channel_service.hpp"

namespace troupe::actors {

/// The live thread actors, and what spawning one needs. Every hand-over to a thread is a
/// mailbox push under `mutex`, and a thread leaves only under it with an empty mailbox
/// (`retire`), so a message handed over is never lost to a thread that passivates.
struct channel_service::thread_registry
    : std::enable_shared_from_this<channel_service::thread_registry> {
  struct key {
    storage::row_id channel = 0;
    std::string thread;
    friend auto operator<=>(const key&, const key&) = default;
  };
  std::mutex mutex;
  bool stopped = false;
  std::map<key, channel_thread_actor> threads;
  caf::actor_system* system = nullptr;
  /// Reset at stop (a thread spawned after it would hold the actor system up).
  std::shared_ptr<const channel_thread_context> context;
  /// Hands back what a thread that failed (ended with an error) held; set by the service,
  /// called without the mutex.
  std::function<void(storage::row_id, std::string)> on_failure;

  /// The thread of (channel, key), spawned when there is none; invalid once stopped.
  /// Called with `mutex` held.
  channel_thread_actor thread_locked(const std::shared_ptr<const live_channel>& channel,
                                     const std::string& thread_key);
  /// Pushes `message` (`inbound_atom`) or `entry` (`outbox_atom`) into the mailbox of the
  /// thread of its key; false once stopped.
  bool deliver(const std::shared_ptr<const live_channel>& channel, storage::inbound_record message);
  bool deliver_outbox(const std::shared_ptr<const live_channel>& channel,
                      const std::string& thread_key, storage::outbox_record entry);
};

} // namespace troupe::actors
