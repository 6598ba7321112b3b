#include "tool_arguments.hpp"

#include <fmt/format.h>

namespace troupe::tools::detail {

tl::unexpected<error> argument_error(std::string_view key, std::string_view problem) {
  return fail(errc::invalid_argument, fmt::format("arguments.{}: {}", key, problem));
}

expected<tool_arguments> tool_arguments::parse(std::string_view json) {
  tool_arguments args;
  args.parser_ = std::make_unique<simdjson::dom::parser>();
  args.storage_ = json.empty() ? std::string("{}") : std::string(json);
  simdjson::dom::element root;
  if (auto err = args.parser_->parse(args.storage_).get(root); err) {
    return fail(errc::invalid_argument,
                fmt::format("the arguments are not valid JSON: {}", simdjson::error_message(err)));
  }
  if (auto err = root.get_object().get(args.object_); err) {
    return fail(errc::invalid_argument, "the arguments must be a JSON object");
  }
  return args;
}

std::optional<simdjson::dom::element> tool_arguments::element(std::string_view key) const {
  simdjson::dom::element value;
  if (object_.at_key(key).get(value) != simdjson::SUCCESS || value.is_null()) {
    return std::nullopt;
  }
  return value;
}

expected<std::optional<std::string>> tool_arguments::text(std::string_view key) const {
  const auto value = element(key);
  if (!value) {
    return std::optional<std::string>{};
  }
  std::string_view s;
  if (value->get_string().get(s) != simdjson::SUCCESS) {
    return argument_error(key, "expected a string");
  }
  return std::optional<std::string>(std::string(s));
}

expected<std::string> tool_arguments::required_text(std::string_view key) const {
  auto value = text(key);
  if (!value) {
    return tl::unexpected(value.error());
  }
  if (!*value) {
    return argument_error(key, "is required");
  }
  return std::move(**value);
}

expected<std::optional<std::int64_t>> tool_arguments::integer(std::string_view key) const {
  const auto value = element(key);
  if (!value) {
    return std::optional<std::int64_t>{};
  }
  std::int64_t i = 0;
  if (value->get_int64().get(i) == simdjson::SUCCESS) {
    return std::optional<std::int64_t>(i);
  }
  double d = 0;
  if (value->get_double().get(d) == simdjson::SUCCESS &&
      d == static_cast<double>(static_cast<std::int64_t>(d))) {
    return std::optional<std::int64_t>(static_cast<std::int64_t>(d));
  }
  return argument_error(key, "expected a whole number");
}

expected<std::optional<bool>> tool_arguments::boolean(std::string_view key) const {
  const auto value = element(key);
  if (!value) {
    return std::optional<bool>{};
  }
  bool b = false;
  if (value->get_bool().get(b) != simdjson::SUCCESS) {
    return argument_error(key, "expected true or false");
  }
  return std::optional<bool>(b);
}

expected<std::vector<std::string>> tool_arguments::text_list(std::string_view key) const {
  std::vector<std::string> out;
  const auto value = element(key);
  if (!value) {
    return out;
  }
  simdjson::dom::array array;
  if (value->get_array().get(array) != simdjson::SUCCESS) {
    return argument_error(key, "expected an array of strings");
  }
  std::size_t index = 0;
  for (auto item : array) {
    std::string_view s;
    if (item.get_string().get(s) != simdjson::SUCCESS) {
      return argument_error(fmt::format("{}[{}]", key, index), "expected a string");
    }
    out.emplace_back(s);
    ++index;
  }
  return out;
}

} // namespace troupe::tools::detail
