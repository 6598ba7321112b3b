#pragma once

// Private to runtime/src: reading one entry of an array of tables (`[[agents]]`,
// `[[tools]]`, `[[mcp_servers]]`, …) key by key, each with its type, so that settings.cpp,
// tool_config.cpp and mcp_config.cpp refuse wrong types and unknown keys with the same
// messages: "<file>: [[<what>]] entry <n>: '<key>' must be <type>" and
// "<file>:<line>: unknown key '<key>' in [[<what>]] entry <n>". And the other way, for
// `--print-config`: a string or a list of strings written as TOML.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "troupe/runtime/error.hpp"

namespace troupe::detail {

/// `text` as a TOML basic string: quotes, backslashes and control characters escaped.
std::string toml_string(std::string_view text);
/// `items` as a TOML array of basic strings.
std::string toml_string_list(const std::vector<std::string>& items);

class toml_entry {
public:
  /// `what` names the array (`tools`), `index` the entry within it (from 0).
  toml_entry(const toml::table& table, std::string_view what, std::string_view source,
             std::size_t index)
      : table_(table), what_(what), source_(source), index_(index) {}

  /// Each reader leaves `into` as it was when the key is absent.
  expected<void> text(std::string_view key, std::string& into);
  expected<void> text_list(std::string_view key, std::vector<std::string>& into);
  /// A table of strings (`env = { A = "1" }`).
  expected<void> text_map(std::string_view key, std::map<std::string, std::string>& into);
  expected<void> boolean(std::string_view key, bool& into);
  /// A whole number from `min` to `max` (a float is refused: toml++ converts one to an
  /// integer with a cast that is undefined behaviour when it is out of range).
  template <class Integer>
  expected<void> number(std::string_view key, Integer& into, std::int64_t min, std::int64_t max) {
    auto value = whole_number(key, min, max);
    if (!value) {
      return tl::unexpected(value.error());
    }
    if (*value) {
      into = static_cast<Integer>(**value);
    }
    return {};
  }

  /// Fails on the first key no reader asked for.
  expected<void> no_unknown_keys() const;

  /// Marks `key` as read and gives its node, or null when the entry has none: for the
  /// readers of one file's own shapes.
  const toml::node* take(std::string_view key);
  /// The error for `key` holding something other than `expected_type`.
  tl::unexpected<error> wrong(std::string_view key, std::string_view expected_type) const;

private:
  /// The number at `key` (nullopt when absent), or the error.
  expected<std::optional<std::int64_t>> whole_number(std::string_view key, std::int64_t min,
                                                     std::int64_t max);

  const toml::table& table_;
  std::string_view what_;
  std::string_view source_;
  std::size_t index_;
  std::vector<std::string> seen_;
};

/// The first failure among `results` (in argument order), or success.
template <class... Results> expected<void> first_failure(const Results&... results) {
  expected<void> out;
  ((out = !out ? out : results), ...);
  return out;
}

} // namespace troupe::detail
