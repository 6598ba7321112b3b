#pragma once

// The statement helpers the repositories share (private to storage/): time stamps,
// inserts, single-row changes and typed queries over a cached statement.

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::storage {

namespace detail {

inline std::int64_t stamp(std::int64_t t) {
  return t != 0 ? t : now_millis();
}

template <class... Ts>
expected<row_id> insert_row(connection& c, std::string_view sql, const Ts&... args) {
  auto ok = c.run(sql, args...);
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  return c.last_insert_id();
}

// Runs an UPDATE/DELETE that must touch exactly one row.
template <class... Ts>
expected<void> change_one(connection& c, std::string_view what, row_id id, std::string_view sql,
                          const Ts&... args) {
  auto ok = c.run(sql, args...);
  if (!ok) {
    return ok;
  }
  if (c.changes() == 0) {
    return fail(errc::not_found, fmt::format("no {} with id {}", what, id));
  }
  return {};
}

template <class Record, class Read, class... Ts>
expected<Record> query_one(connection& c, std::string_view what, std::string_view sql, Read read,
                           const Ts&... args) {
  auto st = c.prepare(sql);
  if (!st) {
    return tl::unexpected(st.error());
  }
  if (auto b = st->bind_all(args...); !b) {
    return tl::unexpected(b.error());
  }
  auto row = st->step();
  if (!row) {
    return tl::unexpected(row.error());
  }
  if (!*row) {
    return fail(errc::not_found, fmt::format("no such {}", what));
  }
  return read(*st);
}

template <class Record, class Read, class... Ts>
expected<std::vector<Record>> query_all(connection& c, std::string_view sql, Read read,
                                        const Ts&... args) {
  auto st = c.prepare(sql);
  if (!st) {
    return tl::unexpected(st.error());
  }
  if (auto b = st->bind_all(args...); !b) {
    return tl::unexpected(b.error());
  }
  std::vector<Record> out;
  for (;;) {
    auto row = st->step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      return out;
    }
    out.push_back(read(*st));
  }
}

inline std::string select(std::string_view columns, std::string_view table, std::string_view rest) {
  return fmt::format("SELECT {} FROM {} {}", columns, table, rest);
}

} // namespace detail

} // namespace troupe::storage
