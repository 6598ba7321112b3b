#pragma once

/// \file
/// `troupe chat --agent NAME`: one agent run in-process (actor system, io thread, http
/// client, built-in tools, sandbox), its answer streamed to stdout and its steps to
/// stderr. The CLI wires flags to this; the logic lives here.

#include <filesystem>
#include <string>

#include "troupe/runtime/settings.hpp"

namespace troupe::actors {

struct agent_chat_options {
  /// Resolved settings with `[[providers]]` and `[[agents]]`.
  settings config;
  std::string agent;
  std::string message;
  /// The agent's workspace; empty: `<data_dir>/workspaces/<agent>`.
  std::filesystem::path workspace;
};

/// Runs the agent on the message. Returns the process exit code: 0 succeeded, 1 the run
/// failed or was cancelled, 2 a configuration error (unknown agent or provider).
int run_agent_chat(agent_chat_options options);

} // namespace troupe::actors
