#pragma once

/// \file
/// The tool interface: what the run core calls for each tool call, and the registry of
/// tools by name. A tool runs as a coroutine on an io executor (the run actor starts it
/// through the bridge); cancelling the awaiting coroutine cancels the tool, including
/// any sandboxed process it started.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/approval.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/tools/tool_catalog.hpp"

namespace troupe::net {
class http_client;
} // namespace troupe::net

namespace troupe::tools {

class sandbox_runner;

/// A file a tool produced or found, relative to the workspace.
struct tool_artifact {
  std::string path;
  std::string mime;
  std::uint64_t size = 0;

  friend bool operator==(const tool_artifact&, const tool_artifact&) = default;
};

/// What a tool call gave back.
struct tool_result {
  /// False when the call failed; `content` then says why in words the model can act on.
  bool ok = true;
  /// What the model sees: JSON text (most tools) or plain text.
  std::string content;
  /// Files produced by the call (they become stored attachments of the run).
  std::vector<tool_artifact> artifacts;
  /// For failures, the harness's blocker vocabulary: invalid_arguments, not_found,
  /// permission_denied, policy_blocked, timeout, tool_error.
  std::string failure_kind;
};

/// A failed result with `kind` and `message` (content is `{"ok":false,"error":…}`).
tool_result tool_failure(std::string_view kind, std::string_view message);

/// The failure kind of an HTTP tool's answer with `status` (not 2xx): what the status
/// tells (harness::blocker_of_status), else tool_error.
std::string_view failure_kind_of_status(unsigned status) noexcept;
/// The failure kind of an error a tool met before it had an answer: a refused address is
/// policy_blocked, a deadline timeout, bad arguments invalid_arguments, else tool_error.
std::string_view failure_kind_of(const error& e) noexcept;

/// What a call may use: its workspace and the sandbox.
struct tool_context {
  /// The agent's workspace on the host; every path a tool touches stays inside it.
  std::filesystem::path workspace;
  std::string run_id;
  std::string call_id;
  /// The sandbox for tools that run code; null where none is configured.
  const sandbox_runner* sandbox = nullptr;
  /// The most bytes the workspace's regular files may hold after a write or an edit
  /// (`tools.workspace_max_bytes`); one that would go past it fails with a tool error that
  /// says so. 0: no cap.
  std::uint64_t workspace_max_bytes = 0;
  /// Whom the call works for (the memory tools' scope): the conversation's owner, the
  /// agent, the conversation's and the run's rows; 0: unknown.
  std::int64_t user_row = 0;
  std::int64_t agent_row = 0;
  std::int64_t conversation_row = 0;
  std::int64_t run_row = 0;
  /// The agent's `skills` list ("*": every skill): the skill tool answers only those.
  std::vector<std::string> skills{};
  /// The agent's `memory_autoapprove`: what it proposes is written active.
  bool memory_autoapprove = false;
  /// The HTTP client of the executor the call runs on (the run's shard): HTTP tools,
  /// web_search and web_fetch use its connection pool. Null: such tools fail closed.
  net::http_client* http = nullptr;
};

/// One tool.
class tool {
public:
  virtual ~tool() = default;
  /// Name, description, JSON Schema of the arguments, concurrency safety.
  virtual const tool_descriptor& descriptor() const noexcept = 0;
  /// Runs one call. `arguments` is the JSON text the model wrote (already validated
  /// against the schema by the caller, but tools check what they rely on).
  virtual boost::asio::awaitable<tool_result> invoke(std::string arguments,
                                                     tool_context context) const = 0;
  /// Whether `agent` may use the tool: a custom tool's `agents` list, the web tools'
  /// `web_search` mode. A tool not offered to an agent is, for that agent, absent.
  virtual bool offered_to(const agent_settings& agent) const noexcept {
    (void)agent;
    return true;
  }
  /// The tool's own approval setting (a `[[tools]]` entry's or a skill's `approval`,
  /// approval.hpp); unset: it says nothing.
  virtual std::optional<approval_mode> approval() const noexcept {
    return std::nullopt;
  }
  /// True for a tool that can change something in the world over HTTP (an HTTP tool
  /// whose method is not GET or HEAD): the strict approval profile asks about it.
  virtual bool writes_over_http() const noexcept {
    return false;
  }
};

/// Tools by name.
class tool_registry {
public:
  /// Adds a tool; fails on an invalid or duplicate name.
  expected<void> add(std::shared_ptr<const tool> t);
  /// The tool called `name`, or null.
  std::shared_ptr<const tool> find(std::string_view name) const;
  /// Descriptors of every tool, in registration order.
  const tool_catalog& catalog() const noexcept {
    return catalog_;
  }

private:
  tool_catalog catalog_;
  std::map<std::string, std::shared_ptr<const tool>, std::less<>> tools_;
};

} // namespace troupe::tools
