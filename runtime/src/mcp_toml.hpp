#pragma once

// Private to runtime/src: reading `[[mcp_servers]]` tables (mcp_config.hpp) for
// settings.cpp, which hands over the array as toml++ parsed it.

#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "troupe/runtime/mcp_config.hpp"

namespace troupe::detail {

/// Appends the servers of `array` (each a table) to `into`. Unknown keys and wrong types
/// are errors naming the file, the entry and the key; each entry is then checked with
/// `validate_mcp_server`.
expected<void> read_mcp_servers(std::vector<mcp_server_settings>& into, const toml::array& array,
                                std::string_view source_name);

} // namespace troupe::detail
