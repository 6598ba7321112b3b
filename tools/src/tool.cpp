#include "troupe/tools/tool.hpp"

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
