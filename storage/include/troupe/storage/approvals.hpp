#pragma once

/// \file
/// Approvals (issue 19, schema version 15): a tool call that waits for a human. A row is
/// written pending when the run pauses; a decision (approved, denied, or expired at its
/// deadline) is written once: `decide_approval` changes only a pending row, so a second
/// decision finds nothing to change.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::storage {

struct approval_record {
  row_id id = 0;
  /// The public id (`/api/v1/approvals/{id}`, `/approve ID`).
  std::string uuid;
  std::string run_uuid;
  /// The run's conversation owner: who may decide besides an admin.
  row_id owner_user_id = 0;
  std::string agent;
  std::string tool;
  std::string call_id;
  /// The call's arguments (JSON text) and why it waits.
  std::string arguments;
  std::string reason;
  /// pending | approved | denied | expired
  std::string status = "pending";
  /// Who decided (0: nobody, or the deadline) and when; the decider's note.
  row_id decided_by = 0;
  std::int64_t decided_at = 0;
  std::string note;
  std::int64_t created_at = 0;
  /// When it is denied unless decided first (ms since the epoch).
  std::int64_t expires_at = 0;
  /// What the paused round had done when the run last saved it (JSON, written by the
  /// run: its calls and their state); empty before the first save. A restart resumes the
  /// run from it.
  std::string round_json;
};

/// Writes a pending approval; returns its row.
expected<row_id> insert_approval(connection& c, const approval_record& a);
/// Decides a pending approval: `status` approved, denied or expired. False when the row
/// was no longer pending (decided already) or does not exist.
expected<bool> decide_approval(connection& c, const std::string& uuid, const std::string& status,
                               row_id decided_by, const std::string& note,
                               std::int64_t decided_at = 0);
/// The approval with public id `uuid` (not_found when none).
expected<approval_record> find_approval(connection& c, const std::string& uuid);
/// Pending approvals, oldest first: of `owner` (0: everyone's).
expected<std::vector<approval_record>> list_pending_approvals(connection& c, row_id owner);
/// Every approval of run `run_uuid`, oldest first.
expected<std::vector<approval_record>> list_run_approvals(connection& c,
                                                          const std::string& run_uuid);
/// Saves the paused round of run `run_uuid` on each of its pending approvals.
expected<void> save_paused_round(connection& c, const std::string& run_uuid,
                                 const std::string& round_json);
/// Expires every pending approval of run `run_uuid` with `note` (its run ended); returns
/// how many.
expected<std::int64_t> expire_run_approvals(connection& c, const std::string& run_uuid,
                                            const std::string& note);
/// Whether run `run_uuid` has a pending approval.
expected<bool> has_pending_approval(connection& c, const std::string& run_uuid);

} // namespace troupe::storage
