#pragma once

/// \file
/// A write to the database as a value: what it is (for errors and logs) and the typed
/// repository call that performs it. The store_writer applies write_ops in batches, each
/// in its own savepoint, so one failing write fails only its own caller.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::storage {

/// One write. `apply` runs on the writer connection inside an open transaction and
/// returns a row id (or 0 when the write has none).
struct write_op {
  std::string what;
  std::function<expected<std::int64_t>(connection&)> apply;
  /// Set by `append_message_op`: the message `apply` inserts. A batch inserts a run of
  /// such writes with one multi-row statement (the hot path of group commit).
  std::shared_ptr<const message_record> message;
  /// Called on the writer's thread with the row id each time the write is applied (a
  /// redone batch applies it again); may be empty.
  std::function<void(std::int64_t)> applied;
};

/// Wraps `f(connection&)` returning `expected<row_id>`, `expected<void>` or
/// `expected<journal_result>` (→ its id) as a write_op.
template <class F> write_op make_write(std::string what, F f) {
  return write_op{std::move(what),
                  [f = std::move(f)](connection& c) -> expected<std::int64_t> {
                    auto r = f(c);
                    using value_type = typename decltype(r)::value_type;
                    if (!r) {
                      return tl::unexpected(r.error());
                    }
                    if constexpr (std::is_void_v<value_type>) {
                      return std::int64_t{0};
                    } else if constexpr (std::is_integral_v<value_type>) {
                      return static_cast<std::int64_t>(*r);
                    } else {
                      return static_cast<std::int64_t>(r->id);
                    }
                  },
                  nullptr,
                  {}};
}

/// The writes the runtime makes most often.
write_op append_message_op(message_record m);
write_op edit_message_op(row_id id, std::string content);
write_op delete_message_op(row_id id);
write_op set_run_status_op(row_id id, run_status status, std::string error_text = {});
write_op append_step_op(execution_step_record step);

} // namespace troupe::storage
