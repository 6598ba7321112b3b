#pragma once

/// \file
/// The memory tools over the node's memory service: `memory` (propose, search, read,
/// forget) and `session_search`. They act for the call's user (`tool_context::user_row`),
/// never another: every read filters by that user and a `forget` of another user's id is
/// "not found". A run's proposal is a candidate unless the agent has
/// `memory_autoapprove`; proposals go through the user's memory writer like every change.
///
/// Results are JSON:
///   memory propose  {"ok":true,"outcome":"created","memory":{…}} (refused: a tool error
///                   with kind policy_blocked whose message says why)
///   memory search   {"ok":true,"results":[{…}],"count":N}
///   memory read     {"ok":true,"memory":{…}}
///   memory forget   {"ok":true,"outcome":"forgotten","memory":{…}}
///   session_search  {"mode":"recent"|"search","query":…,"results":[…],"count":N}

#include <memory>

#include "troupe/actors/memory_service.hpp"
#include "troupe/tools/tool_source.hpp"

namespace troupe::actors {

/// The name of the memory tools' source.
inline constexpr std::string_view memory_source_name = "memory";

std::shared_ptr<const tools::tool> make_memory_tool(std::shared_ptr<memory_service> memory);
std::shared_ptr<const tools::tool> make_session_search_tool(std::shared_ptr<memory_service> memory);

/// A source (`memory_source_name`) offering both.
std::shared_ptr<tools::dynamic_tool_source>
make_memory_tool_source(std::shared_ptr<memory_service> memory);

} // namespace troupe::actors
