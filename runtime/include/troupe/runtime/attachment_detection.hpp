#pragma once

/// \file
/// Finding the files a program says it produced, from its output text: a JSON file
/// payload (`{"__type":"file","path":"…"}` or any `"path": "…"` member), an absolute
/// path printed alone on a line, and a path embedded in a sentence ("Saved to
/// /work/report.csv"). Pure text analysis: the caller keeps only paths that exist
/// inside the workspace.

#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// Candidate file paths mentioned in `output`, in order of first mention, without
/// duplicates. Paths are returned as written (absolute or relative).
std::vector<std::string> mentioned_paths(std::string_view output, std::size_t max_paths = 64);

} // namespace troupe
