#pragma once

/// \file
/// The node's live approvals (issue 19): which run waits for which approval. A run
/// registers an approval once its row is stored (or again, resumed after a restart) and
/// forgets it when it ends; a decision or the deadline claims it (once) and is delivered
/// to the run as (approval_atom, id, approved, note, decided_by). A decision stored while
/// no run waits is kept (for an hour at most) and delivered when one registers the
/// approval. Thread-safe.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "troupe/actors/approvals_facade.hpp"
#include "troupe/actors/run.hpp"

namespace troupe::actors {

class approval_registry final : public approvals_facade {
public:
  /// `run` waits for approval `id`; a decision kept for it is delivered at once.
  void add(const std::string& id, run_actor run);
  /// Forgets `id` (its run ended, or took its decision from the row).
  void forget(const std::string& id);

  claim_result claim(const std::string& id) override;
  void release(const std::string& id) override;
  void deliver(const std::string& id, bool approved, std::string note,
               std::int64_t decided_by) override;

  /// How long a decision waits for its run to register.
  static constexpr std::chrono::hours kept_for{1};

private:
  struct entry {
    run_actor run;
    bool claimed = false;
  };
  struct decision {
    bool approved = false;
    std::string note;
    std::int64_t decided_by = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::mutex mutex_;
  std::map<std::string, entry, std::less<>> live_;
  std::map<std::string, decision, std::less<>> kept_;
};

} // namespace troupe::actors
