#pragma once

/// \file
/// The web tools (issue 18), offered by agent `web_search` mode:
///
/// - `web_search(query, limit)` (external mode): asks the enabled `[[search_engines]]`,
///   the default first, the next one when one fails, and answers
///   `{"query", "provider", "engine", "results": [{"title", "url", "snippet"}]}`
///   (`provider` is the engine's type, `engine` its name; `limit` 5 by default, at most
///   10). With no enabled engine it is refused, saying how to add one.
/// - `web_fetch(url)` (builtin and external mode): the page at `url` as text
///   (html_text.hpp) with its title, or a text or JSON body as it is; other content types
///   are refused. The body read is capped (`web.fetch_max_bytes`), the text returned too
///   (`web.fetch_max_chars`), one deadline covers everything (`web.fetch_timeout_ms`), and
///   the private-address rule of guarded_fetch.hpp applies unless
///   `web.fetch_allow_private`.

#include <map>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "troupe/runtime/tool_config.hpp"
#include "troupe/tools/search_engines.hpp"
#include "troupe/tools/tool_source.hpp"

namespace troupe::tools {

/// What the web tools use.
struct web_tool_options {
  web_settings web;
  /// The engines web_search asks (changed over the API while the node runs).
  std::shared_ptr<search_engine_catalog> engines;
  /// Where an engine's `key_env` is looked up (the node's environment at start).
  std::map<std::string, std::string> environment;
  key_env_policy key_env;
};

/// The outcome of a search over the engines.
struct web_search_outcome {
  std::string query;
  /// The engine that answered: its type and its name.
  std::string provider;
  std::string engine;
  std::vector<search_hit> results;
  /// Engines that failed before it, each "engine: why".
  std::vector<std::string> failed;
};

/// Searches with `engines` in `search_order`, the first that answers winning. Fails with
/// policy_blocked-worthy `not_found` when no engine is enabled, else with the last
/// engine's error code and every engine's failure in the message.
boost::asio::awaitable<expected<web_search_outcome>>
search_web(net::http_client& http, std::vector<search_engine_settings> engines,
           std::shared_ptr<const web_tool_options> options, std::string query, unsigned limit);

/// The API key of `engine` from `options`' environment (empty for a keyless SearXNG);
/// fails naming the variable when it is not set or not allowed.
expected<std::string> search_engine_key(const search_engine_settings& engine,
                                        const web_tool_options& options);

std::shared_ptr<const tool> make_web_search_tool(std::shared_ptr<const web_tool_options> options);
std::shared_ptr<const tool> make_web_fetch_tool(std::shared_ptr<const web_tool_options> options);

/// The name of the web tools' source.
inline constexpr std::string_view web_source_name = "web";

/// A source with web_search and web_fetch.
std::shared_ptr<dynamic_tool_source>
make_web_tool_source(std::shared_ptr<const web_tool_options> options);

} // namespace troupe::tools
