#pragma once

// Private to troupe_tools: typed access to a tool call's JSON arguments, with errors
// that name the argument (the model reads them and retries).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "troupe/runtime/error.hpp"

namespace troupe::tools::detail {

class tool_arguments {
public:
  /// Parses `json`, which must be an object ("" counts as {}).
  static expected<tool_arguments> parse(std::string_view json);

  /// A string argument; nullopt when absent; an error when of another type.
  expected<std::optional<std::string>> text(std::string_view key) const;
  /// A required string argument.
  expected<std::string> required_text(std::string_view key) const;
  /// An integer argument (JSON numbers with no fraction).
  expected<std::optional<std::int64_t>> integer(std::string_view key) const;
  expected<std::optional<bool>> boolean(std::string_view key) const;
  /// An array of strings.
  expected<std::vector<std::string>> text_list(std::string_view key) const;
  /// The raw element for structured arguments; nullopt when absent.
  std::optional<simdjson::dom::element> element(std::string_view key) const;

private:
  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::object object_;
  std::string storage_;
};

/// `arguments.<key>: <problem>` as an invalid_argument error.
tl::unexpected<error> argument_error(std::string_view key, std::string_view problem);

} // namespace troupe::tools::detail
