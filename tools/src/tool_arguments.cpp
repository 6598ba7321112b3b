#include "tool_arguments.hpp"

#include <fmt/format.h>

namespace troupe::tools::detail {

expected<json_object> parse_tool_arguments(std::string_view json) {
  json_object_options options;
  options.subject = "arguments";
  options.prefix = "arguments.";
  options.empty_is_object = true;
  options.null_is_absent = true;
  return json_object::parse(json, std::move(options));
}

tl::unexpected<error> argument_error(std::string_view key, std::string_view problem) {
  return fail(errc::invalid_argument, fmt::format("arguments.{}: {}", key, problem));
}

} // namespace troupe::tools::detail
