// The node's life cycle: construction (the actor system's scheduler), stop, wait and
// destruction, and its accessors. Starting it is in node_start.cpp.

#include "node_impl.hpp"

#include <algorithm>

namespace troupe::actors {

namespace {

unsigned scheduler_threads(const actor_settings& s) {
  if (s.scheduler_threads > 0) {
    return s.scheduler_threads;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

bool uses_shards(const actor_settings& s) {
  return s.scheduler_policy == "shards";
}

std::size_t shard_count(const actor_settings& s) {
  if (s.shards > 0) {
    return s.shards;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

/// Returns once every shard has run a handler posted now (or after `limit`): what a shard
/// did before, coroutines that are not actors included (a tool's process wait), happens
/// before what the caller does next, through a mutex that ThreadSanitizer sees (CAF's
/// own count of running actors is kept in its uninstrumented library).
void wait_for_each_shard(shard_set& shards, std::chrono::milliseconds limit) {
  struct barrier {
    std::mutex mutex;
    std::condition_variable passed;
    std::size_t left = 0;
  };
  auto b = std::make_shared<barrier>();
  b->left = shards.size();
  for (std::size_t k = 0; k < shards.size(); ++k) {
    asio::post(shards.executor(k), [b] {
      const std::lock_guard lock(b->mutex);
      --b->left;
      b->passed.notify_all();
    });
  }
  std::unique_lock lock(b->mutex);
  b->passed.wait_for(lock, limit, [&] { return b->left == 0; });
}

} // namespace

node::impl::impl(settings s, node_frontend f)
    : config(std::move(s)), frontend(std::move(f)),
      blocking(std::make_shared<tools::blocking_pool>(config.blocking.threads)) {
  caf_config.set("scheduler.max-throughput", config.actors.max_throughput);
  if (uses_shards(config.actors)) {
    use_shards();
    return;
  }
  // caf::atom takes only literals; settings already restricted the policy to these.
  caf_config.set("scheduler.policy", config.actors.scheduler_policy == "stealing"
                                         ? caf::atom("stealing")
                                         : caf::atom("sharing"));
  caf_config.set("scheduler.max-threads", static_cast<size_t>(scheduler_threads(config.actors)));
}

void node::impl::use_shards() {
  const auto count = shard_count(config.actors);
  for (std::size_t k = 0; k < count; ++k) {
    lag_histograms.push_back(&metrics.histogram(
        "troupe_shard_loop_lag_seconds",
        "How late each shard's loop-lag probe timer fired: how long its thread was kept "
        "from its queue",
        {{"shard", std::to_string(k)}}));
    shard_reads.push_back(&metrics.counter(
        "troupe_shard_sqlite_reads_total",
        "SQLite reads made on a shard's thread, where a slow one holds every actor of the shard "
        "(the routes that read much read on the blocking pool instead)",
        {{"shard", std::to_string(k)}}));
  }
  shard_options options;
  options.shards = count;
  options.max_throughput = config.actors.max_throughput;
  options.on_lag = [histograms = &lag_histograms](std::size_t shard, double lag_seconds) {
    if (shard < histograms->size()) {
      (*histograms)[shard]->observe(lag_seconds);
    }
  };
  options.stall_warn = config.actors.lag_warn;
  options.on_stall = [](std::size_t shard, std::string_view what, std::chrono::milliseconds held) {
    log::warn("shard {} was held for {} ms by {} (over actors.lag_warn_ms)", shard, held.count(),
              what);
  };
  use_shard_scheduler(caf_config, std::move(options));
}

void node::impl::finish_stop() {
  if (channels && !channels_stopping) {
    channels_stopping = true;
    // The channels' threads record the sends they have in flight through the store
    // writer, so they stop first; on a thread of their own, since the drain waits on
    // actors and transfers that may live on this (shard) thread.
    // Assigned under the mutex: the thread marks the node stopped under it, so wait()
    // finds it joinable.
    std::lock_guard lock(mutex);
    channel_stopper = std::thread([this] {
      channels->stop();
      finish_stop();
    });
    return;
  }
  if (chat) {
    // Conversations end and cancel their runs (which kill their tools' processes).
    chat->stop();
  }
  if (mcp) {
    // Then the MCP servers' sessions end (stdio servers are stopped).
    mcp->stop(std::chrono::seconds(5));
  }
  if (memory) {
    memory->stop();
  }
  if (health) {
    caf::anon_send_exit(health, caf::exit_reason::user_shutdown);
  }
  if (store_writer) {
    // The writer commits what is queued before it exits.
    caf::anon_send_exit(store_writer, caf::exit_reason::user_shutdown);
  }
  work.reset();
  io.stop();
  {
    std::lock_guard lock(mutex);
    stopped = true;
  }
  stopped_cv.notify_all();
}

void node::impl::release_shard_io() {
  if (shards == nullptr) {
    return;
  }
  detail::run_there(shards->executor(0), [this] {
    signals.reset();
    skill_watch.reset();
    demo_model.reset();
  });
  for (std::size_t k = 0; k < shard_http.size(); ++k) {
    detail::run_there(shards->executor(k), [this, k] { shard_http[k].reset(); });
  }
}

void node::impl::join_io_threads() {
  for (auto& t : io_threads) {
    if (t.joinable()) {
      t.join();
    }
  }
  io_threads.clear();
}

node::node(settings config, node_frontend frontend)
    : impl_(std::make_unique<impl>(std::move(config), std::move(frontend))) {}

node::~node() {
  if (impl_->channel_stopper.joinable()) {
    impl_->channel_stopper.join();
  }
  if (!impl_->io_threads.empty()) {
    bool stopped = false;
    {
      std::lock_guard lock(impl_->mutex);
      stopped = impl_->stopped;
    }
    if (!stopped) {
      impl_->work.reset();
      impl_->io.stop();
    }
    impl_->join_io_threads();
  }
  if (impl_->shards != nullptr && impl_->server) {
    // Connections end while the shards still run (the server's acceptors live there).
    bool stopped = false;
    {
      std::lock_guard lock(impl_->mutex);
      stopped = impl_->stopped;
    }
    if (!stopped) {
      auto closed = std::make_shared<std::promise<void>>();
      auto gone = closed->get_future();
      impl_->server->stop(std::chrono::milliseconds(0), [closed] { closed->set_value(); });
      gone.wait_for(std::chrono::seconds(5));
    }
  }
  impl_->server.reset();
  if (impl_->channels) {
    impl_->channels->stop();
  }
  if (impl_->chat) {
    impl_->chat->stop();
  }
  if (impl_->system && impl_->health) {
    caf::anon_send_exit(impl_->health, caf::exit_reason::user_shutdown);
  }
  impl_->health = nullptr;
  if (impl_->system && impl_->store_writer) {
    caf::anon_send_exit(impl_->store_writer, caf::exit_reason::user_shutdown);
  }
  impl_->store_writer = nullptr;
  if (impl_->store_facade) {
    impl_->store_facade->close();
  }
  if (impl_->health_facade) {
    impl_->health_facade->close();
  }
  if (impl_->chat_facade) {
    impl_->chat_facade->close();
  }
  if (impl_->shards == nullptr) {
    impl_->chat.reset();
  }
  if (impl_->mcp) {
    impl_->mcp->stop(std::chrono::seconds(5));
  }
  if (impl_->memory) {
    impl_->memory->stop();
  }
  if (impl_->shards != nullptr) {
    impl_->system->await_all_actors_done();
    wait_for_each_shard(*impl_->shards, std::chrono::seconds(5));
    // Only now: until every actor has ended, a registry shard may still call the chat
    // service's factory and a run may still use what its options hold.
    impl_->chat.reset();
    impl_->release_shard_io();
  }
  impl_->system.reset(); // waits for every actor to finish
  if (impl_->http) {
    // Let cancelled LLM streams and tool calls unwind on this thread, then drop the
    // client before the io_context it runs on.
    impl_->io.restart();
    impl_->io.run_for(std::chrono::milliseconds(500));
    impl_->http.reset();
  }
}

void node::stop() {
  auto& d = *impl_;
  int requests = 0;
  {
    std::lock_guard lock(d.mutex);
    if (d.stopped) {
      return;
    }
    requests = ++d.stop_requests;
  }
  if (!d.server) {
    d.finish_stop();
    return;
  }
  if (requests == 1) {
    log::info("draining: up to {} ms for in-flight requests and streams",
              d.config.server.shutdown_timeout.count());
    d.server->stop(d.config.server.shutdown_timeout, [this] { impl_->finish_stop(); });
  } else {
    log::warn("second stop request: closing every connection now");
    d.server->stop(std::chrono::milliseconds(0), [] {});
  }
}

void node::wait() {
  std::unique_lock lock(impl_->mutex);
  impl_->stopped_cv.wait(lock, [this] { return impl_->stopped; });
  lock.unlock();
  if (impl_->channel_stopper.joinable()) {
    impl_->channel_stopper.join();
  }
  impl_->join_io_threads();
}

int node::run() {
  auto bound = start();
  if (!bound) {
    log::error("{}", bound.error().message);
    return 1;
  }
  log::info("troupe listening on http://{} (data dir {})", bound->to_string(),
            impl_->config.data_dir.string());
  wait();
  log::info("stopped");
  return 0;
}

bool node::demo_mode() const noexcept {
  return impl_->demo;
}

void node::add_tool_source(std::shared_ptr<const tools::tool_source> source) {
  impl_->tool_sources.push_back(std::move(source));
}

std::shared_ptr<tools::blocking_pool> node::blocking_pool() const {
  return impl_->blocking;
}

const settings& node::config() const noexcept {
  return impl_->config;
}

caf::actor_system& node::system() {
  return *impl_->system;
}

asio::io_context& node::io() {
  return impl_->io;
}

metrics_registry& node::metrics() {
  return impl_->metrics;
}

store_writer_actor node::store_writer() const {
  return impl_->store_writer;
}

std::shared_ptr<storage::read_pool> node::read_pool() const {
  return impl_->db_reads;
}

} // namespace troupe::actors
