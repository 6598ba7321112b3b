#pragma once

// The node's private state (`node::impl`), shared by node.cpp (construction, stop, wait,
// destruction and the accessors) and node_start.cpp (start: storage, the agent runtime,
// the channels, the API and its server, the signals). Private to actors/src.

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

#include "troupe/actors/approval_registry.hpp"
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
#include "troupe/tools/mcp_servers.hpp"
#include "troupe/tools/memory_tool_descriptors.hpp"
#include "troupe/tools/skill_library.hpp"
#include "troupe/tools/tool_resolver.hpp"

namespace troupe::tools {
class custom_tool_set;
class search_engine_catalog;
} // namespace troupe::tools

namespace troupe::actors {

class skill_watcher;
class skills_facade;

namespace asio = boost::asio;

namespace detail {

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

} // namespace detail

struct node::impl {
  impl(settings s, node_frontend f);

  // Policy "shards": the actor system runs on the shard scheduler, whose threads also
  // run the network I/O (docs/execution-model.md).
  void use_shards();

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
  // Policy "shards": SQLite reads made on each shard's thread (`db_reads`' acquire hook).
  std::vector<metric_counter*> shard_reads;
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
  // Custom tools, search engines and the API's way to change them (issue 18,
  // node_tools.cpp).
  std::shared_ptr<tools::custom_tool_set> custom_tools;
  std::shared_ptr<tools::search_engine_catalog> search_engines;
  std::shared_ptr<tools_facade> tools_api;
  // The MCP servers runs use as tool sources (on a strand of `aux_io()`).
  std::shared_ptr<tools::mcp_servers> mcp;
  // Skills (issue 19, node_skills.cpp): the library (tool source `skills`), the watcher
  // of its folders (on `aux_io()`) and the facade the API reads.
  std::shared_ptr<tools::skill_library> skills;
  std::shared_ptr<skill_watcher> skill_watch;
  std::shared_ptr<skills_facade> skills_api;
  // The live approvals of runs (issue 19).
  std::shared_ptr<approval_registry> approvals;

  std::mutex mutex;
  std::condition_variable stopped_cv;
  int stop_requests = 0;
  bool stopped = false;
  // Stops the channels, then finishes the stop (see finish_stop); joined by wait().
  std::thread channel_stopper;
  bool channels_stopping = false;

  // Ends the node once its server has drained: channels first, then the services.
  void finish_stop();

  // With no [[providers]] and [[agents]] in the config, declares an "assistant" agent
  // (OpenAI, or the scripted demo model served by an in-process mock-llm).
  expected<void> use_embedded_catalog();

  // Opens the database: migrate, recover interrupted runs, check integrity, read pool.
  expected<void> open_storage();

  // Agent runs: memory, the tool resolver and its sources, the sandbox, the LLM
  // clients, the chat service and its facade.
  expected<void> start_runs();

  // Issue 18 (node_tools.cpp): the names agents may list besides the built-in and memory
  // tools (web_search, web_fetch, the declared custom tools); the declared custom tools
  // checked before storage opens; written (with the search engines) on the writer
  // connection once the declared agents are; and the `custom` and `web` sources built from
  // the tables and added to `resolver`, with the tools facade.
  std::vector<std::string> extension_tool_names() const;
  expected<void> check_declared_tools() const;
  expected<void> sync_declared_tools(storage::connection& writer);
  expected<void> start_extension_tools(tools::tool_resolver& resolver);
  // The MCP servers of the mcp_servers table as sources of `resolver` (start_runs).
  expected<void> start_mcp(const std::shared_ptr<tools::tool_resolver>& resolver);
  // The skills of the `[skills]` folders as source `skills` of `resolver`, watched.
  expected<void> start_skills(tools::tool_resolver& resolver);

  // The channels, then the recovery of queued runs and of channel work from before the
  // last stop.
  void start_channels();

  // The routes of the layer above on the node's services, and the HTTP server on them.
  expected<endpoint> start_server();

  // SIGINT and SIGTERM stop `owner` (a second one closes every connection at once).
  void watch_signals(node& owner);

  // Where the node's own I/O runs (signals, the demo model): `io`, or shard 0.
  asio::io_context& aux_io() {
    return shards != nullptr ? shards->executor(0).context() : io;
  }

  // Policy "shards", once every actor is gone and before the actor system goes: what
  // lives on the shards' io_contexts is destroyed on its own shard's thread while the
  // shards still run (the clients end their transfers there).
  void release_shard_io();

  void join_io_threads();
};

} // namespace troupe::actors
