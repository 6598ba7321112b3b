#pragma once

/// \file
/// What a node hands the layer above it (`api/`, given to the node by `app/`): the
/// service facades, the read pool and the resolved settings, and the hooks through which
/// that layer adds its routes and prepares the database on first start.

#include <functional>
#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "troupe/actors/approvals_facade.hpp"
#include "troupe/actors/channel_facade.hpp"
#include "troupe/actors/chat_facade.hpp"
#include "troupe/actors/health_facade.hpp"
#include "troupe/actors/mcp_facade.hpp"
#include "troupe/actors/memory_facade.hpp"
#include "troupe/actors/skills_facade.hpp"
#include "troupe/actors/store_facade.hpp"
#include "troupe/actors/tools_facade.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/runtime/metrics.hpp"
#include "troupe/runtime/settings.hpp"
#include "troupe/storage/catalog_cache.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/secret_box.hpp"

namespace troupe::actors {

/// The services of a started node. Everything here outlives the routes' registration;
/// the facades answer with errors once the node has stopped.
struct node_services {
  std::shared_ptr<chat_facade> chat;
  /// Messaging channels: inbound webhooks and their threads.
  std::shared_ptr<channel_facade> channels;
  std::shared_ptr<store_facade> store;
  std::shared_ptr<health_facade> health;
  /// Changes of durable memory, through each user's memory writer.
  std::shared_ptr<memory_facade> memory;
  /// Custom tools and web search engines changed over the API (issue 18).
  std::shared_ptr<tools_facade> tools;
  /// The skills of the `[skills]` folders (issue 19); null: none loaded.
  std::shared_ptr<skills_facade> skills;
  /// Decisions on tool calls that wait for a human (issue 19).
  std::shared_ptr<approvals_facade> approvals;
  std::shared_ptr<storage::read_pool> reads;
  /// Tokens, agents and providers from memory; the routes' writes invalidate it.
  std::shared_ptr<storage::catalog_cache> catalog;
  /// The data directory's secret box (`secret.key`): seals and opens provider keys.
  std::shared_ptr<const storage::secret_box> secrets;
  /// The MCP servers runs use as tool sources: read and replaced by
  /// `GET|PUT /api/v1/runtime/mcp`; null: none managed.
  std::shared_ptr<mcp_facade> mcp;
  /// The resolved settings (with the embedded catalog when the config declared none).
  const settings* config = nullptr;
  metrics_registry* metrics = nullptr;
  /// True when agent "assistant" runs on the scripted demo model.
  bool demo = false;
  /// Where the layer above may run its own background coroutines (timers): shard 0 with
  /// policy "shards", else the node's io_context. Empty: no background work.
  boost::asio::any_io_executor background;
  /// Runs `job` on the node's blocking pool (`blocking.threads`), off the threads that
  /// serve requests, and waits for it; for work that may block, such as removing files.
  /// Empty: the caller runs the job itself.
  std::function<boost::asio::awaitable<expected<void>>(std::function<expected<void>()>)>
      run_blocking;
};

/// The HTTP layer of a node. Empty hooks are skipped (a node without routes).
struct node_frontend {
  /// Runs on the writer connection after migration, before the store_writer takes it
  /// (first-start bootstrap, e.g. the admin token).
  std::function<expected<void>(storage::connection& writer, const settings& config)>
      prepare_storage;
  /// Adds the routes; runs once the services exist, before the server listens.
  std::function<expected<void>(net::router& routes, const node_services& services)> add_routes;
};

} // namespace troupe::actors
