#pragma once

// Private to tools/src: one configured MCP server, connected and supervised on the MCP
// executor, with the tool source that offers its tools (mcp_servers.hpp). Everything but
// `status()` runs on that executor.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/net/mcp/client.hpp"
#include "troupe/tools/mcp_servers.hpp"
#include "troupe/tools/tool_source.hpp"

namespace troupe::tools {

/// The tool source of one server: its tools, and the agents its `agents` setting names.
class mcp_tool_source final : public tool_source {
public:
  mcp_tool_source(std::string server, std::vector<std::string> agents);

  const std::string& name() const noexcept override {
    return tools_.name();
  }
  std::shared_ptr<const source_tools> current() const override {
    return tools_.current();
  }
  tool_grant grant_for(std::string_view agent) const override;

  /// Publishes a new tool list (a new version).
  expected<std::uint64_t> replace(std::vector<std::shared_ptr<const tool>> tools) {
    return tools_.replace(std::move(tools));
  }

private:
  dynamic_tool_source tools_;
  std::vector<std::string> agents_;
};

struct mcp_servers::connection : std::enable_shared_from_this<mcp_servers::connection> {
  connection(mcp_server_settings settings, boost::asio::any_io_executor executor,
             net::http_client& http, const mcp_servers_options& options);

  /// Starts the supervisor.
  void start();
  /// Stops the supervisor and closes the session (on the executor).
  boost::asio::awaitable<void> stop();
  /// Calls `tool` (its MCP name) with `arguments` (on the executor).
  static boost::asio::awaitable<tool_result> call(std::shared_ptr<connection> self,
                                                  std::string tool, std::string arguments);

  /// Where it stands (any thread).
  mcp_server_status status() const;

  const mcp_server_settings settings;
  const std::shared_ptr<mcp_tool_source> source;
  const boost::asio::any_io_executor executor;

private:
  static boost::asio::awaitable<void> supervise(std::shared_ptr<connection> self);
  static boost::asio::awaitable<void> refresh(std::shared_ptr<connection> self,
                                              std::shared_ptr<net::mcp::client> client);
  std::shared_ptr<net::mcp::client> make_client();
  expected<void> publish(const std::vector<net::mcp::tool_info>& tools);
  boost::asio::awaitable<bool> wait_ready(std::chrono::steady_clock::time_point deadline);
  void wake_all();
  void set_state(std::string state, std::string error = {});

  net::http_client& http_;
  mcp_servers_options options_;
  // Executor only.
  std::shared_ptr<net::mcp::client> client_;
  std::map<std::string, std::string> mcp_names_; // agent-facing name -> the server's
  // Cancelled (and replaced) whenever something a waiter waits for happens: the session
  // became ready, it died, or the connection is stopping.
  std::shared_ptr<boost::asio::steady_timer> changed_;
  bool stopping_ = false;
  bool stopped_ = false;
  // Any thread.
  mutable std::mutex mutex_;
  mcp_server_status status_;
};

} // namespace troupe::tools
