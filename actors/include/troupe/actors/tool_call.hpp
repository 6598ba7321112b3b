#pragma once

/// \file
/// The tool_call actor: one per tool call of a run. It runs the tool as a coroutine on
/// the io executor (through the bridge), enforces the call's timeout, and answers its
/// run with the result. Cancelling it — or its run going away — cancels the coroutine,
/// which kills the call's sandboxed processes.
///
/// Its interface is `tool_call_actor` below.

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <caf/all.hpp>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/run.hpp"
#include "troupe/tools/sandbox.hpp"
#include "troupe/tools/tool.hpp"

namespace troupe::actors {

/// The call's own timer: the call's timeout passed.
using call_timeout_atom = caf::atom_constant<caf::atom("timeout")>;

struct tool_call_spec {
  std::shared_ptr<const tools::tool> impl;
  std::shared_ptr<const tools::sandbox_runner> sandbox;
  std::string arguments;
  tools::tool_context context;
  /// Where the tool's coroutine runs.
  boost::asio::any_io_executor executor;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

/// The tool_call's interface.
///   (run_atom)    -> tools::tool_result   starts the call; answered when it ends (a
///                                         timeout is a failure of kind "timeout")
///   (cancel_atom)                         stops the call; the pending answer says so
/// Sent by the call to itself (not for others):
///   (call_timeout_atom)                   the call's timeout passed
///   (io_done_atom, io_completion)         the tool's coroutine finished
using tool_call_actor = caf::typed_actor<caf::replies_to<run_atom>::with<tools::tool_result>,
                                         caf::reacts_to<cancel_atom>,
                                         caf::reacts_to<call_timeout_atom>, io_completion_handler>;

/// Spawns a tool_call actor that watches `owner` (its run; it is never sent anything):
/// if the owner dies, the call is cancelled and the actor quits. An invalid owner is
/// not watched.
tool_call_actor spawn_tool_call(caf::actor_system& system, tool_call_spec spec,
                                caf::actor_addr owner);

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::tools::tool_result)
