#pragma once

/// \file
/// The node's MCP servers as tool sources. Each configured server is connected once and
/// shared by every run; its tools are the source `mcp:<server>`, offered to agents as
/// `<server>__<tool>` (a character a model's function name cannot hold becomes `_`). A
/// server is reconnected only when its settings change. Its supervisor restarts it with
/// back-off when it dies (a stdio process that exits) or cannot be reached, keeping its
/// last tool list meanwhile; notifications/tools/list_changed publishes a new source
/// version. A call of a server that is restarting waits for it (within the call's
/// limit); a call cut by its server's death is a `tool_error` naming the exit, one past
/// its limit a `timeout`, and a cancelled run cancels its calls at the server.
///
/// Every MCP connection lives on one executor (a strand, `mcp_servers_options::executor`);
/// runs on any shard reach it through `co_spawn`. The public functions are thread-safe.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "troupe/runtime/mcp_config.hpp"
#include "troupe/tools/tool_resolver.hpp"

namespace troupe::net {
class http_client;
} // namespace troupe::net

namespace troupe::tools {

struct mcp_servers_options {
  /// Where every connection runs: one thread at a time (a strand).
  boost::asio::any_io_executor executor;
  /// The node's resolver: each server's source is added to it (and removed with it).
  std::shared_ptr<tool_resolver> resolver;
  /// The most a call may run however long its progress goes on (`tools.timeout_ms`).
  std::chrono::milliseconds max_call_time{600'000};
  /// The version the client reports in `initialize`.
  std::string client_version;
  /// First wait before a restart, doubled after each failure up to `max_backoff`, and
  /// reset once a connection stayed up for a minute.
  std::chrono::milliseconds first_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
};

/// The name agents see for `tool` of `server`: `<server>__<tool>`, characters outside
/// [A-Za-z0-9_-] replaced by '_', and cut to 64 characters with a hash of the whole
/// when longer.
std::string mcp_tool_name(std::string_view server, std::string_view tool);

class mcp_servers : public std::enable_shared_from_this<mcp_servers> {
public:
  static std::shared_ptr<mcp_servers> make(mcp_servers_options options);
  explicit mcp_servers(mcp_servers_options options);
  ~mcp_servers();

  /// Makes `servers` the set: unchanged servers keep their connection, removed ones are
  /// closed and their sources removed, new and changed ones (re)connect. Returns at once
  /// (the connections are made on the executor).
  void apply(std::vector<mcp_server_settings> servers);

  /// The set now.
  std::vector<mcp_server_settings> settings() const;

  /// Each server's state, in the set's order.
  std::vector<mcp_server_status> status() const;

  /// Closes every connection and removes the sources; waits up to `grace` for the
  /// servers to end (not on the executor's thread).
  void stop(std::chrono::milliseconds grace);

  struct connection;

private:
  /// Drops this object's reference to the executor (the end of stop()).
  void release_executor();

  mcp_servers_options options_;
  mutable std::mutex mutex_;
  std::vector<mcp_server_settings> settings_;
  std::vector<std::shared_ptr<connection>> connections_;
  std::unique_ptr<net::http_client> http_;
  bool stopped_ = false;
};

} // namespace troupe::tools
