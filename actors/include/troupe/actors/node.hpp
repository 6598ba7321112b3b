#pragma once

/// \file
/// One troupe process: the data directory, the CAF actor system, the Asio io threads,
/// the HTTP server and their orderly start and stop. The routes come from the layer
/// above (`api/`, handed over by `app/` as a `node_frontend`), which sees the node's
/// services only through their facades (node_services.hpp).

#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <caf/fwd.hpp>

#include "troupe/actors/node_services.hpp"
#include "troupe/actors/store_writer.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/runtime/metrics.hpp"
#include "troupe/runtime/settings.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/tool_source.hpp"

namespace troupe::actors {

/// Builds, runs and stops everything `troupe serve` runs.
class node {
public:
  /// A node serving `frontend`'s routes (none when its hooks are empty).
  explicit node(settings config, node_frontend frontend = {});
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Takes the data directory, starts the actor system and io threads, and starts the
  /// HTTP server. Returns the address it listens on.
  expected<endpoint> start();

  /// Graceful stop: the HTTP server drains (up to `server.shutdown_timeout_ms`), then
  /// actors are told to exit and the io threads end. `done` runs when all is stopped.
  /// Safe to call more than once; a second call shortens the grace to zero.
  void stop();

  /// Blocks until `stop` has finished (after SIGINT/SIGTERM, or a call to `stop`).
  void wait();

  /// `start`, then serve until SIGINT or SIGTERM, then stop gracefully. The exit code.
  int run();

  /// Adds `source` to the sources runs resolve their tools from, after the built-in one
  /// (tools of an embedding program, tests). Call before `start`; a name the built-in
  /// source has makes `start` fail.
  void add_tool_source(std::shared_ptr<const tools::tool_source> source);
  /// The pool the node's tools run their blocking work on (`blocking.threads` threads);
  /// a source added with `add_tool_source` gives its tools' blocking work to it too.
  std::shared_ptr<tools::blocking_pool> blocking_pool() const;

  /// The resolved settings (with the embedded catalog when the config declared none).
  const settings& config() const noexcept;
  /// True when agent "assistant" runs on the scripted demo model (no provider configured).
  bool demo_mode() const noexcept;
  caf::actor_system& system();
  boost::asio::io_context& io();
  metrics_registry& metrics();
  /// The only database writer (valid after `start`).
  store_writer_actor store_writer() const;
  /// Read-only connections for database reads (valid after `start`).
  std::shared_ptr<storage::read_pool> read_pool() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::actors
