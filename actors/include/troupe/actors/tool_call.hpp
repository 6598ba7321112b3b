#pragma once

/// \file
/// The tool_call actor: one per tool call of a run. It runs the tool as a coroutine on
/// the io executor (through the bridge), enforces the call's timeout, and answers its
/// run with the result. Cancelling it — or its run going away — cancels the coroutine,
/// which kills the call's sandboxed processes.
///
/// Interface (untyped):
///   (run_atom)    -> tools::tool_result   starts the call; answered when it ends (a
///                                         timeout is a failure of kind "timeout")
///   (cancel_atom) -> void                 stops the call; the pending answer says so

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <caf/all.hpp>

#include "troupe/tools/sandbox.hpp"
#include "troupe/tools/tool.hpp"

namespace troupe::actors {

struct tool_call_spec {
  std::shared_ptr<const tools::tool> impl;
  std::shared_ptr<const tools::sandbox_runner> sandbox;
  std::string arguments;
  tools::tool_context context;
  /// Where the tool's coroutine runs.
  boost::asio::any_io_executor executor;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

/// Spawns a tool_call actor that watches `owner` (its run): if the owner dies, the call
/// is cancelled and the actor quits.
caf::actor spawn_tool_call(caf::actor_system& system, tool_call_spec spec, caf::actor owner);

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::tools::tool_result)
