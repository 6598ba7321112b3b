#pragma once

/// \file
/// The descriptors of the memory tools (issue 15): `memory` (propose, search, read,
/// forget the user's durable memories) and `session_search` (the user's recent
/// conversations, or snippets of their past messages). The tools themselves work on the
/// node's memory service and live in actors/ (`actors/memory_tools.hpp`); agents name
/// them in `tools` like any other.

#include <string>
#include <vector>

#include "troupe/tools/tool_catalog.hpp"

namespace troupe::tools {

const tool_descriptor& memory_tool_descriptor();
const tool_descriptor& session_search_tool_descriptor();

/// `memory` and `session_search`.
std::vector<std::string> memory_tool_names();

/// What session_search's `limit` defaults to, and its most.
inline constexpr int session_search_default_limit = 5;
inline constexpr int session_search_max_limit = 20;

} // namespace troupe::tools
