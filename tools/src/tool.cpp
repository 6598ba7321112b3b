#include "troupe/tools/tool.hpp"

#include "troupe/runtime/harness/blocker.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::tools {

tool_result tool_failure(std::string_view kind, std::string_view message) {
  json_writer w;
  w.begin_object().key("ok").value(false).key("error").value(message).end_object();
  tool_result r;
  r.ok = false;
  r.content = std::move(w).str();
  r.failure_kind = std::string(kind);
  return r;
}

std::string_view failure_kind_of_status(unsigned status) noexcept {
  const auto kind = harness::blocker_of_status(static_cast<int>(status));
  return harness::to_string(kind.value_or(harness::blocker_kind::tool_error));
}

std::string_view failure_kind_of(const error& e) noexcept {
  switch (e.code) {
    case errc::permission_denied:
      return "policy_blocked";
    case errc::timeout:
      return "timeout";
    case errc::invalid_argument:
      return "invalid_arguments";
    default:
      return "tool_error";
  }
}

expected<void> tool_registry::add(std::shared_ptr<const tool> t) {
  auto added = catalog_.add(t->descriptor());
  if (!added) {
    return added;
  }
  tools_.emplace(t->descriptor().name, std::move(t));
  return {};
}

std::shared_ptr<const tool> tool_registry::find(std::string_view name) const {
  const auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second;
}

} // namespace troupe::tools
