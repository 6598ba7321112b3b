#pragma once

/// \file
/// troupe's error value: a code plus a human-readable message, carried across layer
/// boundaries in `tl::expected<T, troupe::error>`.

#include <string>
#include <string_view>
#include <system_error>

#include <tl/expected.hpp>

namespace troupe {

/// The kinds of failure every layer shares. Each layer converts its library's codes
/// (errno, curl, SQLite, simdjson, CAF) into one of these once, where the library is
/// called, and puts the library's own words into the message.
enum class errc {
  /// Not an error; never stored in a `troupe::error`.
  ok = 0,
  /// The caller passed something malformed or out of range (bad config, bad JSON).
  invalid_argument,
  /// The named thing does not exist.
  not_found,
  /// The thing exists already or conflicts with current state.
  conflict,
  /// The caller lacks the right to do this.
  permission_denied,
  /// A deadline passed before the operation completed.
  timeout,
  /// The operation was cancelled by its owner (shutdown, client gone, user cancel).
  cancelled,
  /// A size, count or rate limit was exceeded.
  limit_exceeded,
  /// A peer (actor, server, process) is gone or not answering.
  unavailable,
  /// A bounded backlog is full (the store writer's): nothing was done; retry later.
  overloaded,
  /// Input from outside (network, file, model) could not be parsed.
  parse_error,
  /// An operating-system or library I/O call failed.
  io_error,
  /// A bug in troupe: an invariant broke. Logged loudly.
  internal,
};

/// The category behind `troupe::errc`, so that it converts to `std::error_code`.
const std::error_category& troupe_category() noexcept;

/// Makes `troupe::errc` usable as a `std::error_code`.
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), troupe_category()};
}

/// The snake_case name of a code, as used in JSON error bodies and logs.
std::string_view to_string(errc e) noexcept;

/// A failure: what kind, and what happened in words a user can act on.
struct error {
  errc code = errc::internal;
  std::string message;

  friend bool operator==(const error&, const error&) = default;
};

/// Shorthand for building the unexpected side of an `expected`.
inline tl::unexpected<error> fail(errc code, std::string message) {
  return tl::unexpected<error>(error{code, std::move(message)});
}

/// A value or the reason there is none.
template <class T> using expected = tl::expected<T, error>;

} // namespace troupe

template <> struct std::is_error_code_enum<troupe::errc> : std::true_type {};
