#include "troupe/storage/batch.hpp"

#include <exception>
#include <optional>

#include <fmt/format.h>

#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

namespace {

expected<std::int64_t> apply_one(connection& c, const write_op& op) {
  if (!op.apply) {
    return fail(errc::invalid_argument, fmt::format("write '{}' has nothing to apply", op.what));
  }
  try {
    return op.apply(c);
  } catch (const std::exception& e) {
    return fail(errc::internal, fmt::format("write '{}' threw: {}", op.what, e.what()));
  } catch (...) {
    return fail(errc::internal, fmt::format("write '{}' threw a non-standard exception", op.what));
  }
}

std::vector<expected<std::int64_t>> fail_all(std::size_t n, const error& why) {
  return std::vector<expected<std::int64_t>>(n, tl::unexpected(why));
}

// The fast path: all writes in one transaction, no savepoints. Returns nothing (and has
// rolled back) as soon as one write fails, so the caller can redo the batch carefully.
std::optional<std::vector<expected<std::int64_t>>>
apply_optimistically(connection& c, std::span<const write_op> ops) {
  std::vector<expected<std::int64_t>> results;
  results.reserve(ops.size());
  auto tx = transaction::begin(c);
  if (!tx) {
    return fail_all(ops.size(), tx.error());
  }
  std::vector<message_record> messages;
  for (std::size_t i = 0; i < ops.size();) {
    if (ops[i].message) {
      // A run of message appends: one multi-row INSERT per chunk.
      messages.clear();
      for (; i < ops.size() && ops[i].message; ++i) {
        messages.push_back(*ops[i].message);
      }
      auto ids = insert_messages(c, messages);
      if (!ids || ids->size() != messages.size()) {
        (void)tx->rollback();
        return std::nullopt;
      }
      const auto first = i - ids->size();
      for (std::size_t k = 0; k < ids->size(); ++k) {
        if (ops[first + k].applied) {
          ops[first + k].applied((*ids)[k]);
        }
        results.emplace_back((*ids)[k]);
      }
      continue;
    }
    auto r = apply_one(c, ops[i]);
    if (!r) {
      (void)tx->rollback();
      return std::nullopt;
    }
    if (ops[i].applied) {
      ops[i].applied(*r);
    }
    results.push_back(std::move(r));
    ++i;
  }
  if (auto ok = tx->commit(); !ok) {
    return fail_all(ops.size(), error{ok.error().code,
                                      fmt::format("batch commit failed: {}", ok.error().message)});
  }
  return results;
}

// The careful path: each write in its own savepoint, so a failure is undone alone.
std::vector<expected<std::int64_t>> apply_with_savepoints(connection& c,
                                                          std::span<const write_op> ops) {
  std::vector<expected<std::int64_t>> results;
  results.reserve(ops.size());
  auto tx = transaction::begin(c);
  if (!tx) {
    return fail_all(ops.size(), tx.error());
  }
  for (const auto& op : ops) {
    if (auto sp = c.run("SAVEPOINT write_op"); !sp) {
      return fail_all(ops.size(), sp.error());
    }
    auto r = apply_one(c, op);
    if (!r) {
      // Undo this write alone; the savepoint stays open until released.
      (void)c.run("ROLLBACK TO write_op");
    }
    if (!c.in_transaction()) {
      // SQLite aborted the whole transaction (disk full, I/O error): nothing holds.
      const error why = r ? error{errc::io_error, "the batch transaction was aborted"} : r.error();
      return fail_all(ops.size(),
                      error{why.code, fmt::format("batch rolled back by SQLite: {}", why.message)});
    }
    if (auto rel = c.run("RELEASE write_op"); !rel) {
      return fail_all(ops.size(), rel.error());
    }
    if (!r) {
      r.error().message = fmt::format("{}: {}", op.what, r.error().message);
    } else if (op.applied) {
      op.applied(*r);
    }
    results.push_back(std::move(r));
  }
  if (auto ok = tx->commit(); !ok) {
    return fail_all(ops.size(), error{ok.error().code,
                                      fmt::format("batch commit failed: {}", ok.error().message)});
  }
  return results;
}

} // namespace

std::vector<expected<std::int64_t>> apply_batch(connection& c, std::span<const write_op> ops) {
  // A savepoint per write is what isolates a failure, but it is not free: FTS5 flushes
  // its pending index data at every savepoint, which made each insert about 5x slower.
  // Failures are rare, so try the batch without savepoints first and, only if a write
  // fails, roll everything back and redo the batch with a savepoint per write. Redoing
  // is safe: the rollback undid every effect, and a write_op is a pure function of the
  // database state.
  if (auto fast = apply_optimistically(c, ops)) {
    return std::move(*fast);
  }
  return apply_with_savepoints(c, ops);
}

} // namespace troupe::storage
