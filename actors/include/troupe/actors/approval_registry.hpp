#pragma once

/// \file
/// The node's live approvals (issue 19): which run waits for which approval. A run
/// registers an approval once its row is stored and forgets it when it ends; a decision
/// or the deadline claims it (once) and is delivered to the run as
/// (approval_atom, id, approved, note, decided_by). Thread-safe.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "troupe/actors/approvals_facade.hpp"
#include "troupe/actors/run.hpp"

namespace troupe::actors {

class approval_registry final : public approvals_facade {
public:
  /// `run` waits for approval `id`.
  void add(const std::string& id, run_actor run);
  /// Forgets `id` (its run ended).
  void forget(const std::string& id);

  claim_result claim(const std::string& id) override;
  void deliver(const std::string& id, bool approved, std::string note,
               std::int64_t decided_by) override;

private:
  struct entry {
    run_actor run;
    bool claimed = false;
  };
  std::mutex mutex_;
  std::map<std::string, entry, std::less<>> live_;
};

} // namespace troupe::actors
