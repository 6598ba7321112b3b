#include "troupe/storage/batch.hpp"

#include <exception>

#include <fmt/format.h>

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

} // namespace

std::vector<expected<std::int64_t>> apply_batch(connection& c, std::span<const write_op> ops) {
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
    }
    results.push_back(std::move(r));
  }
  if (auto ok = tx->commit(); !ok) {
    return fail_all(ops.size(), error{ok.error().code,
                                      fmt::format("batch commit failed: {}", ok.error().message)});
  }
  return results;
}

} // namespace troupe::storage
