#pragma once

/// \file
/// The tools facade: what the HTTP layer may do with the node's custom tools and web
/// search engines (issue 18) without seeing the tools layer. The routes store a change in
/// the database first, then hand it here, where it reaches the next run (a run holds the
/// tool set it started with). Implemented in actors/ (node_tools.cpp).

#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "troupe/runtime/error.hpp"
#include "troupe/runtime/tool_config.hpp"

namespace troupe::actors {

class tools_facade {
public:
  virtual ~tools_facade() = default;

  /// Checks `tool` as installing it would, beyond `validate_custom_tool`: the schema
  /// compiles, every placeholder is a parameter, the name is not a built-in tool's. The
  /// error names the field.
  virtual expected<void> check_tool(const custom_tool_settings& tool) const = 0;
  /// Installs `tool`, replacing the tool of its name: the next run sees it.
  virtual expected<void> install_tool(const custom_tool_settings& tool) = 0;
  /// Removes the tool called `name` from later runs.
  virtual void remove_tool(const std::string& name) = 0;

  /// The engines web_search uses from now on (the table's rows after a change).
  virtual void set_search_engines(std::vector<search_engine_settings> engines) = 0;
  /// One search through `engine` with its key from the node's environment, on the
  /// calling thread's HTTP client: the results as a JSON array of `{title, url, snippet}`,
  /// or the engine's error.
  virtual boost::asio::awaitable<expected<std::string>>
  test_search(search_engine_settings engine, std::string query, unsigned limit) = 0;
};

} // namespace troupe::actors
