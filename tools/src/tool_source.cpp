#include "troupe/tools/tool_source.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "troupe/tools/control_tools.hpp"

namespace troupe::tools {

namespace {

/// A control tool offered by a source: the run executes it itself, never through here.
class control_tool final : public tool {
public:
  explicit control_tool(const tool_descriptor& d) : descriptor_(d) {}

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  boost::asio::awaitable<tool_result> invoke(std::string, tool_context) const override {
    co_return tool_failure("tool_error",
                           fmt::format("'{}' is carried out by the run itself", descriptor_.name));
  }

private:
  tool_descriptor descriptor_;
};

/// Fails unless every tool has a valid name and no name repeats.
expected<void> check_names(std::string_view source,
                           const std::vector<std::shared_ptr<const tool>>& tools) {
  std::set<std::string_view> seen;
  for (const auto& t : tools) {
    if (!t) {
      return fail(errc::invalid_argument, fmt::format("source '{}': a tool is null", source));
    }
    const auto& name = t->descriptor().name;
    if (!valid_tool_name(name)) {
      return fail(
          errc::invalid_argument,
          fmt::format("source '{}': '{}' is not a valid tool name (1-64 of A-Z a-z 0-9 _ -)",
                      source, name));
    }
    if (!seen.insert(name).second) {
      return fail(errc::conflict,
                  fmt::format("source '{}' has two tools named '{}'", source, name));
    }
  }
  return {};
}

} // namespace

dynamic_tool_source::dynamic_tool_source(std::string name)
    : name_(std::move(name)),
      current_(std::make_shared<const source_tools>(source_tools{name_, 0, {}})) {}

std::shared_ptr<const source_tools> dynamic_tool_source::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::uint64_t dynamic_tool_source::version() const {
  std::lock_guard lock(mutex_);
  return current_->version;
}

expected<std::uint64_t> dynamic_tool_source::add(std::shared_ptr<const tool> t) {
  std::lock_guard lock(mutex_);
  auto tools = current_->tools;
  tools.push_back(std::move(t));
  if (auto ok = check_names(name_, tools); !ok) {
    return tl::unexpected(ok.error());
  }
  const auto version = current_->version + 1;
  current_ = std::make_shared<const source_tools>(source_tools{name_, version, std::move(tools)});
  return version;
}

bool dynamic_tool_source::remove(std::string_view name) {
  std::lock_guard lock(mutex_);
  auto tools = current_->tools;
  const auto gone =
      std::erase_if(tools, [&](const auto& t) { return t->descriptor().name == name; });
  if (gone == 0) {
    return false;
  }
  current_ = std::make_shared<const source_tools>(
      source_tools{name_, current_->version + 1, std::move(tools)});
  return true;
}

expected<std::uint64_t>
dynamic_tool_source::replace(std::vector<std::shared_ptr<const tool>> tools) {
  if (auto ok = check_names(name_, tools); !ok) {
    return tl::unexpected(ok.error());
  }
  std::lock_guard lock(mutex_);
  const auto version = current_->version + 1;
  current_ = std::make_shared<const source_tools>(source_tools{name_, version, std::move(tools)});
  return version;
}

std::vector<std::shared_ptr<const tool>> control_tools() {
  std::vector<std::shared_ptr<const tool>> out;
  for (const auto& d : control_tool_descriptors()) {
    out.push_back(std::make_shared<control_tool>(d));
  }
  return out;
}

std::shared_ptr<dynamic_tool_source> make_registry_tool_source(std::string name,
                                                               const tool_registry& registry,
                                                               bool with_control_tools) {
  std::vector<std::shared_ptr<const tool>> tools;
  for (const auto& d : registry.catalog().all()) {
    if (auto t = registry.find(d.name)) {
      tools.push_back(std::move(t));
    }
  }
  if (with_control_tools) {
    for (auto& t : control_tools()) {
      // A registry tool of the same name as a control tool stays the registry's.
      if (!registry.find(t->descriptor().name)) {
        tools.push_back(std::move(t));
      }
    }
  }
  auto source = std::make_shared<dynamic_tool_source>(std::move(name));
  // The registry's names are valid and unique (it checks both), so this cannot fail.
  (void)source->replace(std::move(tools));
  return source;
}

std::shared_ptr<dynamic_tool_source> make_builtin_tool_source(code_interpreter_options options,
                                                              std::shared_ptr<blocking_pool> pool) {
  tool_registry registry;
  // Fixed tools with fixed names: a failure here is a programming error, caught by tests.
  (void)register_builtin_tools(registry, std::move(options), std::move(pool));
  return make_registry_tool_source(std::string(builtin_source_name), registry, true);
}

} // namespace troupe::tools
