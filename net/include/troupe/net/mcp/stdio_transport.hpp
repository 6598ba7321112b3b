#pragma once

/// \file
/// The stdio transport: the server is a child process that reads JSON-RPC messages on
/// stdin and writes them on stdout, one per line; its stderr is its log, relayed to
/// troupe's log line by line. The process runs in a process group of its own, on the
/// host, not in the tool sandbox: it is a program the operator configured (as a service
/// manager would start it), often one that needs the network or files of its own. Its
/// environment is a small base (PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, TMPDIR,
/// as the process has them) plus the configured variables; troupe's own (provider keys
/// included) are not passed on.
///
/// Closing it follows the protocol's shutdown: stdin is closed, then SIGTERM and SIGKILL
/// go to the process group of a server that stays. A server that exits or closes its
/// stdout on its own is reported through `transport_events::on_closed` with its exit
/// status and the last lines it wrote to stderr.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "troupe/net/mcp/transport.hpp"

namespace troupe::net::mcp {

/// What to run.
struct stdio_options {
  /// The server's name, for the log.
  std::string name;
  /// The program (looked up on PATH) and its arguments.
  std::vector<std::string> argv;
  /// Variables added to the base environment (they win over it).
  std::map<std::string, std::string> env;
  /// The longest line (message) accepted from the server; a longer one ends the
  /// connection.
  std::size_t max_line_bytes = 16 * 1024 * 1024;
  /// How long `close` waits after closing stdin, and again after SIGTERM.
  std::chrono::milliseconds close_grace{2'000};
};

/// The variables a stdio server starts with before `stdio_options::env`: those of the
/// base set that `environment` has.
std::map<std::string, std::string>
stdio_base_environment(const std::map<std::string, std::string>& environment);

/// A stdio transport on `executor` (one thread at a time). Nothing runs until `start`.
std::shared_ptr<transport> make_stdio_transport(asio::any_io_executor executor,
                                                stdio_options options);

} // namespace troupe::net::mcp
