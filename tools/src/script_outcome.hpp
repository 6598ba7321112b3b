#pragma once

// What the script tools (custom `script` tools and skills run as tools) answer: one shape
// for a script's outcome in the sandbox.

#include <string_view>

#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/sandbox.hpp"

namespace troupe::tools::detail {

/// Writes `text` as JSON when it is a JSON value, else as a string.
void json_or_text(json_writer& w, std::string_view text);

/// Writes the fields of a script's outcome into the object `w` has open. `ok`: `result`
/// (stdout without its trailing newline, as JSON when it is JSON) and `stderr` when there is
/// some; else `exit_code`, `stdout`, `stderr` and `error` (`timeout_error` when the script was
/// killed at its timeout). Then `sandboxed`, and `truncated` when an output was cut.
void write_script_outcome(json_writer& w, const sandbox_result& r, bool ok,
                          std::string_view timeout_error);

} // namespace troupe::tools::detail
