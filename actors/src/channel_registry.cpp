// The registry of a channel service's live thread actors: a thread is spawned on the
// first hand-over of its key, every hand-over is a mailbox push under the registry's
// mutex, and a thread leaves only under that mutex with an empty mailbox, so nothing
// handed over is lost to a thread that passivates; a thread that fails has what it held
// handed to a new one (channel_recovery.cpp).

#include "channel_registry.hpp"

#include "troupe/runtime/log.hpp"

namespace troupe::actors {

channel_thread_actor
channel_service::thread_registry::thread_locked(const std::shared_ptr<const live_channel>& channel,
                                                const std::string& thread_key) {
  if (stopped || !context) {
    return {};
  }
  auto& slot = threads[thread_registry::key{channel->record.id, thread_key}];
  if (!slot) {
    channel_thread_spec spec;
    spec.channel = channel;
    spec.thread_key = thread_key;
    spec.context = context;
    const thread_registry::key k{channel->record.id, thread_key};
    spec.on_exit = [weak = weak_from_this(), k](const caf::actor_addr& gone,
                                                const caf::error& reason) {
      auto reg = weak.lock();
      if (!reg) {
        return;
      }
      std::function<void(storage::row_id, std::string)> recover;
      {
        std::lock_guard l(reg->mutex);
        if (auto it = reg->threads.find(k);
            it != reg->threads.end() && it->second.address() == gone) {
          reg->threads.erase(it);
        }
        if (reason && reason != caf::exit_reason::user_shutdown && !reg->stopped) {
          recover = reg->on_failure;
        }
      }
      if (recover) {
        log::error("channel thread {} failed ({}): what it held goes to a new one", k.thread,
                   caf::to_string(reason));
        recover(k.channel, k.thread);
      }
    };
    // Passivation: the thread leaves the registry only with an empty mailbox, under the
    // registry's mutex, which every hand-over holds while it enqueues: nothing handed to
    // it is lost, and no second thread of the key takes messages meanwhile.
    spec.retire = [weak = weak_from_this(), k](const caf::actor_addr& leaving,
                                               const std::function<bool()>& empty) {
      auto reg = weak.lock();
      if (!reg) {
        return true;
      }
      std::lock_guard l(reg->mutex);
      if (!empty()) {
        return false;
      }
      if (auto it = reg->threads.find(k);
          it != reg->threads.end() && it->second.address() == leaving) {
        reg->threads.erase(it);
      }
      return true;
    };
    slot = spawn_channel_thread(*system, std::move(spec));
  }
  return slot;
}

bool channel_service::thread_registry::deliver(const std::shared_ptr<const live_channel>& channel,
                                               storage::inbound_record message) {
  std::lock_guard lock(mutex);
  auto target = thread_locked(channel, message.thread_key);
  if (!target) {
    return false;
  }
  caf::anon_send(target, inbound_atom::value, std::move(message));
  return true;
}

bool channel_service::thread_registry::deliver_outbox(
    const std::shared_ptr<const live_channel>& channel, const std::string& thread_key,
    storage::outbox_record entry) {
  std::lock_guard lock(mutex);
  auto target = thread_locked(channel, thread_key);
  if (!target) {
    return false;
  }
  caf::anon_send(target, outbox_atom::value, std::move(entry));
  return true;
}

} // namespace troupe::actors
