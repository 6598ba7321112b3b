// Starting a node: the data directory, the actor system, storage, the agent runtime, the
// channels, the API's server and the signals, in that order.

#include "node_impl.hpp"

#include "troupe/runtime/version.hpp"
#include "troupe/storage/mcp_servers.hpp"

namespace troupe::actors {

namespace {

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

expected<void> node::impl::use_embedded_catalog() {
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

expected<void> node::impl::open_storage() {
  const auto path = storage::database_path(config.data_dir);
  auto sync = storage::parse_sync_mode(config.storage.synchronous);
  if (!sync) {
    return tl::unexpected(sync.error());
  }
  auto conn = storage::open_writer(path, *sync, config.storage.gather_wal_writes);
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
  if (recovered->paused_runs > 0) {
    log::info("{} run(s) wait for a human's approval since before the last stop: they resume",
              recovered->paused_runs);
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
  // --- Issue 18: the declared custom tools and search engines (node_tools.cpp).
  if (auto declared = sync_declared_tools(*conn); !declared) {
    return tl::unexpected(declared.error());
  }
  // --- end of issue 18's part.
  // The declared MCP servers (their env and headers sealed); the API may add others.
  if (auto declared = storage::sync_declared_mcp_servers(*conn, config.mcp_servers, *secrets);
      !declared) {
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
      {.checkpoint_frames = static_cast<int>(config.storage.checkpoint_frames),
       .restart_frames = static_cast<int>(config.storage.wal_restart_frames)});
  if (!checkpoints) {
    return tl::unexpected(checkpoints.error());
  }
  checkpointer = std::move(*checkpoints);
  db_reads = std::move(*reads);
  if (!shard_reads.empty()) {
    db_reads->on_acquire([counters = shard_reads] {
      if (const auto k = shard_set::current(); k && *k < counters.size()) {
        counters[*k]->add();
      }
    });
  }
  return {};
}

expected<void> node::impl::start_runs() {
  memory = std::make_shared<memory_service>(*system, store_writer, db_reads, blocking);

  // Agent runs: tools, the sandbox, the LLM client and the conversations.
  // Runs resolve their tools per agent from the sources (the built-in tools for now).
  auto tool_resolver = tools::make_builtin_tool_resolver({}, blocking);
  if (auto added = tool_resolver->add_source(make_memory_tool_source(memory)); !added) {
    return tl::unexpected(added.error());
  }
  for (const auto& source : tool_sources) {
    if (auto added = tool_resolver->add_source(source); !added) {
      return tl::unexpected(added.error());
    }
  }
  // --- Issue 18: custom tools (source `custom`) and the web tools (source `web`), from the
  // tools and search_engines tables; see node_tools.cpp.
  if (auto added = start_extension_tools(*tool_resolver); !added) {
    return tl::unexpected(added.error());
  }
  // --- end of issue 18's part.
  if (auto started = start_mcp(tool_resolver); !started) {
    return started;
  }
  if (auto started = start_skills(*tool_resolver); !started) {
    return started;
  }
  tools::sandbox_options sandbox;
  sandbox.allow_host = config.tools.allow_host;
  if (sandbox.allow_host) {
    log::warn("tools.allow_host = true: code runs on the host WITHOUT the sandbox");
  }
  {
    // Conversations' workspaces live here. The sandbox reaches them however private the
    // directories above are (the runner binds each from a mount namespace of its own).
    const auto workspaces = config.data_dir / "workspaces";
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
  if (shards != nullptr) {
    // One client (one curl multi handle) per shard; off a shard, shard 0's.
    auto clients = std::make_shared<std::vector<net::http_client*>>();
    for (std::size_t k = 0; k < shards->size(); ++k) {
      shard_http.push_back(std::make_unique<net::http_client>(shards->executor(k)));
      clients->push_back(shard_http.back().get());
    }
    chat_options.io.http = clients->front();
    chat_options.io.shard_http = std::move(clients);
    // One registry shard per shard: a conversation is looked up on its own shard.
    chat_options.registry_shards = shards->size();
  } else {
    http = std::make_unique<net::http_client>(asio::make_strand(io));
    chat_options.io.http = http.get();
  }
  chat_options.writer = store_writer;
  chat_options.io.writer_backlog = writer_backlog;
  chat_options.reads = db_reads;
  catalog_rows = std::make_shared<storage::catalog_cache>(db_reads);
  chat_options.catalog = catalog_rows;
  chat_options.io.resolver = tool_resolver;
  chat_options.io.sandbox = std::make_shared<tools::sandbox_runner>(sandbox);
  chat_options.io.workspace_max_bytes = config.tools.workspace_max_bytes;
  chat_options.io.memory = memory;
  chat_options.io.blocking = blocking;
  approvals = std::make_shared<approval_registry>();
  chat_options.io.approvals = approvals;
  chat_options.io.approval_timeout = std::chrono::seconds(config.tools.approval_timeout_s);
  chat_options.declared_providers = config.providers;
  chat_options.secrets = secrets;
  chat_options.key_env = key_env_policy(config.secrets.allowed_env);
  chat_options.data_dir = config.data_dir;
  chat_options.idle_ttl = config.actors.conversation_idle;
  chat_options.history_messages = config.actors.history_messages;
  chat_options.max_pending = config.actors.max_pending;
  chat_options.history_max_tokens = config.actors.history_max_tokens;
  chat_options.compression = config.compression;
  chat_options.tool_timeout = config.tools.timeout;
  chat_options.retention = config.api.run_retention;
  chat_options.journal_max_bytes = config.api.journal_max_bytes;
  chat_options.metrics = std::make_shared<run_metrics>(metrics);
  chat = std::make_shared<chat_service>(*system, std::move(chat_options));
  chat_facade = std::make_shared<chat_service_facade>(chat);
  return {};
}

// --- MCP servers (issue 18) ---------------------------------------------------------
// Each server of the mcp_servers table (the config's [[mcp_servers]] synced in by
// open_storage, plus what PUT /api/v1/runtime/mcp stored) is connected once and shared by
// every run: a tool source `mcp:<server>` of the resolver. Every MCP connection runs on
// one strand of the node's own I/O (shard 0, or the io threads).
namespace {

/// The HTTP layer's view of the node's MCP servers (mcp_facade.hpp).
class mcp_servers_facade final : public mcp_facade {
public:
  explicit mcp_servers_facade(std::shared_ptr<tools::mcp_servers> servers)
      : servers_(std::move(servers)) {}
  std::vector<mcp_server_settings> settings() const override {
    return servers_->settings();
  }
  std::vector<mcp_server_status> status() const override {
    return servers_->status();
  }
  void apply(std::vector<mcp_server_settings> servers) override {
    servers_->apply(std::move(servers));
  }

private:
  std::shared_ptr<tools::mcp_servers> servers_;
};

} // namespace

expected<void> node::impl::start_mcp(const std::shared_ptr<tools::tool_resolver>& resolver) {
  auto stored = db_reads->with(
      [&](storage::connection& c) { return storage::load_mcp_servers(c, *secrets); });
  if (!stored) {
    return tl::unexpected(stored.error());
  }
  tools::mcp_servers_options options;
  options.executor = asio::make_strand(aux_io());
  options.resolver = resolver;
  options.max_call_time = config.tools.timeout;
  options.client_version = std::string(troupe::version());
  mcp = tools::mcp_servers::make(std::move(options));
  if (!stored->empty()) {
    log::info("MCP: connecting to {} server(s)", stored->size());
  }
  mcp->apply(std::move(*stored));
  return {};
}
// --- end of MCP servers ---------------------------------------------------------------

void node::impl::start_channels() {
  channel_service_options channel_options;
  channel_options.writer = store_writer;
  channel_options.reads = db_reads;
  channel_options.blocking = blocking;
  channel_options.catalog = catalog_rows;
  channel_options.chat = chat_facade;
  channel_options.approvals = approvals;
  channel_options.secrets = secrets;
  channel_options.declared = config.channels;
  channel_options.environment = environment_snapshot();
  channel_options.key_env = key_env_policy(config.secrets.allowed_env);
  channel_options.http = shard_http.empty() ? http.get() : shard_http.front().get();
  if (!shard_http.empty()) {
    auto clients = std::make_shared<std::vector<net::http_client*>>();
    for (const auto& c : shard_http) {
      clients->push_back(c.get());
    }
    channel_options.shard_http = std::move(clients);
  }
  channel_options.thread_idle = config.actors.conversation_idle;
  channel_options.typing_cap = config.actors.channel_typing_cap;
  channel_options.run_grace = config.actors.channel_run_grace;
  channels = std::make_shared<channel_service>(*system, std::move(channel_options));
  // Runs accepted before the last stop but not started go back to their conversations
  // (on shard 0 with policy "shards": `io` has no threads then).
  // Then the channels' journaled messages and unsent replies, which may wait for those runs.
  asio::co_spawn(aux_io(), chat->resume_queued_runs(),
                 [chat_io = aux_io().get_executor(),
                  channels = channels](const std::exception_ptr& failure, std::size_t resumed) {
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
}

expected<endpoint> node::impl::start_server() {
  store_facade = std::make_shared<store_writer_facade>(*system, store_writer, writer_backlog);
  health_facade = std::make_shared<health_actor_facade>(*system, health);
  net::router routes;
  if (frontend.add_routes) {
    node_services services;
    services.chat = chat_facade;
    services.channels = channels;
    services.store = store_facade;
    services.health = health_facade;
    services.memory = memory;
    services.tools = tools_api;   // issue 18
    services.skills = skills_api; // issue 19
    services.approvals = approvals;
    services.reads = db_reads;
    services.catalog = catalog_rows;
    services.secrets = secrets;
    services.config = &config;
    services.metrics = &metrics;
    if (mcp) {
      services.mcp = std::make_shared<mcp_servers_facade>(mcp);
    }
    services.demo = demo;
    services.background = aux_io().get_executor();
    services.run_blocking = [blocking = blocking](std::function<expected<void>()> job) {
      return run_on_pool(blocking, std::move(job));
    };
    if (auto added = frontend.add_routes(routes, services); !added) {
      return tl::unexpected(added.error());
    }
  }
  if (shards != nullptr) {
    // An acceptor per shard; each connection is served by the shard that accepted it.
    std::vector<asio::any_io_executor> executors;
    for (std::size_t k = 0; k < shards->size(); ++k) {
      executors.emplace_back(shards->executor(k));
    }
    server =
        std::make_unique<net::http_server>(std::move(executors), std::move(routes),
                                           net::http_server_options::from(config.server), metrics);
  } else {
    server = std::make_unique<net::http_server>(
        io, std::move(routes), net::http_server_options::from(config.server), metrics);
  }
  auto bound = server->listen(config.listen);
  if (!bound) {
    return bound;
  }
  server->start();
  return bound;
}

void node::impl::watch_signals(node& owner) {
  auto on_signal = [&owner](auto&& self, const boost::system::error_code& ec, int signo) -> void {
    if (ec) {
      return;
    }
    log::info("received {}, shutting down", signo == SIGINT ? "SIGINT" : "SIGTERM");
    owner.stop();
    owner.impl_->signals->async_wait(
        [self](const boost::system::error_code& e, int s) { self(self, e, s); });
  };
  auto watch = [this, on_signal] {
    signals.emplace(aux_io());
    signals->add(SIGINT);
    signals->add(SIGTERM);
    signals->async_wait([on_signal](const boost::system::error_code& ec, int signo) {
      on_signal(on_signal, ec, signo);
    });
  };
  if (shards != nullptr) {
    // The signal set belongs to shard 0: it is made and used on its thread only.
    detail::run_there(shards->executor(0), watch);
  } else {
    watch();
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
  // --- Issue 18: the web tools and the declared custom tools (node_tools.cpp).
  for (auto& name : d.extension_tool_names()) {
    tool_names.push_back(std::move(name));
  }
  if (auto ok = d.check_declared_tools(); !ok) {
    return tl::unexpected(ok.error());
  }
  // --- end of issue 18's part.
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

  if (auto ok = d.start_runs(); !ok) {
    return tl::unexpected(ok.error());
  }
  d.start_channels();
  auto bound = d.start_server();
  if (!bound) {
    return bound;
  }
  d.watch_signals(*this);

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

} // namespace troupe::actors
