#pragma once

/// \file
/// Custom tools (issue 18): HTTP tools, whose request is built from templates with the
/// call's arguments as data (http_template.hpp) and sent under the private-address rule
/// (guarded_fetch.hpp) through the calling shard's HTTP client, and script tools, which
/// run python, javascript or bash in the sandbox with the arguments as JSON on stdin. The
/// node's custom tools form one tool source, `custom`, whose version moves on with every
/// change: a run keeps the set it started with.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/tool_config.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/tool_source.hpp"

namespace troupe::tools {

/// What custom tools use besides their own settings.
struct custom_tool_environment {
  /// Where `${NAME}` in a header value is looked up (the node's environment at start).
  std::map<std::string, std::string> environment;
  /// Which variables `${NAME}` may name.
  key_env_policy key_env;
  /// The interpreters of script tools.
  code_interpreter_options interpreters;
  /// Where a script tool's `file` is read (the default pool when null).
  std::shared_ptr<blocking_pool> pool;
};

/// Checks what `validate_custom_tool` leaves to this layer: the parameters compile as an
/// argument schema, and every `{param}` of the URL, the headers and the body is one of
/// its properties. Errors name the field.
expected<void> check_custom_tool(const custom_tool_settings& tool);

/// The tool `settings` describe (validated by `validate_custom_tool` and
/// `check_custom_tool`, which this calls again).
expected<std::shared_ptr<const tool>>
make_custom_tool(custom_tool_settings settings,
                 std::shared_ptr<const custom_tool_environment> environment);

/// The name of the custom tools' source.
inline constexpr std::string_view custom_source_name = "custom";

/// The node's custom tools and their source. Thread-safe.
class custom_tool_set {
public:
  /// `reserved`: names custom tools may not take (the built-in, memory and web tools).
  custom_tool_set(std::shared_ptr<const custom_tool_environment> environment,
                  std::vector<std::string> reserved);

  /// The source runs resolve from.
  std::shared_ptr<const tool_source> source() const {
    return source_;
  }

  /// Checks `tool` as `install` would, without installing it.
  expected<void> check(const custom_tool_settings& tool) const;
  /// Adds `tool`, or replaces the tool of its name; a disabled tool is kept but offered to
  /// no run. Returns the source's new version.
  expected<std::uint64_t> install(custom_tool_settings tool);
  /// Removes the tool called `name`; false when there is none.
  bool remove(std::string_view name);
  /// Replaces every tool at once (the tools table at start); fails on the first bad one
  /// and then changes nothing.
  expected<std::uint64_t> replace_all(std::vector<custom_tool_settings> tools);
  /// Every tool's settings, by name.
  std::vector<custom_tool_settings> all() const;

private:
  expected<std::uint64_t> publish();

  std::shared_ptr<const custom_tool_environment> environment_;
  std::vector<std::string> reserved_;
  std::shared_ptr<dynamic_tool_source> source_;
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<custom_tool_settings, std::shared_ptr<const tool>>, std::less<>>
      tools_;
};

} // namespace troupe::tools
