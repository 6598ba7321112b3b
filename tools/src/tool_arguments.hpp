#pragma once

// Private to troupe_tools: a tool call's JSON arguments, read with errors that name the
// argument ("arguments.path: must be a string"; the model reads them and retries).

#include <string_view>

#include "troupe/runtime/error.hpp"
#include "troupe/runtime/json_object.hpp"

namespace troupe::tools::detail {

/// Parses a call's arguments, which must be an object ("" counts as {}); a null argument
/// counts as absent.
expected<json_object> parse_tool_arguments(std::string_view json);

/// `arguments.<key>: <problem>` as an invalid_argument error.
tl::unexpected<error> argument_error(std::string_view key, std::string_view problem);

} // namespace troupe::tools::detail
