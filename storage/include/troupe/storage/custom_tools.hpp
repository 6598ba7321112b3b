#pragma once

/// \file
/// Custom tools (the `tools` table, kinds http and script) and web search engines (the
/// `search_engines` table) as their settings (runtime/tool_config.hpp): what the config
/// declares is written at start (marked `declared`: the API leaves it alone), what the
/// API creates, changes and deletes is kept here.
/// A tool's row holds its name, kind, description, schema and enabled flag in columns and
/// its whole definition in `config_json` (the API's JSON shape); the columns win where the
/// two could differ. An engine's `kind` is its type and `api_key_ref` its `key_env`: only
/// the variable's name, never a key.

#include <cstddef>
#include <string_view>
#include <vector>

#include "troupe/runtime/tool_config.hpp"
#include "troupe/storage/connection.hpp"

namespace troupe::storage {

/// Every custom tool, by name.
expected<std::vector<custom_tool_settings>> list_custom_tools(connection& c);
/// The custom tool called `name` (not_found when there is none).
expected<custom_tool_settings> find_custom_tool(connection& c, std::string_view name);
/// Adds a tool; `conflict` when one of that name exists (of any kind).
expected<void> insert_custom_tool(connection& c, const custom_tool_settings& tool);
/// Replaces the tool of that name, or adds it.
expected<void> upsert_custom_tool(connection& c, const custom_tool_settings& tool);
/// Deletes the custom tool called `name`; false when there was none.
expected<bool> delete_custom_tool(connection& c, std::string_view name);
/// Writes every tool the config declares, marked `declared`, and deletes the declared
/// ones it no longer has, in one transaction. The number written.
expected<std::size_t> sync_declared_custom_tools(connection& c,
                                                 const std::vector<custom_tool_settings>& tools);

/// Every search engine, by name.
expected<std::vector<search_engine_settings>> list_search_engine_settings(connection& c);
/// The engine called `name` (not_found when there is none).
expected<search_engine_settings> find_search_engine(connection& c, std::string_view name);
/// Adds an engine; `conflict` when one of that name exists. A default engine takes the
/// default from any other.
expected<void> insert_search_engine_settings(connection& c, const search_engine_settings& engine);
/// Replaces the engine of that name, or adds it (a default one takes the default).
expected<void> upsert_search_engine(connection& c, const search_engine_settings& engine);
/// Deletes the engine called `name`; false when there was none.
expected<bool> delete_search_engine(connection& c, std::string_view name);
/// Writes every engine the config declares, marked `declared`, and deletes the declared
/// ones it no longer has, in one transaction. The number written.
expected<std::size_t>
sync_declared_search_engines(connection& c, const std::vector<search_engine_settings>& engines);

} // namespace troupe::storage
