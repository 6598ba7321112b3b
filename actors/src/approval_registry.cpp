// The node's live approvals (approval_registry.hpp).

#include "troupe/actors/approval_registry.hpp"

namespace troupe::actors {

void approval_registry::add(const std::string& id, run_actor run) {
  std::lock_guard lock(mutex_);
  live_[id] = entry{std::move(run), false};
}

void approval_registry::forget(const std::string& id) {
  std::lock_guard lock(mutex_);
  live_.erase(id);
}

approvals_facade::claim_result approval_registry::claim(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(id);
  if (it == live_.end()) {
    return claim_result::not_live;
  }
  if (it->second.claimed) {
    return claim_result::taken;
  }
  it->second.claimed = true;
  return claim_result::claimed;
}

void approval_registry::deliver(const std::string& id, bool approved, std::string note,
                                std::int64_t decided_by) {
  run_actor run;
  {
    std::lock_guard lock(mutex_);
    auto it = live_.find(id);
    if (it == live_.end()) {
      return;
    }
    run = it->second.run;
    live_.erase(it);
  }
  if (run) {
    caf::anon_send(run, approval_atom::value, id, approved, std::move(note), decided_by);
  }
}

} // namespace troupe::actors
