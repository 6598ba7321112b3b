// The shard scheduler: CAF's coordinator replaced by N shard threads, each running an Asio
// io_context and the actors homed on it, with its timers, its loop-lag probe and its stall
// watchdog (docs/execution-model.md). One file over 600 lines on purpose: the coordinator,
// the per-shard queues, the actor clock and the watchdog share private types and invariants
// (who may touch a shard's queue from which thread) that a split would have to export.

#include "troupe/actors/shard_scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <caf/actor_clock.hpp>
#include <caf/detail/set_thread_name.hpp>
#include <caf/execution_unit.hpp>
#include <caf/group.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/sec.hpp>
#include <caf/system_messages.hpp>

namespace troupe::actors {

namespace asio = boost::asio;

namespace {

class shard;

/// The shard whose thread is the calling thread (null elsewhere).
thread_local shard* current_shard = nullptr;
/// Set by `spawn_home`: the home of the actors this thread spawns next.
thread_local std::size_t spawn_override = shard_homed::unassigned;

/// `dynamic_cast<To*>(from)`, remembered per dynamic type. Every wake-up, resumption and
/// timer asks an actor for its home (shard_homed) or name (local_actor), and a cross-cast
/// through CAF's deep hierarchy cost about 4% of a request's instructions (callgrind). The
/// offset from a `From` subobject to a `To` subobject is fixed for a given most-derived
/// type, so it is computed once per type (per thread) and then added.
template <class To, class From> To* cached_cast(From* from) noexcept {
  if (from == nullptr) {
    return nullptr;
  }
  struct known {
    const std::type_info* type;
    std::ptrdiff_t offset; // none: the type has no `To`
  };
  static constexpr std::ptrdiff_t none = std::numeric_limits<std::ptrdiff_t>::min();
  thread_local std::vector<known> types;
  const auto* type = &typeid(*from);
  for (const auto& k : types) {
    if (k.type == type) {
      return k.offset == none ? nullptr
                              : reinterpret_cast<To*>(reinterpret_cast<char*>(from) + k.offset);
    }
  }
  auto* to = dynamic_cast<To*>(from);
  types.push_back(
      {type, to == nullptr ? none : reinterpret_cast<char*>(to) - reinterpret_cast<char*>(from)});
  return to;
}

// -- timers -------------------------------------------------------------------------

/// One pending timeout or delayed message of a shard. Timeouts hold their actor weakly:
/// a pending timer never keeps a finished actor alive (CAF's own clock holds it strongly
/// until the timer fires).
struct timer_entry {
  enum class kind { ordinary, multi, request, message, group_message };
  kind what = kind::ordinary;
  caf::actor_id owner = 0;
  caf::weak_actor_ptr self;
  caf::atom_value type{};
  std::uint64_t id = 0;
  caf::message_id request;
  caf::strong_actor_ptr receiver;
  caf::mailbox_element_ptr content;
  caf::group target;
  caf::strong_actor_ptr sender;
  caf::message group_content;
};

using time_point = caf::actor_clock::time_point;

/// The timers of one shard. Only its shard's thread touches it.
class shard_timers {
public:
  shard_timers(asio::io_context& io, caf::execution_unit& unit) : timer_(io), unit_(unit) {}

  void add(time_point at, std::unique_ptr<timer_entry> entry) {
    if (entry->what == timer_entry::kind::ordinary) {
      // A new receive timeout replaces the actor's previous one of the same type.
      cancel_if(entry->owner, [&](const timer_entry& e) {
        return e.what == timer_entry::kind::ordinary && e.type == entry->type;
      });
    }
    const auto owner = entry->owner;
    const auto it = schedule_.emplace(at, std::move(entry));
    if (owner != 0) {
      by_actor_.emplace(owner, it);
    }
    arm(at);
  }

  template <class Predicate> void cancel_if(caf::actor_id owner, Predicate matches) {
    // Destroyed after the maps are consistent again: an entry may hold the last reference
    // to an actor, whose cleanup cancels its timeouts here again.
    std::vector<std::unique_ptr<timer_entry>> cancelled;
    auto [first, last] = by_actor_.equal_range(owner);
    while (first != last) {
      if (matches(*first->second->second)) {
        cancelled.push_back(std::move(first->second->second));
        schedule_.erase(first->second);
        first = by_actor_.erase(first);
      } else {
        ++first;
      }
    }
  }

  void cancel_all_of(caf::actor_id owner) {
    std::vector<std::unique_ptr<timer_entry>> cancelled; // as in cancel_if
    auto [first, last] = by_actor_.equal_range(owner);
    for (auto it = first; it != last; ++it) {
      cancelled.push_back(std::move(it->second->second));
      schedule_.erase(it->second);
    }
    by_actor_.erase(first, last);
  }

  void clear() {
    // Moved out first: destroying an entry may release the last reference to an actor,
    // whose cleanup cancels its timeouts here again.
    auto schedule = std::move(schedule_);
    auto by_actor = std::move(by_actor_);
    schedule_.clear();
    by_actor_.clear();
    armed_ = time_point::max();
    ++generation_;
    timer_.cancel();
  }

  std::size_t pending() const noexcept {
    return schedule_.size();
  }

private:
  using schedule_map = std::multimap<time_point, std::unique_ptr<timer_entry>>;

  // One Asio timer per shard, re-armed only when a deadline earlier than the armed one
  // arrives (no timerfd syscall per timeout set).
  void arm(time_point at) {
    if (at >= armed_) {
      return;
    }
    armed_ = at;
    const auto generation = ++generation_;
    timer_.expires_at(at);
    timer_.async_wait([this, generation](const boost::system::error_code& ec) {
      if (ec || generation != generation_) {
        return;
      }
      fire();
    });
  }

  void fire() {
    armed_ = time_point::max();
    const auto now = std::chrono::steady_clock::now();
    while (!schedule_.empty() && schedule_.begin()->first <= now) {
      const auto first = schedule_.begin();
      if (const auto owner = first->second->owner; owner != 0) {
        auto [from, to] = by_actor_.equal_range(owner);
        for (auto it = from; it != to; ++it) {
          if (it->second == first) {
            by_actor_.erase(it);
            break;
          }
        }
      }
      // Out of the maps before it is shipped: what shipping (or releasing the entry's
      // actor references) does to the timers cannot touch it.
      auto node = schedule_.extract(first);
      ship(*node.mapped());
    }
    if (!schedule_.empty()) {
      arm(schedule_.begin()->first);
    }
  }

  void ship(timer_entry& e) {
    switch (e.what) {
      case timer_entry::kind::ordinary:
      case timer_entry::kind::multi:
        if (auto self = e.self.lock()) {
          auto* actor = self->get();
          actor->eq_impl(caf::make_message_id(), std::move(self), &unit_,
                         caf::timeout_msg{e.type, e.id});
        }
        break;
      case timer_entry::kind::request:
        if (auto self = e.self.lock()) {
          auto* actor = self->get();
          actor->eq_impl(e.request, std::move(self), &unit_, caf::sec::request_timeout);
        }
        break;
      case timer_entry::kind::message:
        if (e.receiver) {
          e.receiver->enqueue(std::move(e.content), &unit_);
        }
        break;
      case timer_entry::kind::group_message:
        if (e.target) {
          e.target->eq_impl(caf::make_message_id(), std::move(e.sender), &unit_,
                            std::move(e.group_content));
        }
        break;
    }
  }

  asio::steady_timer timer_;
  caf::execution_unit& unit_;
  schedule_map schedule_;
  std::unordered_multimap<caf::actor_id, schedule_map::iterator> by_actor_;
  time_point armed_ = time_point::max();
  std::uint64_t generation_ = 0;
};

// -- shards -------------------------------------------------------------------------

class shard_scheduler;

/// A cheap monotonic clock (a few ns, ~4 ms resolution): enough to see a stall.
std::int64_t coarse_now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

/// One shard: a thread running an io_context, the actors homed here, and their timers.
class shard final : public caf::execution_unit {
public:
  shard(caf::actor_system& system, shard_scheduler& owner, std::size_t index,
        std::size_t max_throughput, const shard_options& options)
      : caf::execution_unit(&system), owner_(owner), index_(index), max_throughput_(max_throughput),
        options_(options), work_(asio::make_work_guard(io_)), probe_(io_), timers_(io_, *this) {}

  void exec_later(caf::resumable* job) override;

  std::size_t index() const noexcept {
    return index_;
  }
  asio::io_context& io() noexcept {
    return io_;
  }
  shard_timers& timers() noexcept {
    return timers_;
  }
  bool on_this_thread() const noexcept {
    return current_shard == this;
  }

  void start() {
    thread_ = std::thread([this] { run(); });
    if (options_.lag_probe_interval.count() > 0 && options_.on_lag) {
      asio::post(io_, [this] { arm_probe(); });
    }
  }

  /// What holds the thread now, for the watchdog: since when (coarse ms, 0: idle) and
  /// the name of the actor being resumed (null: an Asio handler or nothing).
  struct busy_view {
    std::int64_t since_ms;
    const char* actor;
    std::int64_t probe_due_ms;
  };
  busy_view busy() const noexcept {
    return {busy_since_ms_.load(std::memory_order_relaxed),
            busy_actor_.load(std::memory_order_relaxed),
            probe_due_ms_.load(std::memory_order_relaxed)};
  }

  /// Called on this shard's thread: runs `job` here.
  void push_local(caf::resumable* job) {
    local_.push_back(job);
    schedule_drain();
  }

  /// Called on any thread: hands `job` to this shard.
  void push_remote(caf::resumable* job) {
    {
      const std::lock_guard lock(inbox_mutex_);
      inbox_.push_back(job);
      if (inbox_posted_) {
        return;
      }
      inbox_posted_ = true;
    }
    asio::post(io_, [this] { take_inbox(); });
  }

  /// Ends the thread once the io_context has nothing left (after the actors are gone).
  void stop() {
    asio::post(io_, [this] {
      probe_.cancel();
      probe_due_ms_.store(0, std::memory_order_relaxed);
      timers_.clear();
      work_.reset();
      io_.stop();
    });
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  /// After the thread ended: the jobs it never ran.
  std::vector<caf::resumable*> leftovers() {
    std::vector<caf::resumable*> out(local_.begin(), local_.end());
    local_.clear();
    const std::lock_guard lock(inbox_mutex_);
    out.insert(out.end(), inbox_.begin(), inbox_.end());
    inbox_.clear();
    return out;
  }

private:
  // The loop-lag probe: a timer that should fire every interval; how late it fires is
  // how long the thread was kept from its queue.
  void arm_probe() {
    const auto due = std::chrono::steady_clock::now() + options_.lag_probe_interval;
    probe_due_ms_.store(coarse_now_ms() + options_.lag_probe_interval.count(),
                        std::memory_order_relaxed);
    probe_.expires_at(due);
    probe_.async_wait([this, due](const boost::system::error_code& ec) {
      if (ec) {
        return;
      }
      const std::chrono::duration<double> lag = std::chrono::steady_clock::now() - due;
      options_.on_lag(index_, std::max(0.0, lag.count()));
      arm_probe();
    });
  }

  void run() {
    current_shard = this;
    caf::detail::set_thread_name("troupe.shard");
    system().thread_started();
    io_.run();
    system().thread_terminates();
    current_shard = nullptr;
  }

  void take_inbox() {
    std::vector<caf::resumable*> batch;
    {
      const std::lock_guard lock(inbox_mutex_);
      batch.swap(inbox_);
      inbox_posted_ = false;
    }
    local_.insert(local_.end(), batch.begin(), batch.end());
    drain();
  }

  void schedule_drain() {
    if (draining_ || drain_posted_) {
      return;
    }
    drain_posted_ = true;
    asio::post(io_, [this] {
      drain_posted_ = false;
      drain();
    });
  }

  // Resumes queued jobs, those they wake included, up to a batch; then Asio's handlers
  // (sockets, timers, posted work) get the thread before the next batch.
  void drain() {
    draining_ = true;
    for (std::size_t n = 0; n < drain_batch && !local_.empty(); ++n) {
      auto* job = local_.front();
      local_.pop_front();
      const auto* actor = cached_cast<caf::local_actor>(job);
      busy_actor_.store(actor != nullptr ? actor->name() : nullptr, std::memory_order_relaxed);
      busy_since_ms_.store(coarse_now_ms(), std::memory_order_relaxed);
      const auto outcome = job->resume(this, max_throughput_);
      busy_since_ms_.store(0, std::memory_order_relaxed);
      busy_actor_.store(nullptr, std::memory_order_relaxed);
      switch (outcome) {
        case caf::resumable::resume_later:
          local_.push_back(job);
          break;
        case caf::resumable::done:
        case caf::resumable::awaiting_message:
#if defined(__SANITIZE_THREAD__)
          // See `homed`'s destructor: this shard's accesses happen before the actor's end.
          if (auto* homed_job = dynamic_cast<shard_homed*>(job)) {
            __tsan_release(homed_job);
          }
#endif
          caf::intrusive_ptr_release(job);
          break;
        case caf::resumable::shutdown_execution_unit:
          break;
      }
    }
    draining_ = false;
    if (!local_.empty()) {
      schedule_drain();
    }
  }

  /// Jobs resumed in one go before Asio's handlers get the thread.
  static constexpr std::size_t drain_batch = 256;

  shard_scheduler& owner_;
  std::size_t index_;
  std::size_t max_throughput_;
  const shard_options& options_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer probe_;
  std::atomic<std::int64_t> probe_due_ms_{0};
  std::atomic<std::int64_t> busy_since_ms_{0};
  std::atomic<const char*> busy_actor_{nullptr};
  std::thread thread_;
  // Touched only by this shard's thread.
  std::deque<caf::resumable*> local_;
  bool draining_ = false;
  bool drain_posted_ = false;
  shard_timers timers_;
  // Jobs handed over by other threads.
  std::mutex inbox_mutex_;
  std::vector<caf::resumable*> inbox_;
  bool inbox_posted_ = false;
};

/// The clock of the shard scheduler: every call is carried out on the shard of the actor
/// it concerns (at once when the caller is that shard's thread, else posted there).
class shard_clock final : public caf::actor_clock {
public:
  explicit shard_clock(shard_scheduler& owner) : owner_(owner) {}

  void set_ordinary_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                            std::uint64_t id) override {
    auto e = timeout_entry(timer_entry::kind::ordinary, self);
    e->type = type;
    e->id = id;
    add(self, t, std::move(e));
  }

  void set_multi_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                         std::uint64_t id) override {
    auto e = timeout_entry(timer_entry::kind::multi, self);
    e->type = type;
    e->id = id;
    add(self, t, std::move(e));
  }

  void set_request_timeout(time_point t, caf::abstract_actor* self, caf::message_id id) override {
    auto e = timeout_entry(timer_entry::kind::request, self);
    e->request = id;
    add(self, t, std::move(e));
  }

  void cancel_ordinary_timeout(caf::abstract_actor* self, caf::atom_value type) override {
    on_home_of(self, [owner = self->id(), type](shard& s) {
      s.timers().cancel_if(owner, [type](const timer_entry& e) {
        return e.what == timer_entry::kind::ordinary && e.type == type;
      });
    });
  }

  void cancel_request_timeout(caf::abstract_actor* self, caf::message_id id) override {
    on_home_of(self, [owner = self->id(), id](shard& s) {
      s.timers().cancel_if(owner, [id](const timer_entry& e) {
        return e.what == timer_entry::kind::request && e.request == id;
      });
    });
  }

  void cancel_timeouts(caf::abstract_actor* self) override {
    on_home_of(self, [owner = self->id()](shard& s) { s.timers().cancel_all_of(owner); });
  }

  void schedule_message(time_point t, caf::strong_actor_ptr receiver,
                        caf::mailbox_element_ptr content) override {
    auto e = std::make_unique<timer_entry>();
    e->what = timer_entry::kind::message;
    // A delayed message an actor sends itself (its deadline, its idle check) is kept on
    // its home shard under its id, so it goes with the actor's timeouts when the actor
    // ends. Else a run that finished in a second stayed in memory, held by its own
    // deadline message, until the deadline (minutes) passed: the residue issue 13 measures.
    caf::abstract_actor* self = nullptr;
    if (receiver && content && content->sender == receiver) {
      self = caf::actor_cast<caf::abstract_actor*>(receiver);
      e->owner = self->id();
    }
    e->receiver = std::move(receiver);
    e->content = std::move(content);
    add(self, t, std::move(e));
  }

  void schedule_message(time_point t, caf::group target, caf::strong_actor_ptr sender,
                        caf::message content) override {
    auto e = std::make_unique<timer_entry>();
    e->what = timer_entry::kind::group_message;
    e->target = std::move(target);
    e->sender = std::move(sender);
    e->group_content = std::move(content);
    add(nullptr, t, std::move(e));
  }

  void cancel_all() override;

private:
  static std::unique_ptr<timer_entry> timeout_entry(timer_entry::kind what,
                                                    caf::abstract_actor* self) {
    auto e = std::make_unique<timer_entry>();
    e->what = what;
    e->owner = self->id();
    e->self = caf::weak_actor_ptr{self->ctrl()};
    return e;
  }

  void add(caf::abstract_actor* self, time_point t, std::unique_ptr<timer_entry> e);
  void on_home_of(caf::abstract_actor* self, std::function<void(shard&)> f);

  shard_scheduler& owner_;
};

class shard_scheduler final : public caf::scheduler::abstract_coordinator, public shard_set {
public:
  shard_scheduler(caf::actor_system& system, shard_options options)
      : caf::scheduler::abstract_coordinator(system), options_(options), clock_(*this) {}

  // -- caf::actor_system::module ---------------------------------------------------

  void init(caf::actor_system_config& cfg) override {
    abstract_coordinator::init(cfg);
    num_workers_ = options_.shards > 0
                       ? options_.shards
                       : std::max<std::size_t>(1, std::thread::hardware_concurrency());
    if (options_.max_throughput > 0) {
      max_throughput_ = options_.max_throughput;
    }
  }

  void start() override {
    shards_.reserve(num_workers_);
    for (std::size_t i = 0; i < num_workers_; ++i) {
      shards_.push_back(std::make_unique<shard>(system(), *this, i, max_throughput_, options_));
    }
    for (auto& s : shards_) {
      s->start();
    }
    if (options_.stall_warn.count() > 0 && options_.on_stall) {
      watchdog_ = std::thread([this] { watch(); });
    }
    // The printer (a detached utility actor).
    abstract_coordinator::start();
  }

  void stop() override {
    if (watchdog_.joinable()) {
      {
        const std::lock_guard lock(watchdog_mutex_);
        watchdog_stop_ = true;
      }
      watchdog_cv_.notify_all();
      watchdog_.join();
    }
    stop_actors();
    for (auto& s : shards_) {
      s->stop();
    }
    for (auto& s : shards_) {
      for (auto* job : s->leftovers()) {
        cleanup_and_release(job);
      }
    }
  }

  // -- caf::scheduler::abstract_coordinator ------------------------------------------

  /// A job scheduled from outside any execution unit (or by CAF with none at hand).
  void enqueue(caf::resumable* job) override {
    dispatch(job, current_shard != nullptr && &current_shard->system() == &system() ? current_shard
                                                                                    : nullptr);
  }

  caf::actor_clock& clock() noexcept override {
    return clock_;
  }

  // -- shard_set ----------------------------------------------------------------------

  std::size_t size() const noexcept override {
    return shards_.size();
  }

  asio::io_context::executor_type executor(std::size_t index) override {
    return shards_.at(index % shards_.size())->io().get_executor();
  }

  // -- routing ------------------------------------------------------------------------

  /// Runs `job` on its home shard; `from` is the shard of the calling thread, if any.
  void dispatch(caf::resumable* job, shard* from) {
    auto& home = *shards_[home_of(job, from)];
    if (&home == from) {
      home.push_local(job);
    } else {
      home.push_remote(job);
    }
  }

  /// The home shard index of `job` (assigning one on its first scheduling).
  std::size_t home_of(caf::resumable* job, shard* from) noexcept {
    if (auto* homed_job = cached_cast<shard_homed>(job)) {
      return resolve(*homed_job, from);
    }
    // CAF's own actors (and any actor without a home): placed by id.
    if (auto* actor = cached_cast<caf::abstract_actor>(job)) {
      return static_cast<std::size_t>(actor->id() % shards_.size());
    }
    return from != nullptr ? from->index() : 0;
  }

  /// The shard index of `self`: its home if it has one, else by id.
  shard& home_shard_of(caf::abstract_actor* self) noexcept {
    if (auto* homed_self = cached_cast<shard_homed>(self)) {
      return *shards_[resolve(*homed_self, current_here())];
    }
    return *shards_[static_cast<std::size_t>(self->id() % shards_.size())];
  }

  shard* current_here() const noexcept {
    return current_shard != nullptr && &current_shard->system() == &system_ ? current_shard
                                                                            : nullptr;
  }

  std::vector<std::unique_ptr<shard>>& shards() noexcept {
    return shards_;
  }

private:
  std::size_t resolve(shard_homed& job, shard* from) noexcept {
    const auto home = job.home_shard();
    if (home != shard_homed::unassigned) {
      return home % shards_.size();
    }
    const auto proposed =
        from != nullptr ? from->index()
                        : next_worker_.fetch_add(1, std::memory_order_relaxed) % shards_.size();
    return job.settle_home(proposed) % shards_.size();
  }

  // Looks at every shard each half `stall_warn`: an actor resumed longer ago than
  // `stall_warn`, or a lag probe overdue by as much while no actor runs (an Asio handler
  // holds the thread), is reported once per stall.
  void watch() {
    detail_set_watchdog_name();
    const auto warn = options_.stall_warn.count();
    std::vector<std::int64_t> reported(shards_.size(), 0);
    std::unique_lock lock(watchdog_mutex_);
    while (
        !watchdog_cv_.wait_for(lock, options_.stall_warn / 2, [this] { return watchdog_stop_; })) {
      const auto now = coarse_now_ms();
      for (std::size_t i = 0; i < shards_.size(); ++i) {
        const auto view = shards_[i]->busy();
        std::int64_t since = 0;
        const char* what = nullptr;
        if (view.since_ms != 0 && now - view.since_ms > warn) {
          since = view.since_ms;
          what = view.actor != nullptr ? view.actor : "actor";
        } else if (view.since_ms == 0 && view.probe_due_ms != 0 && now - view.probe_due_ms > warn) {
          since = view.probe_due_ms;
          what = "asio handler";
        }
        if (what != nullptr && reported[i] != since) {
          reported[i] = since;
          options_.on_stall(i, what, std::chrono::milliseconds(now - since));
        }
      }
    }
  }

  static void detail_set_watchdog_name() {
    caf::detail::set_thread_name("troupe.watchdog");
  }

  shard_options options_;
  shard_clock clock_;
  std::vector<std::unique_ptr<shard>> shards_;
  std::thread watchdog_;
  std::mutex watchdog_mutex_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
};

void shard::exec_later(caf::resumable* job) {
  owner_.dispatch(job, on_this_thread() ? this : nullptr);
}

void shard_clock::add(caf::abstract_actor* self, time_point t, std::unique_ptr<timer_entry> e) {
  auto* here = owner_.current_here();
  auto& target = self != nullptr ? owner_.home_shard_of(self)
                                 : (here != nullptr ? *here : *owner_.shards().front());
  if (&target == here) {
    target.timers().add(t, std::move(e));
    return;
  }
  asio::post(target.io(), [&target, t, entry = std::move(e)]() mutable {
    target.timers().add(t, std::move(entry));
  });
}

void shard_clock::on_home_of(caf::abstract_actor* self, std::function<void(shard&)> f) {
  auto& target = owner_.home_shard_of(self);
  if (&target == owner_.current_here()) {
    f(target);
    return;
  }
  asio::post(target.io(), [&target, f = std::move(f)] { f(target); });
}

void shard_clock::cancel_all() {
  for (auto& s : owner_.shards()) {
    asio::post(s->io(), [&target = *s] { target.timers().clear(); });
  }
}

} // namespace

// -- public interface ---------------------------------------------------------------

shard_homed::shard_homed() noexcept
    : home_(spawn_override != unassigned
                ? spawn_override
                : (current_shard != nullptr ? current_shard->index() : unassigned)) {
#if defined(__SANITIZE_THREAD__)
  // What the spawner made before spawning happens before the actor's first run
  // (homed<Base>::resume acquires on this address).
  __tsan_release(this);
#endif
}

std::size_t shard_homed::settle_home(std::size_t proposed) noexcept {
  auto expected = unassigned;
  if (home_.compare_exchange_strong(expected, proposed, std::memory_order_relaxed)) {
    return proposed;
  }
  return expected;
}

void use_shard_scheduler(caf::actor_system_config& config, shard_options options) {
  config.module_factories.push_back(
      [options](caf::actor_system& system) -> caf::actor_system::module* {
        return new shard_scheduler(system, options);
      });
}

std::size_t shard_set::shard_for(std::string_view key) const noexcept {
  // FNV-1a: stable across runs (std::hash need not be).
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : key) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return static_cast<std::size_t>(h % std::max<std::size_t>(1, size()));
}

std::optional<std::size_t> shard_set::current() noexcept {
  if (current_shard == nullptr) {
    return std::nullopt;
  }
  return current_shard->index();
}

shard_set* shards_of(caf::actor_system& system) noexcept {
  return cached_cast<shard_set>(&system.scheduler());
}

std::optional<std::size_t> home_shard_of(const caf::strong_actor_ptr& actor) noexcept {
  if (!actor) {
    return std::nullopt;
  }
  const auto* homed_one = cached_cast<shard_homed>(actor->get());
  if (homed_one == nullptr || homed_one->home_shard() == shard_homed::unassigned) {
    return std::nullopt;
  }
  return homed_one->home_shard();
}

spawn_home::spawn_home(std::size_t shard) noexcept : previous_(spawn_override) {
  spawn_override = shard;
}

spawn_home::~spawn_home() {
  spawn_override = previous_;
}

} // namespace troupe::actors
