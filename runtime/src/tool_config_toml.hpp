#pragma once

// Private to runtime/: reading `[[tools]]` and `[[search_engines]]` entries of a TOML
// config (tool_config.hpp), for settings.cpp. Every key must be known, with its type;
// errors name the file, the entry and the key.

#include <cstddef>
#include <string_view>

#include <toml++/toml.h>

#include "troupe/runtime/tool_config.hpp"

namespace troupe::detail {

/// Entry `index` (0-based) of `[[tools]]` in `source_name`.
expected<custom_tool_settings> read_tool_entry(const toml::table& table,
                                               std::string_view source_name, std::size_t index);

/// Entry `index` (0-based) of `[[search_engines]]` in `source_name`.
expected<search_engine_settings>
read_search_engine_entry(const toml::table& table, std::string_view source_name, std::size_t index);

} // namespace troupe::detail
