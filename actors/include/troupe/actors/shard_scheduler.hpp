#pragma once

/// \file
/// Shards: N threads, each running one Asio `io_context` *and* the CAF actors homed on
/// it (issue 13, design.md "Execution model"). It replaces CAF's work-sharing scheduler
/// and its clock thread:
/// - an actor is homed on one shard for its whole life and is only ever resumed on that
///   shard's thread, so a message between two actors of one shard is a queue push on
///   the same thread, not a futex wake-up;
/// - timeouts, request timeouts and delayed messages run on the shard's own Asio timer
///   (one timer per shard, re-armed only when an earlier deadline arrives); they hold
///   the actor weakly, so a pending timer never keeps a finished actor alive;
/// - Asio work posted to a shard's executor (sockets, curl transfers, coroutines) runs
///   on the same thread as the shard's actors, between actor resumptions.
///
/// Where an actor lives: an actor spawned by an actor (or by a handler) running on a
/// shard is homed on that shard, so a conversation's runs, tool calls and journal stay
/// together; `spawn_on(system, shard, …)` homes it explicitly; any other spawn goes
/// round-robin. Only actors whose class derives from `shard_homed` (`homed_actor<State>`
/// and `homed_typed_actor<State, Handle>`) carry a home; CAF's own utility actors are
/// placed by their id.
///
/// Install with `use_shard_scheduler(config, options)` before the actor system is built.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/asio/io_context.hpp>
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif
#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

namespace troupe::actors {

/// The home of an actor: the index of the shard it runs on, fixed at construction.
class shard_homed {
public:
  /// No home yet: the scheduler assigns one at the actor's first scheduling.
  static constexpr std::size_t unassigned = std::numeric_limits<std::size_t>::max();

  shard_homed() noexcept;
  shard_homed(const shard_homed&) = delete;
  shard_homed& operator=(const shard_homed&) = delete;

  /// The shard index (`unassigned` until the actor was first scheduled).
  std::size_t home_shard() const noexcept {
    return home_.load(std::memory_order_relaxed);
  }

  /// Sets the home when none is set yet; returns the home in force.
  std::size_t settle_home(std::size_t proposed) noexcept;

protected:
  ~shard_homed() = default;

private:
  std::atomic<std::size_t> home_;
};

/// An actor base (`caf::event_based_actor`, or a typed actor's `base`) with a home shard.
template <class Base> class homed : public Base, public shard_homed {
public:
  using Base::Base;

#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer builds only (preset tsan). CAF 0.17's mailbox and scheduler run in
  // its uninstrumented library, so TSan would see no happens-before from a message's
  // sender (or the actor's spawner, see shard_homed's constructor) to the actor's next
  // run, nor to the coroutines that run starts. These make the edge visible: every
  // enqueue releases, every resume acquires, on the actor's address.
  using Base::enqueue;
  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) override {
    __tsan_release(static_cast<shard_homed*>(this));
    Base::enqueue(std::move(what), host);
  }
  caf::resumable::resume_result resume(caf::execution_unit* host,
                                       std::size_t max_throughput) override {
    __tsan_acquire(static_cast<shard_homed*>(this));
    return Base::resume(host, max_throughput);
  }
  // The last reference may go on another thread than the shard that ran the actor last
  // (a coroutine drops its handle); the counts are decremented inside libcaf_core.so, so
  // the shard releases on the address before it lets go of the actor
  // (`shard_set`'s drain) and the destructor, which runs before the storage is freed,
  // acquires.
  ~homed() override {
    __tsan_acquire(static_cast<shard_homed*>(this));
  }
#endif
};

/// The self pointer type of a stateful, untyped actor homed on a shard.
template <class State>
using homed_actor = caf::stateful_actor<State, homed<caf::event_based_actor>>;

/// The self pointer type of a stateful typed actor (handle type `Handle`) homed on a shard.
template <class State, class Handle>
using homed_typed_actor = caf::stateful_actor<State, homed<typename Handle::base>>;

struct shard_options {
  /// Shards (threads); 0: one per core.
  std::size_t shards = 0;
  /// Messages an actor handles before it yields its shard to the next one; 0: CAF's
  /// `scheduler.max-throughput`.
  std::size_t max_throughput = 0;
  /// The loop-lag probe: every `lag_probe_interval` each shard arms a timer and reports
  /// how late it fired to `on_lag` (on the shard's thread, so keep it cheap: a histogram
  /// observation). Zero interval or no callback: no probe.
  std::chrono::milliseconds lag_probe_interval{100};
  std::function<void(std::size_t shard, double lag_seconds)> on_lag;
  /// The stall watchdog: when one thing holds a shard's thread longer than `stall_warn`,
  /// `on_stall` is told (from the watchdog's own thread) what it is — the actor's name,
  /// or "asio handler" for other work — and for how long, once per stall. Zero or no
  /// callback: no watchdog.
  std::chrono::milliseconds stall_warn{0};
  std::function<void(std::size_t shard, std::string_view what, std::chrono::milliseconds held)>
      on_stall;
};

/// Installs the shard scheduler into `config`: the actor system built from it runs its
/// scheduled actors on the shards.
void use_shard_scheduler(caf::actor_system_config& config, shard_options options);

/// The shards of a running actor system that uses the shard scheduler.
class shard_set {
public:
  virtual ~shard_set() = default;

  /// How many shards there are.
  virtual std::size_t size() const noexcept = 0;

  /// The executor of shard `index`: what is posted there runs on that shard's thread.
  virtual boost::asio::io_context::executor_type executor(std::size_t index) = 0;

  /// The shard a key (e.g. a conversation id) maps to: stable for the life of the
  /// process for a given shard count.
  std::size_t shard_for(std::string_view key) const noexcept;

  /// The index of the shard running the calling thread, if it is a shard thread of
  /// any actor system.
  static std::optional<std::size_t> current() noexcept;
};

/// The shards of `system`, or null when it runs on another scheduler.
shard_set* shards_of(caf::actor_system& system) noexcept;

/// The home shard of `actor`, when it is a homed actor that has one.
std::optional<std::size_t> home_shard_of(const caf::strong_actor_ptr& actor) noexcept;

/// The home shard of the actor behind `handle` (any CAF handle), when it has one.
template <class Handle> std::optional<std::size_t> home_shard_of(const Handle& handle) noexcept {
  return home_shard_of(caf::actor_cast<caf::strong_actor_ptr>(handle));
}

/// While it lives, actors spawned by this thread are homed on `shard`.
class spawn_home {
public:
  explicit spawn_home(std::size_t shard) noexcept;
  ~spawn_home();
  spawn_home(const spawn_home&) = delete;
  spawn_home& operator=(const spawn_home&) = delete;

private:
  std::size_t previous_;
};

/// Spawns an actor homed on `shard` (the arguments are those of `caf::actor_system::spawn`).
template <class... Ts> auto spawn_on(caf::actor_system& system, std::size_t shard, Ts&&... xs) {
  const spawn_home home(shard);
  return system.spawn(std::forward<Ts>(xs)...);
}

/// Spawns an actor homed on `shard` when there is one, else as `caf::actor_system::spawn`
/// places it (the calling shard, or round-robin; any shard under another scheduler).
template <class... Ts>
auto spawn_maybe_on(caf::actor_system& system, std::optional<std::size_t> shard, Ts&&... xs) {
  if (shard) {
    return spawn_on(system, *shard, std::forward<Ts>(xs)...);
  }
  return system.spawn(std::forward<Ts>(xs)...);
}

} // namespace troupe::actors
