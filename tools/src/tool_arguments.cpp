#include "tool_arguments.hpp"

#include <fmt/format.h>

namespace troupe::tools::detail {

expected<json_object> parse_tool_arguments(std::string_view json) {
  return json_object::parse(json, json_object_options::tool_arguments());
}

tl::unexpected<error> argument_error(std::string_view key, std::string_view problem) {
  return fail(errc::invalid_argument, fmt::format("arguments.{}: {}", key, problem));
}

} // namespace troupe::tools::detail
