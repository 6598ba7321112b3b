// Approvals (approvals.hpp).

#include "troupe/storage/approvals.hpp"

#include "query.hpp"

namespace troupe::storage {

namespace {

constexpr std::string_view approval_columns =
    "id, uuid, run_uuid, owner_user_id, agent, tool, call_id, arguments, reason, status, "
    "COALESCE(decided_by, 0), COALESCE(decided_at, 0), note, created_at, expires_at, round_json";

approval_record read_approval(const statement& s) {
  approval_record a;
  a.id = s.int64(0);
  a.uuid = s.text(1);
  a.run_uuid = s.text(2);
  a.owner_user_id = s.int64(3);
  a.agent = s.text(4);
  a.tool = s.text(5);
  a.call_id = s.text(6);
  a.arguments = s.text(7);
  a.reason = s.text(8);
  a.status = s.text(9);
  a.decided_by = s.int64(10);
  a.decided_at = s.int64(11);
  a.note = s.text(12);
  a.created_at = s.int64(13);
  a.expires_at = s.int64(14);
  a.round_json = s.text(15);
  return a;
}

} // namespace

expected<row_id> insert_approval(connection& c, const approval_record& a) {
  return detail::insert_row(
      c,
      "INSERT INTO approvals (uuid, run_uuid, owner_user_id, agent, tool, call_id, arguments, "
      "reason, status, note, created_at, expires_at, round_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
      "'pending', '', ?, ?, ?)",
      a.uuid, a.run_uuid, a.owner_user_id, a.agent, a.tool, a.call_id, a.arguments, a.reason,
      detail::stamp(a.created_at), a.expires_at, a.round_json);
}

expected<bool> decide_approval(connection& c, const std::string& uuid, const std::string& status,
                               row_id decided_by, const std::string& note,
                               std::int64_t decided_at) {
  if (status != "approved" && status != "denied" && status != "expired") {
    return fail(errc::invalid_argument, "an approval is approved, denied or expired");
  }
  std::optional<row_id> by;
  if (decided_by != 0) {
    by = decided_by;
  }
  auto ok = c.run("UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, note = ? "
                  "WHERE uuid = ? AND status = 'pending'",
                  status, by, detail::stamp(decided_at), note, uuid);
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  return c.changes() > 0;
}

expected<approval_record> find_approval(connection& c, const std::string& uuid) {
  return detail::query_one<approval_record>(
      c, "approval", detail::select(approval_columns, "approvals", "WHERE uuid = ?"), read_approval,
      uuid);
}

expected<std::vector<approval_record>> list_pending_approvals(connection& c, row_id owner) {
  if (owner == 0) {
    return detail::query_all<approval_record>(
        c, detail::select(approval_columns, "approvals", "WHERE status = 'pending' ORDER BY id"),
        read_approval);
  }
  return detail::query_all<approval_record>(
      c,
      detail::select(approval_columns, "approvals",
                     "WHERE status = 'pending' AND owner_user_id = ? ORDER BY id"),
      read_approval, owner);
}

expected<std::vector<approval_record>> list_run_approvals(connection& c,
                                                          const std::string& run_uuid) {
  return detail::query_all<approval_record>(
      c, detail::select(approval_columns, "approvals", "WHERE run_uuid = ? ORDER BY id"),
      read_approval, run_uuid);
}

expected<void> save_paused_round(connection& c, const std::string& run_uuid,
                                 const std::string& round_json) {
  return c.run("UPDATE approvals SET round_json = ? WHERE run_uuid = ? AND status = 'pending'",
               round_json, run_uuid);
}

expected<std::int64_t> expire_run_approvals(connection& c, const std::string& run_uuid,
                                            const std::string& note) {
  auto ok = c.run("UPDATE approvals SET status = 'expired', decided_at = ?, note = ? WHERE "
                  "run_uuid = ? AND status = 'pending'",
                  detail::stamp(0), note, run_uuid);
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  return static_cast<std::int64_t>(c.changes());
}

expected<bool> has_pending_approval(connection& c, const std::string& run_uuid) {
  auto n = c.query_int("SELECT COUNT(*) FROM approvals WHERE run_uuid = ? AND status = 'pending'",
                       run_uuid);
  if (!n) {
    return tl::unexpected(n.error());
  }
  return *n > 0;
}

} // namespace troupe::storage
