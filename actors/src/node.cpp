#include "troupe/actors/node.hpp"

#include <condition_variable>
#include <csignal>
#include <future>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <caf/all.hpp>

#include "troupe/actors/channel_service.hpp"
#include "troupe/actors/chat_service.hpp"
#include "troupe/actors/demo_model.hpp"
#include "troupe/actors/health.hpp"
#include "troupe/actors/memory_service.hpp"
#include "troupe/actors/memory_tools.hpp"
#include "troupe/actors/service_facades.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/catalog_sync.hpp"
#include "troupe/storage/channels.hpp"
#include "troupe/storage/data_dir.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/secret_box.hpp"
#include "troupe/storage/wal_checkpointer.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/control_tools.hpp"
#include "troupe/tools/memory_tool_descriptors.hpp"
#include "troupe/tools/tool_resolver.hpp"

namespace troupe::actors {

namespace asio = boost::asio;

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

/// Runs `f` on `executor`'s thread and waits for it (never call it from that thread).
template <class F> void run_there(const asio::io_context::executor_type& executor, F f) {
  std::promise<void> done;
  auto finished = done.get_future();
  asio::post(executor, [&f, &done] {
    f();
    done.set_value();
  });
  finished.wait();
}

// The node's `run_blocking`: `job` on the blocking pool. A coroutine function with its
// arguments by value (a capturing coroutine lambda would dangle at its first suspension).
asio::awaitable<expected<void>> run_on_pool(std::shared_ptr<tools::blocking_pool> pool,
                                            std::function<expected<void>()> job) {
  // Removing a large workspace takes a while; the job goes on to the end regardless.
  constexpr auto deadline = std::chrono::minutes(5);
  // The job named and the awaitable awaited as a named value: GCC 12 destroys some
  // temporaries of a co_await full-expression twice (here it freed the job's captures twice).
  auto on_pool = [job = std::move(job)](const tools::job_control&) { return job(); };
  auto running = pool->run(std::move(on_pool), deadline);
  auto ran = co_await std::move(running);
  if (!ran) {
    co_return tl::unexpected(ran.error());
  }
  co_return std::move(*ran);
}

} // namespace

struct node::impl {
  impl(settings s, node_frontend f)
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

  // Policy "shards": the actor system runs on the shard scheduler, whose threads also
  // run the network I/O (docs/execution-model.md). Each shard's loop lag goes into its
  // series of troupe_shard_loop_lag_seconds; a shard held past actors.lag_warn_ms is
  // logged with the name of what held it.
  void use_shards() {
    const auto count = shard_count(config.actors);
    for (std::size_t k = 0; k < count; ++k) {
      lag_histograms.push_back(&metrics.histogram(
          "troupe_shard_loop_lag_seconds",
          "How late each shard's loop-lag probe timer fired: how long its thread was kept "
          "from its queue",
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
    options.on_stall = [](std::size_t shard, std::string_view what,
                          std::chrono::milliseconds held) {
      log::warn("shard {} was held for {} ms by {} (over actors.lag_warn_ms)", shard, held.count(),
                what);
    };
    use_shard_scheduler(caf_config, std::move(options));
  }

  settings config;
  node_frontend frontend;
  // The tools' blocking work (file work, `blocking.threads` threads), and the tool
  // sources runs resolve from after the built-in one (add_tool_source).
  std::shared_ptr<tools::blocking_pool> blocking;
  std::vector<std::shared_ptr<const tools::tool_source>> tool_sources;
  metrics_registry metrics;
  std::optional<storage::data_dir_lock> data_dir;
  caf::actor_system_config caf_config;
  std::unique_ptr<caf::actor_system> system;
  // Policy "shards": the shards of `system` (null under CAF's own schedulers) and one
  // loop-lag series per shard.
  shard_set* shards = nullptr;
  std::vector<metric_histogram*> lag_histograms;
  // Policy "sharing"/"stealing": the io_context the io threads run.
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  std::unique_ptr<net::http_server> server;
  health_actor health;
  // On `io`, or on shard 0.
  std::optional<asio::signal_set> signals;
  // The in-process mock-llm serving the demo model, when it is in use.
  std::unique_ptr<mock::mock_llm_server> demo_model;
  bool demo = false;
  // Storage: the writer connection goes to the store_writer; reads use the pool.
  std::shared_ptr<storage::connection> db_writer;
  std::unique_ptr<storage::wal_checkpointer> checkpointer;
  std::shared_ptr<storage::read_pool> db_reads;
  std::shared_ptr<storage::catalog_cache> catalog_rows;
  // Seals provider keys at rest (`<data-dir>/secret.key`).
  std::shared_ptr<const storage::secret_box> secrets;
  store_writer_actor store_writer;
  // The facades the routes use. Their actor handles are dropped before the actor system
  // goes (a detached actor's thread ends only when the last handle to it is gone, and
  // the routes may outlive the server object in handlers the stopped io_context never
  // ran).
  std::shared_ptr<store_writer_facade> store_facade;
  /// The store writer's back-pressure (`storage.writer_max_queue`).
  std::shared_ptr<write_backlog> writer_backlog;
  std::shared_ptr<health_actor_facade> health_facade;
  std::shared_ptr<chat_service_facade> chat_facade;
  // Durable memory: the per-user memory writers, recall for runs, the memory tools.
  std::shared_ptr<memory_service> memory;
  // Agent runs: the LLM client (on its own strand of the io_context), or one per shard,
  // and the service that owns the conversations.
  std::unique_ptr<net::http_client> http;
  std::vector<std::unique_ptr<net::http_client>> shard_http;
  std::shared_ptr<chat_service> chat;
  std::shared_ptr<channel_service> channels;

  std::mutex mutex;
  std::condition_variable stopped_cv;
  int stop_requests = 0;
  bool stopped = false;
  // Stops the channels, then finishes the stop (see finish_stop); joined by wait().
  std::thread channel_stopper;
  bool channels_stopping = false;

  void finish_stop() {
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

  // With no [[providers]] and [[agents]] in the config, declares an "assistant" agent:
  // on OpenAI when OPENAI_API_KEY is set, else on the scripted demo model, served here
  // by an in-process mock-llm and announced as such.
  expected<void> use_embedded_catalog() {
    if (!config.providers.empty() || !config.agents.empty()) {
      return {};
    }
    const auto environment = environment_snapshot();
    std::string demo_url;
    const auto key = environment.find("OPENAI_API_KEY");
    if (key == environment.end() || key->second.empty()) {
      mock::mock_llm_options options;
      auto rules = mock::parse_mock_script(demo_model_script());
      if (!rules) {
        return tl::unexpected(rules.error());
      }
      options.rules = std::move(*rules);
      options.model = std::string(demo_model_name);
      demo_model = std::make_unique<mock::mock_llm_server>(aux_io(), std::move(options));
      auto bound = demo_model->listen({"127.0.0.1", 0});
      if (!bound) {
        return tl::unexpected(bound.error());
      }
      demo_model->start();
      demo_url = fmt::format("http://{}/v1", bound->to_string());
    }
    auto catalog = make_embedded_catalog(environment, demo_url);
    config.providers = std::move(catalog.providers);
    config.agents = std::move(catalog.agents);
    demo = catalog.demo;
    if (demo) {
      log::warn("no model provider is configured and OPENAI_API_KEY is not set: agent "
                "'assistant' answers with the SCRIPTED DEMO model (mock-llm at {}), not an LLM",
                demo_url);
    } else {
      log::info("no providers configured: agent 'assistant' uses OpenAI ({}) via OPENAI_API_KEY",
                config.agents.front().model);
    }
    return {};
  }

  // Opens the database: migrate, recover interrupted runs, check integrity, read pool.
  expected<void> open_storage() {
    const auto path = storage::database_path(config.data_dir);
    auto sync = storage::parse_sync_mode(config.storage.synchronous);
    if (!sync) {
      return tl::unexpected(sync.error());
    }
    auto conn = storage::open_writer(path, *sync);
    if (!conn) {
      return tl::unexpected(conn.error());
    }
    // Provider keys at rest: the key file (created at the first start, refused when
    // others may read it), then any key an older build stored in plain text is sealed.
    auto box = storage::secret_box::load_or_create(config.data_dir);
    if (!box) {
      return tl::unexpected(box.error());
    }
    secrets = std::make_shared<const storage::secret_box>(std::move(*box));
    auto sealed = storage::seal_plaintext_provider_keys(*conn, *secrets);
    if (!sealed) {
      return tl::unexpected(sealed.error());
    }
    if (*sealed > 0) {
      log::info("encrypted {} provider key(s) that were stored in plain text", *sealed);
    }
    auto recovered = storage::recover(*conn);
    if (!recovered) {
      return tl::unexpected(recovered.error());
    }
    if (recovered->interrupted_runs > 0) {
      log::warn("marked {} run(s) interrupted: they were running when troupe last stopped",
                recovered->interrupted_runs);
    }
    // The declared providers and agents, before anything can read them. The writer
    // actor does not exist yet, so this connection is still the only writer.
    auto synced = storage::sync_declared_catalog(*conn, config.providers, config.agents);
    if (!synced) {
      return tl::unexpected(synced.error());
    }
    if (!config.providers.empty() || !config.agents.empty()) {
      log::info("config catalog: {} provider(s) and {} agent(s) created, {} and {} updated",
                synced->providers_created, synced->agents_created, synced->providers_updated,
                synced->agents_updated);
    }
    // The declared channels, after the agents they name.
    if (auto declared = storage::sync_declared_channels(*conn, config.channels); !declared) {
      return tl::unexpected(declared.error());
    }
    auto reads = storage::read_pool::open(path, config.storage.read_connections);
    if (!reads) {
      return tl::unexpected(reads.error());
    }
    // First start (e.g. an admin token), before the store_writer takes the connection.
    if (frontend.prepare_storage) {
      if (auto prepared = frontend.prepare_storage(*conn, config); !prepared) {
        return tl::unexpected(prepared.error());
      }
    }
    db_writer = std::make_shared<storage::connection>(std::move(*conn));
    // Checkpoints leave the writer's commits for a thread of their own.
    auto checkpoints = storage::wal_checkpointer::start(
        path, *db_writer,
        {.checkpoint_frames = static_cast<int>(config.storage.checkpoint_frames)});
    if (!checkpoints) {
      return tl::unexpected(checkpoints.error());
    }
    checkpointer = std::move(*checkpoints);
    db_reads = std::move(*reads);
    return {};
  }

  // Where the node's own I/O runs (signals, the demo model): `io`, or shard 0.
  asio::io_context& aux_io() {
    return shards != nullptr ? shards->executor(0).context() : io;
  }

  // Policy "shards", once every actor is gone and before the actor system goes: what
  // lives on the shards' io_contexts is destroyed on its own shard's thread while the
  // shards still run (the clients end their transfers there).
  void release_shard_io() {
    if (shards == nullptr) {
      return;
    }
    run_there(shards->executor(0), [this] {
      signals.reset();
      demo_model.reset();
    });
    for (std::size_t k = 0; k < shard_http.size(); ++k) {
      run_there(shards->executor(k), [this, k] { shard_http[k].reset(); });
    }
  }

  void join_io_threads() {
    for (auto& t : io_threads) {
      if (t.joinable()) {
        t.join();
      }
    }
    io_threads.clear();
  }
};

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
  impl_->chat.reset();
  if (impl_->memory) {
    impl_->memory->stop();
  }
  if (impl_->shards != nullptr) {
    impl_->system->await_all_actors_done();
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

expected<endpoint> node::start() {
  auto& d = *impl_;
  auto lock = storage::open_data_dir(d.config.data_dir);
  if (!lock) {
    return tl::unexpected(lock.error());
  }
  d.data_dir = std::move(*lock);

  // The actor system first: with policy "shards" its threads run all I/O, the demo
  // model's included.
  d.system = std::make_unique<caf::actor_system>(d.caf_config);
  d.shards = shards_of(*d.system);

  if (auto ok = d.use_embedded_catalog(); !ok) {
    return tl::unexpected(ok.error());
  }

  // A wrong provider, model or tool in the config is a start-up error naming the agent.
  // The memory tools come from the node's memory source, beside the built-in ones.
  auto tool_names = tools::known_tool_names();
  for (auto& name : tools::memory_tool_names()) {
    tool_names.push_back(std::move(name));
  }
  if (auto ok = validate_agents(d.config.providers, d.config.agents, tool_names); !ok) {
    return tl::unexpected(ok.error());
  }

  // Storage: migrate, recover interrupted runs, check integrity, open the read pool.
  if (auto ok = d.open_storage(); !ok) {
    return tl::unexpected(ok.error());
  }

  d.store_writer =
      spawn_store_writer(*d.system, std::move(d.db_writer),
                         {d.config.storage.group_commit, d.config.storage.group_commit_max});
  d.writer_backlog = std::make_shared<write_backlog>(d.config.storage.writer_max_queue);
  d.metrics.gauge_callback(
      "troupe_store_writer_admitted_waiting",
      "Writes admitting new work that wait for the store writer",
      [backlog = d.writer_backlog] { return static_cast<double>(backlog->waiting()); });
  d.metrics.gauge_callback(
      "troupe_actors_live", "Actors alive in the actor system",
      [sys = d.system.get()] { return static_cast<double>(sys->registry().running()); });
  d.health = spawn_health(*d.system);

  d.memory = std::make_shared<memory_service>(*d.system, d.store_writer, d.db_reads, d.blocking);

  // Agent runs: tools, the sandbox, the LLM client and the conversations.
  // Runs resolve their tools per agent from the sources (the built-in tools for now).
  auto tool_resolver = tools::make_builtin_tool_resolver({}, d.blocking);
  if (auto added = tool_resolver->add_source(make_memory_tool_source(d.memory)); !added) {
    return tl::unexpected(added.error());
  }
  for (const auto& source : d.tool_sources) {
    if (auto added = tool_resolver->add_source(source); !added) {
      return tl::unexpected(added.error());
    }
  }
  tools::sandbox_options sandbox;
  sandbox.allow_host = d.config.tools.allow_host;
  if (sandbox.allow_host) {
    log::warn("tools.allow_host = true: code runs on the host WITHOUT the sandbox");
  }
  {
    // Conversations' workspaces live here. The sandbox reaches them however private the
    // directories above are (the runner binds each from a mount namespace of its own).
    const auto workspaces = d.config.data_dir / "workspaces";
    std::error_code ec;
    std::filesystem::create_directories(workspaces, ec);
    // Searchable, not listable: the sandbox's uid enters its own workspace by name.
    std::filesystem::permissions(workspaces,
                                 std::filesystem::perms::owner_all |
                                     std::filesystem::perms::group_exec |
                                     std::filesystem::perms::others_exec,
                                 ec);
  }
  chat_service_options chat_options;
  if (d.shards != nullptr) {
    // One client (one curl multi handle) per shard; off a shard, shard 0's.
    auto clients = std::make_shared<std::vector<net::http_client*>>();
    for (std::size_t k = 0; k < d.shards->size(); ++k) {
      d.shard_http.push_back(std::make_unique<net::http_client>(d.shards->executor(k)));
      clients->push_back(d.shard_http.back().get());
    }
    chat_options.io.http = clients->front();
    chat_options.io.shard_http = std::move(clients);
    // One registry shard per shard: a conversation is looked up on its own shard.
    chat_options.registry_shards = d.shards->size();
  } else {
    d.http = std::make_unique<net::http_client>(asio::make_strand(d.io));
    chat_options.io.http = d.http.get();
  }
  chat_options.writer = d.store_writer;
  chat_options.io.writer_backlog = d.writer_backlog;
  chat_options.reads = d.db_reads;
  d.catalog_rows = std::make_shared<storage::catalog_cache>(d.db_reads);
  chat_options.catalog = d.catalog_rows;
  chat_options.io.resolver = tool_resolver;
  chat_options.io.sandbox = std::make_shared<tools::sandbox_runner>(sandbox);
  chat_options.io.workspace_max_bytes = d.config.tools.workspace_max_bytes;
  chat_options.io.memory = d.memory;
  chat_options.io.blocking = d.blocking;
  chat_options.declared_providers = d.config.providers;
  chat_options.secrets = d.secrets;
  chat_options.key_env = key_env_policy(d.config.secrets.allowed_env);
  chat_options.data_dir = d.config.data_dir;
  chat_options.idle_ttl = d.config.actors.conversation_idle;
  chat_options.history_messages = d.config.actors.history_messages;
  chat_options.max_pending = d.config.actors.max_pending;
  chat_options.history_max_tokens = d.config.actors.history_max_tokens;
  chat_options.compression = d.config.compression;
  chat_options.tool_timeout = d.config.tools.timeout;
  chat_options.retention = d.config.api.run_retention;
  chat_options.journal_max_bytes = d.config.api.journal_max_bytes;
  const auto shard_clients = chat_options.io.shard_http;
  auto* const any_client = chat_options.io.http;
  d.chat = std::make_shared<chat_service>(*d.system, std::move(chat_options));
  d.chat_facade = std::make_shared<chat_service_facade>(d.chat);
  {
    channel_service_options channel_options;
    channel_options.writer = d.store_writer;
    channel_options.reads = d.db_reads;
    channel_options.catalog = d.catalog_rows;
    channel_options.chat = d.chat_facade;
    channel_options.secrets = d.secrets;
    channel_options.declared = d.config.channels;
    channel_options.environment = environment_snapshot();
    channel_options.key_env = key_env_policy(d.config.secrets.allowed_env);
    channel_options.http = any_client;
    channel_options.shard_http = shard_clients;
    channel_options.thread_idle = d.config.actors.conversation_idle;
    channel_options.typing_cap = d.config.actors.channel_typing_cap;
    d.channels = std::make_shared<channel_service>(*d.system, std::move(channel_options));
  }
  // Runs accepted before the last stop but not started go back to their conversations
  // (on shard 0 with policy "shards": `io` has no threads then).
  // Then the channels' journaled messages and unsent replies, which may wait for those runs.
  asio::co_spawn(d.aux_io(), d.chat->resume_queued_runs(),
                 [chat_io = d.aux_io().get_executor(),
                  channels = d.channels](const std::exception_ptr& failure, std::size_t resumed) {
                   if (failure) {
                     log::error("resuming queued runs stopped by an exception");
                   } else if (resumed > 0) {
                     log::info("resumed {} queued run(s) from before the last stop", resumed);
                   }
                   asio::co_spawn(chat_io, channels->recover(),
                                  [](const std::exception_ptr& e, std::size_t handed) {
                                    if (e) {
                                      log::error("channel recovery stopped by an exception");
                                    } else if (handed > 0) {
                                      log::info("channels: handed back {} message(s) and "
                                                "reply part(s) from before the last stop",
                                                handed);
                                    }
                                  });
                 });

  d.store_facade =
      std::make_shared<store_writer_facade>(*d.system, d.store_writer, d.writer_backlog);
  d.health_facade = std::make_shared<health_actor_facade>(*d.system, d.health);
  net::router routes;
  if (d.frontend.add_routes) {
    node_services services;
    services.chat = d.chat_facade;
    services.channels = d.channels;
    services.store = d.store_facade;
    services.health = d.health_facade;
    services.memory = d.memory;
    services.reads = d.db_reads;
    services.catalog = d.catalog_rows;
    services.secrets = d.secrets;
    services.config = &d.config;
    services.metrics = &d.metrics;
    services.demo = d.demo;
    services.background = d.aux_io().get_executor();
    services.run_blocking = [blocking = d.blocking](std::function<expected<void>()> job) {
      return run_on_pool(blocking, std::move(job));
    };
    if (auto added = d.frontend.add_routes(routes, services); !added) {
      return tl::unexpected(added.error());
    }
  }
  if (d.shards != nullptr) {
    // An acceptor per shard; each connection is served by the shard that accepted it.
    std::vector<asio::any_io_executor> executors;
    for (std::size_t k = 0; k < d.shards->size(); ++k) {
      executors.emplace_back(d.shards->executor(k));
    }
    d.server = std::make_unique<net::http_server>(std::move(executors), std::move(routes),
                                                  net::http_server_options::from(d.config.server),
                                                  d.metrics);
  } else {
    d.server = std::make_unique<net::http_server>(
        d.io, std::move(routes), net::http_server_options::from(d.config.server), d.metrics);
  }
  auto bound = d.server->listen(d.config.listen);
  if (!bound) {
    return bound;
  }
  d.server->start();

  auto on_signal = [this](auto&& self, const boost::system::error_code& ec, int signo) -> void {
    if (ec) {
      return;
    }
    log::info("received {}, shutting down", signo == SIGINT ? "SIGINT" : "SIGTERM");
    stop();
    impl_->signals->async_wait(
        [self](const boost::system::error_code& e, int s) { self(self, e, s); });
  };
  auto watch_signals = [&d, on_signal] {
    d.signals.emplace(d.aux_io());
    d.signals->add(SIGINT);
    d.signals->add(SIGTERM);
    d.signals->async_wait([on_signal](const boost::system::error_code& ec, int signo) {
      on_signal(on_signal, ec, signo);
    });
  };
  if (d.shards != nullptr) {
    // The signal set belongs to shard 0: it is made and used on its thread only.
    run_there(d.shards->executor(0), watch_signals);
  } else {
    watch_signals();
  }

  if (d.shards != nullptr) {
    // The shard threads run the server, the clients, the signals and the demo model.
    return bound;
  }
  d.work.emplace(d.io.get_executor());
  for (unsigned i = 0; i < d.config.server.io_threads; ++i) {
    d.io_threads.emplace_back([&io = d.io] {
      try {
        io.run();
      } catch (const std::exception& e) {
        log::error("io thread stopped by an exception: {}", e.what());
      }
    });
  }
  return bound;
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
