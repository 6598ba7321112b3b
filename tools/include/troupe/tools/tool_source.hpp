#pragma once

/// \file
/// Tool sources: where an agent's tools come from. The built-in tools are one source;
/// custom HTTP and script tools, MCP servers and skills are further ones. A source may
/// add or remove tools while the node runs: every change publishes a new immutable set
/// with the next version number, so whoever holds an earlier set (a run's snapshot,
/// see tool_resolver.hpp) keeps it unchanged. Thread-safe.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/tool.hpp"

namespace troupe::tools {

/// What one source offers at one moment. Immutable once published.
struct source_tools {
  /// The source's name.
  std::string source;
  /// Increases by one with every change of the source's tools; 0 before the first.
  std::uint64_t version = 0;
  /// In the source's order; names unique within the source.
  std::vector<std::shared_ptr<const tool>> tools;
};

/// Which of a source's tools an agent gets (see `tool_source::grant_for`).
enum class tool_grant {
  /// Those the agent's own `tools` list names (every one when the list is empty).
  by_agent_list,
  /// Every tool of the source, whatever the agent's list says.
  granted,
  /// None.
  denied,
};

/// A provider of tools. `current()` may be called from any thread at any time.
class tool_source {
public:
  virtual ~tool_source() = default;
  /// The source's name, as errors show it ("builtin", "mcp:files").
  virtual const std::string& name() const noexcept = 0;
  /// The tools now, as one consistent set; never null.
  virtual std::shared_ptr<const source_tools> current() const = 0;
  /// Which of its tools `agent` (its name) gets; by its own list unless the source says
  /// otherwise (an MCP server's `agents`).
  virtual tool_grant grant_for(std::string_view agent) const {
    (void)agent;
    return tool_grant::by_agent_list;
  }
};

/// A source whose tools change while the node runs. Each change replaces the published
/// set with a new one (copy on write, under a mutex held for the swap only).
class dynamic_tool_source final : public tool_source {
public:
  explicit dynamic_tool_source(std::string name);

  const std::string& name() const noexcept override {
    return name_;
  }
  std::shared_ptr<const source_tools> current() const override;
  /// The version of the current set.
  std::uint64_t version() const;

  /// Adds `t` after the others; fails on an invalid name or a name the source has.
  /// Returns the new version.
  expected<std::uint64_t> add(std::shared_ptr<const tool> t);
  /// Removes the tool called `name`; false (and no new version) when there is none.
  bool remove(std::string_view name);
  /// Replaces every tool in one change (an MCP server's new tool list); fails on an
  /// invalid or repeated name and then leaves the source as it was.
  expected<std::uint64_t> replace(std::vector<std::shared_ptr<const tool>> tools);

private:
  std::string name_;
  mutable std::mutex mutex_;
  std::shared_ptr<const source_tools> current_;
};

/// The tools a run carries out itself (finish, plan, sub_agent; see control_tools.hpp),
/// as tools a source can offer. Their `invoke` answers a failure: the run never calls it.
std::vector<std::shared_ptr<const tool>> control_tools();

/// The name of the built-in source.
inline constexpr std::string_view builtin_source_name = "builtin";

/// The built-in source: the workspace tools and the code interpreter
/// (`register_builtin_tools`, their file work on `pool`), then the control tools.
std::shared_ptr<dynamic_tool_source>
make_builtin_tool_source(code_interpreter_options options = {},
                         std::shared_ptr<blocking_pool> pool = nullptr);

/// A source called `name` holding `registry`'s tools in registration order, and then the
/// control tools when `with_control_tools` (for callers that build a registry of their
/// own, such as tests and benches).
std::shared_ptr<dynamic_tool_source>
make_registry_tool_source(std::string name, const tool_registry& registry, bool with_control_tools);

} // namespace troupe::tools
