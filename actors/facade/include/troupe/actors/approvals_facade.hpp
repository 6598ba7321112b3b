#pragma once

/// \file
/// The approvals facade (issue 19): how the HTTP layer and the channels hand a human's
/// decision on a waiting tool call to the run that waits, without seeing CAF. The
/// decision's durable record is the `approvals` row (storage/approvals.hpp); this facade
/// arbitrates between the decision and the approval's deadline, which may race: whoever
/// claims the approval first decides it, the other gets `taken`.
///
/// A decision is made in three steps: `claim`, the row written (decide_approval), then
/// `deliver` (or `release` when the write failed). A decision on an approval no live run
/// waits for (the node restarted and has not resumed the run yet) is kept by `deliver`
/// and handed to the run when it registers the approval again.

#include <cstdint>
#include <string>

namespace troupe::actors {

class approvals_facade {
public:
  virtual ~approvals_facade() = default;

  enum class claim_result {
    /// No live run waits for it here (the node restarted since, or the run ended): the
    /// stored row alone decides.
    not_live,
    /// The caller now owns the decision and must `deliver` it (or `release` it).
    claimed,
    /// Someone else decided it first (a decision, or the deadline).
    taken,
  };
  virtual claim_result claim(const std::string& id) = 0;
  /// Gives a claim back: the decision could not be stored.
  virtual void release(const std::string& id) = 0;
  /// Hands a stored decision to the waiting run (approve: the tool runs once; deny: the
  /// call ends as a policy_blocked result), or keeps it for the run that registers the
  /// approval later (a run resumed after a restart). `decided_by` is the user's row.
  virtual void deliver(const std::string& id, bool approved, std::string note,
                       std::int64_t decided_by) = 0;
};

} // namespace troupe::actors
