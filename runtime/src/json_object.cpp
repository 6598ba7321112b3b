#include "troupe/runtime/json_object.hpp"

#include <fmt/format.h>

namespace troupe {

json_object_options json_object_options::tool_arguments() {
  json_object_options options;
  options.subject = "arguments";
  options.prefix = "arguments.";
  options.empty_is_object = true;
  options.null_is_absent = true;
  return options;
}

expected<json_object> json_object::parse(std::string_view text, json_object_options options) {
  json_object out;
  out.options_ = std::move(options);
  out.parser_ = std::make_shared<simdjson::dom::parser>();
  if (text.empty() && out.options_.empty_is_object) {
    text = "{}";
  }
  simdjson::dom::element root;
  // parse(const char*, size_t) copies into the parser's padded buffer.
  if (auto err = out.parser_->parse(text.data(), text.size()).get(root); err) {
    return fail(errc::invalid_argument,
                fmt::format("{}: is not valid JSON ({})", out.options_.subject,
                            simdjson::error_message(err)));
  }
  if (root.get_object().get(out.object_) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument,
                fmt::format("{}: must be a JSON object", out.options_.subject));
  }
  return out;
}

tl::unexpected<error> json_object::problem(std::string_view key, std::string_view what) const {
  return fail(errc::invalid_argument, fmt::format("{}{}: {}", options_.prefix, key, what));
}

std::optional<simdjson::dom::element> json_object::element(std::string_view key) const {
  simdjson::dom::element value;
  if (object_.at_key(key).get(value) != simdjson::SUCCESS ||
      (options_.null_is_absent && value.is_null())) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::string_view> json_object::keys() const {
  std::vector<std::string_view> out;
  for (auto [key, value] : object_) {
    out.push_back(key);
  }
  return out;
}

expected<std::optional<std::string>> json_object::text(std::string_view key) const {
  const auto value = element(key);
  if (!value) {
    return std::optional<std::string>{};
  }
  std::string_view s;
  if (value->get_string().get(s) != simdjson::SUCCESS) {
    return problem(key, "must be a string");
  }
  return std::optional<std::string>(std::string(s));
}

expected<std::string> json_object::required_text(std::string_view key, bool non_empty) const {
  auto value = text(key);
  if (!value) {
    return tl::unexpected(value.error());
  }
  if (!*value) {
    return problem(key, "is required");
  }
  if (non_empty && (*value)->empty()) {
    return problem(key, "must not be empty");
  }
  return std::move(**value);
}

expected<std::optional<std::int64_t>> json_object::integer(std::string_view key) const {
  const auto value = element(key);
  if (!value) {
    return std::optional<std::int64_t>{};
  }
  std::int64_t i = 0;
  if (value->get_int64().get(i) == simdjson::SUCCESS) {
    return std::optional<std::int64_t>(i);
  }
  double d = 0;
  // Whole doubles in the int64 range only: the cast of anything else is undefined.
  if (value->get_double().get(d) == simdjson::SUCCESS && d >= -9.2e18 && d <= 9.2e18 &&
      d == static_cast<double>(static_cast<std::int64_t>(d))) {
    return std::optional<std::int64_t>(static_cast<std::int64_t>(d));
  }
  return problem(key, "must be an integer");
}

expected<std::optional<bool>> json_object::boolean(std::string_view key) const {
  const auto value = element(key);
  if (!value) {
    return std::optional<bool>{};
  }
  bool b = false;
  if (value->get_bool().get(b) != simdjson::SUCCESS) {
    return problem(key, "must be true or false");
  }
  return std::optional<bool>(b);
}

expected<std::vector<std::string>> json_object::text_list(std::string_view key) const {
  std::vector<std::string> out;
  const auto value = element(key);
  if (!value) {
    return out;
  }
  simdjson::dom::array array;
  if (value->get_array().get(array) != simdjson::SUCCESS) {
    return problem(key, "must be an array of strings");
  }
  std::size_t index = 0;
  for (auto item : array) {
    std::string_view s;
    if (item.get_string().get(s) != simdjson::SUCCESS) {
      return problem(fmt::format("{}[{}]", key, index), "must be a string");
    }
    out.emplace_back(s);
    ++index;
  }
  return out;
}

expected<std::optional<json_object>> json_object::object(std::string_view key) const {
  const auto value = element(key);
  if (!value) {
    return std::optional<json_object>{};
  }
  json_object child;
  if (value->get_object().get(child.object_) != simdjson::SUCCESS) {
    return problem(key, "must be an object");
  }
  child.parser_ = parser_;
  child.options_ = options_;
  child.options_.prefix = fmt::format("{}{}.", options_.prefix, key);
  return std::optional<json_object>(std::move(child));
}

expected<std::vector<json_object>> json_object::objects(std::string_view key) const {
  std::vector<json_object> out;
  const auto value = element(key);
  if (!value) {
    return out;
  }
  simdjson::dom::array array;
  if (value->get_array().get(array) != simdjson::SUCCESS) {
    return problem(key, "must be an array of objects");
  }
  std::size_t index = 0;
  for (auto item : array) {
    json_object child;
    if (item.get_object().get(child.object_) != simdjson::SUCCESS) {
      return problem(fmt::format("{}[{}]", key, index), "must be an object");
    }
    child.parser_ = parser_;
    child.options_ = options_;
    child.options_.prefix = fmt::format("{}{}[{}].", options_.prefix, key, index);
    out.push_back(std::move(child));
    ++index;
  }
  return out;
}

} // namespace troupe
