#pragma once

/// \file
/// The tool resolver: how a run finds its tools. It holds the node's tool sources in
/// order and resolves one agent's tools into a snapshot: every source's current set,
/// taken once, with the agent's `tools` list applied. A run keeps its snapshot (an
/// immutable `shared_ptr<const tool_snapshot>`) for its whole life, whatever the sources
/// do meanwhile. Tool names are unique per agent: a name the agent uses that two
/// sources offer is an error naming both. Thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"
#include "troupe/tools/tool_source.hpp"

namespace troupe::tools {

/// One tool in a snapshot, with the source that offers it.
struct resolved_tool {
  std::shared_ptr<const tool> impl;
  std::string source;

  const tool_descriptor& descriptor() const noexcept {
    return impl->descriptor();
  }
};

/// The version of one source a snapshot was taken from.
struct source_version {
  std::string source;
  std::uint64_t version = 0;

  friend bool operator==(const source_version&, const source_version&) = default;
};

/// One agent's tools at one moment. Immutable.
class tool_snapshot {
public:
  /// The agent it was resolved for.
  const std::string& agent() const noexcept {
    return agent_;
  }
  /// Every tool of every source, in source order and then each source's order. A name
  /// that two sources offer and the agent does not use appears once, from the first.
  const std::vector<resolved_tool>& all() const noexcept {
    return all_;
  }
  /// The agent's tools, in the same order: those its `tools` list names, or every tool
  /// except sub_agent when the list is empty.
  const std::vector<resolved_tool>& selected() const noexcept {
    return selected_;
  }
  /// The tool called `name` among all tools, or null.
  const resolved_tool* find(std::string_view name) const noexcept;
  /// True when `name` is one of the agent's tools.
  bool is_selected(std::string_view name) const noexcept;
  /// The version of every source, in source order.
  const std::vector<source_version>& versions() const noexcept {
    return versions_;
  }

private:
  friend class tool_resolver;
  std::string agent_;
  std::vector<resolved_tool> all_;
  std::vector<resolved_tool> selected_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::vector<source_version> versions_;
};

/// The node's tool sources, and one agent's snapshot on request.
class tool_resolver {
public:
  /// Adds `source` after the others; fails when a source of that name exists.
  expected<void> add_source(std::shared_ptr<const tool_source> source);
  /// Removes the source called `name`; false when there is none. Snapshots taken before
  /// keep its tools.
  bool remove_source(std::string_view name);
  /// The sources' names, in order.
  std::vector<std::string> source_names() const;

  /// The snapshot of `agent`'s tools, `agent_tools` being its `tools` list (empty: every
  /// tool but sub_agent). Fails when the list names a tool no source offers (the error
  /// names the agent and the tool) or when a tool the agent uses is offered by two
  /// sources (the error names the tool and both sources).
  expected<std::shared_ptr<const tool_snapshot>>
  resolve(std::string_view agent, std::span<const std::string> agent_tools) const;

  /// The snapshot of `agent`'s tools as above, leaving out every tool not offered to it
  /// (`tool::offered_to`): a custom tool whose `agents` list does not name it, the web
  /// tools its `web_search` mode does not turn on. Its `tools` list naming such a tool
  /// fails, saying why.
  expected<std::shared_ptr<const tool_snapshot>> resolve(const agent_settings& agent) const;

private:
  expected<std::shared_ptr<const tool_snapshot>>
  resolve_for(std::string_view agent, std::span<const std::string> agent_tools,
              const agent_settings* settings) const;

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const tool_source>> sources_;
};

/// A resolver with the built-in source only (what a node starts with); the built-in
/// tools' file work runs on `pool` (the process's default pool when null).
std::shared_ptr<tool_resolver>
make_builtin_tool_resolver(code_interpreter_options options = {},
                           std::shared_ptr<blocking_pool> pool = nullptr);

} // namespace troupe::tools
