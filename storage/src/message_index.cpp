#include "troupe/storage/message_index.hpp"

namespace troupe::storage {

expected<row_id> messages_indexed_to(connection& c) {
  if (!c.has_table("fts_progress") || !c.has_table("messages_fts")) {
    return 0;
  }
  auto to = c.query_int("SELECT indexed_to FROM fts_progress WHERE name = 'messages'");
  if (!to && to.error().code == errc::not_found) {
    return 0;
  }
  return to;
}

expected<row_id> next_message_id(connection& c) {
  auto indexed = messages_indexed_to(c);
  if (!indexed) {
    return indexed;
  }
  auto newest = c.query_int("SELECT coalesce(max(id), 0) FROM messages");
  if (!newest) {
    return newest;
  }
  return std::max(*indexed, *newest) + 1;
}

expected<std::int64_t> index_pending_messages(connection& c, std::int64_t max_rows) {
  auto from = messages_indexed_to(c);
  if (!from) {
    return tl::unexpected(from.error());
  }
  if (!c.has_table("messages_fts")) {
    return 0;
  }
  auto last = c.query_int("SELECT coalesce(max(id), 0) FROM (SELECT id FROM messages WHERE id > ? "
                          "ORDER BY id LIMIT ?)",
                          *from, max_rows);
  if (!last) {
    return tl::unexpected(last.error());
  }
  if (*last == 0) {
    return 0;
  }
  auto tx = transaction::begin(c);
  if (!tx) {
    return tl::unexpected(tx.error());
  }
  // One statement for the whole range: FTS5 keeps the terms in memory and writes them as
  // one segment when the transaction commits.
  if (auto ok = c.run("INSERT INTO messages_fts(rowid, content, owner_user_id) "
                      "SELECT id, content, owner_user_id FROM messages WHERE id > ? AND id <= ?",
                      *from, *last);
      !ok) {
    return tl::unexpected(ok.error());
  }
  const auto indexed = c.changes();
  if (auto ok = c.run("UPDATE fts_progress SET indexed_to = ? WHERE name = 'messages'", *last);
      !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok = tx->commit(); !ok) {
    return tl::unexpected(ok.error());
  }
  return indexed;
}

} // namespace troupe::storage
