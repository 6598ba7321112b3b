// The node's live approvals (approval_registry.hpp).

#include "troupe/actors/approval_registry.hpp"

#include <optional>

namespace troupe::actors {

void approval_registry::add(const std::string& id, run_actor run) {
  std::optional<decision> made;
  {
    std::lock_guard lock(mutex_);
    if (auto it = kept_.find(id); it != kept_.end()) {
      made = std::move(it->second);
      kept_.erase(it);
    } else {
      live_[id] = entry{run, false};
    }
  }
  if (made) {
    caf::anon_send(run, approval_atom::value, id, made->approved, std::move(made->note),
                   made->decided_by);
  }
}

void approval_registry::forget(const std::string& id) {
  std::lock_guard lock(mutex_);
  live_.erase(id);
  kept_.erase(id);
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

void approval_registry::release(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (auto it = live_.find(id); it != live_.end()) {
    it->second.claimed = false;
  }
}

void approval_registry::deliver(const std::string& id, bool approved, std::string note,
                                std::int64_t decided_by) {
  run_actor run;
  {
    std::lock_guard lock(mutex_);
    auto it = live_.find(id);
    if (it == live_.end()) {
      // No run waits for it yet (a restart): kept for the run that registers it.
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(kept_, [&](const auto& k) { return now - k.second.at > kept_for; });
      kept_[id] = decision{approved, std::move(note), decided_by, now};
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
