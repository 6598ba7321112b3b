#include "troupe/tools/argument_validator.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <simdjson.h>

#include "troupe/runtime/canonical_json.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::tools {

namespace detail {

/// JSON value kinds a schema may name, as bits.
enum type_bit : unsigned {
  type_object = 1u << 0,
  type_string = 1u << 1,
  type_number = 1u << 2,
  type_integer = 1u << 3,
  type_boolean = 1u << 4,
  type_array = 1u << 5,
  type_null = 1u << 6,
};

/// One allowed enum value, kept as canonical JSON text plus a display form.
struct enum_value {
  std::string canonical;
  std::string display;
  std::optional<double> number;
};

struct schema_node;

struct property {
  std::string name;
  std::shared_ptr<const schema_node> schema;
};

/// A compiled schema: only the keywords the validator enforces.
struct schema_node {
  /// 0 = any type.
  unsigned types = 0;
  std::vector<property> properties;
  std::vector<std::string> required;
  std::optional<std::vector<enum_value>> enum_values;
  std::optional<double> minimum;
  std::optional<double> maximum;
  std::optional<double> exclusive_minimum;
  std::optional<double> exclusive_maximum;
  std::optional<std::uint64_t> min_length;
  std::optional<std::uint64_t> max_length;
  std::optional<std::uint64_t> min_items;
  std::optional<std::uint64_t> max_items;
  std::shared_ptr<const schema_node> items;
  bool additional_allowed = true;
  std::shared_ptr<const schema_node> additional_schema;
};

} // namespace detail

namespace {

using detail::schema_node;
using simdjson::dom::element;
using simdjson::dom::element_type;

std::optional<unsigned> type_from_name(std::string_view name) {
  if (name == "object") {
    return detail::type_object;
  }
  if (name == "string") {
    return detail::type_string;
  }
  if (name == "number") {
    return detail::type_number;
  }
  if (name == "integer") {
    return detail::type_integer;
  }
  if (name == "boolean") {
    return detail::type_boolean;
  }
  if (name == "array") {
    return detail::type_array;
  }
  if (name == "null") {
    return detail::type_null;
  }
  return std::nullopt;
}

std::string type_names(unsigned types) {
  std::string out;
  const std::pair<unsigned, const char*> names[] = {
      {detail::type_object, "object"}, {detail::type_array, "array"},
      {detail::type_string, "string"}, {detail::type_integer, "integer"},
      {detail::type_number, "number"}, {detail::type_boolean, "boolean"},
      {detail::type_null, "null"}};
  for (const auto& [bit, name] : names) {
    if ((types & bit) != 0) {
      out += (out.empty() ? "" : " or ") + std::string(name);
    }
  }
  return out;
}

std::optional<double> as_number(element e) {
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double d = 0;
  switch (e.type()) {
    case element_type::INT64:
      return e.get(i) == simdjson::SUCCESS ? std::optional<double>(static_cast<double>(i))
                                           : std::nullopt;
    case element_type::UINT64:
      return e.get(u) == simdjson::SUCCESS ? std::optional<double>(static_cast<double>(u))
                                           : std::nullopt;
    case element_type::DOUBLE:
      return e.get(d) == simdjson::SUCCESS ? std::optional<double>(d) : std::nullopt;
    default:
      return std::nullopt;
  }
}

bool is_integral(element e) {
  if (e.type() == element_type::INT64 || e.type() == element_type::UINT64) {
    return true;
  }
  double d = 0;
  return e.type() == element_type::DOUBLE && e.get(d) == simdjson::SUCCESS && std::isfinite(d) &&
         std::floor(d) == d;
}

// The kind of a value, as the error message names it.
std::string_view kind_of(element e) {
  switch (e.type()) {
    case element_type::OBJECT:
      return "object";
    case element_type::ARRAY:
      return "array";
    case element_type::STRING:
      return "string";
    case element_type::INT64:
    case element_type::UINT64:
      return "integer";
    case element_type::DOUBLE:
      return is_integral(e) ? "integer" : "number";
    case element_type::BOOL:
      return "boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "value";
}

std::string canonical(element e) {
  return canonical_json(e);
}

std::string number_text(double d) {
  json_writer w;
  if (std::floor(d) == d && std::fabs(d) < 9.0e15) {
    w.value(static_cast<std::int64_t>(d));
  } else {
    w.value(d);
  }
  return std::move(w).str();
}

expected<std::shared_ptr<const schema_node>> compile_node(element schema, const std::string& at);

expected<std::optional<double>> number_keyword(simdjson::dom::object object, std::string_view key,
                                               const std::string& at) {
  element value;
  if (object.at_key(key).get(value) != simdjson::SUCCESS) {
    return std::optional<double>{};
  }
  auto number = as_number(value);
  if (!number) {
    return fail(errc::invalid_argument,
                "schema " + at + "." + std::string(key) + " must be a number");
  }
  return number;
}

expected<std::optional<std::uint64_t>> count_keyword(simdjson::dom::object object,
                                                     std::string_view key, const std::string& at) {
  element value;
  if (object.at_key(key).get(value) != simdjson::SUCCESS) {
    return std::optional<std::uint64_t>{};
  }
  auto number = as_number(value);
  if (!number || !is_integral(value) || *number < 0) {
    return fail(errc::invalid_argument,
                "schema " + at + "." + std::string(key) + " must be a non-negative integer");
  }
  // A count no value can reach (a double at or past 2^64) is the largest count: converting
  // it would be undefined behaviour (found by the argument_validator fuzzer).
  constexpr double two_to_64 = 18446744073709551616.0;
  if (*number >= two_to_64) {
    return std::optional<std::uint64_t>(std::numeric_limits<std::uint64_t>::max());
  }
  return static_cast<std::uint64_t>(*number);
}

expected<std::shared_ptr<const schema_node>> compile_node(element schema, const std::string& at) {
  auto node = std::make_shared<schema_node>();
  if (schema.type() == element_type::BOOL) {
    return node; // `true` accepts anything; `false` is not supported as a whole schema
  }
  simdjson::dom::object object;
  if (schema.get(object) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, "schema " + at + " must be an object");
  }

  element type;
  if (object.at_key("type").get(type) == simdjson::SUCCESS) {
    auto add_type = [&](element name) -> expected<void> {
      std::string_view text;
      if (name.get(text) != simdjson::SUCCESS) {
        return fail(errc::invalid_argument, "schema " + at + ".type must name types as strings");
      }
      auto bit = type_from_name(text);
      if (!bit) {
        return fail(errc::invalid_argument,
                    "schema " + at + ".type names unknown type '" + std::string(text) + "'");
      }
      node->types |= *bit;
      return {};
    };
    simdjson::dom::array list;
    if (type.get(list) == simdjson::SUCCESS) {
      for (auto name : list) {
        if (auto ok = add_type(name); !ok) {
          return tl::unexpected(ok.error());
        }
      }
    } else if (auto ok = add_type(type); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  bool nullable = false;
  if (object.at_key("nullable").get(nullable) == simdjson::SUCCESS && nullable &&
      node->types != 0) {
    node->types |= detail::type_null;
  }

  simdjson::dom::object properties;
  if (object.at_key("properties").get(properties) == simdjson::SUCCESS) {
    for (auto field : properties) {
      auto child = compile_node(field.value, at + ".properties." + std::string(field.key));
      if (!child) {
        return tl::unexpected(child.error());
      }
      node->properties.push_back({std::string(field.key), std::move(*child)});
    }
  }
  simdjson::dom::array required;
  if (object.at_key("required").get(required) == simdjson::SUCCESS) {
    for (auto name : required) {
      std::string_view text;
      if (name.get(text) != simdjson::SUCCESS) {
        return fail(errc::invalid_argument, "schema " + at + ".required must list strings");
      }
      node->required.emplace_back(text);
    }
  }
  simdjson::dom::array values;
  if (object.at_key("enum").get(values) == simdjson::SUCCESS) {
    node->enum_values.emplace();
    for (auto value : values) {
      detail::enum_value v;
      v.canonical = canonical(value);
      std::string_view text;
      v.display = value.get(text) == simdjson::SUCCESS ? std::string(text) : v.canonical;
      v.number = as_number(value);
      node->enum_values->push_back(std::move(v));
    }
  }

  auto numbers = {std::pair{"minimum", &node->minimum}, std::pair{"maximum", &node->maximum},
                  std::pair{"exclusiveMinimum", &node->exclusive_minimum},
                  std::pair{"exclusiveMaximum", &node->exclusive_maximum}};
  for (auto [key, slot] : numbers) {
    auto value = number_keyword(object, key, at);
    if (!value) {
      return tl::unexpected(value.error());
    }
    *slot = *value;
  }
  auto counts = {std::pair{"minLength", &node->min_length},
                 std::pair{"maxLength", &node->max_length}, std::pair{"minItems", &node->min_items},
                 std::pair{"maxItems", &node->max_items}};
  for (auto [key, slot] : counts) {
    auto value = count_keyword(object, key, at);
    if (!value) {
      return tl::unexpected(value.error());
    }
    *slot = *value;
  }

  element items;
  if (object.at_key("items").get(items) == simdjson::SUCCESS) {
    auto child = compile_node(items, at + ".items");
    if (!child) {
      return tl::unexpected(child.error());
    }
    node->items = std::move(*child);
  }
  element additional;
  if (object.at_key("additionalProperties").get(additional) == simdjson::SUCCESS) {
    bool allowed = true;
    if (additional.get(allowed) == simdjson::SUCCESS) {
      node->additional_allowed = allowed;
    } else {
      auto child = compile_node(additional, at + ".additionalProperties");
      if (!child) {
        return tl::unexpected(child.error());
      }
      node->additional_schema = std::move(*child);
    }
  }
  return std::shared_ptr<const schema_node>(std::move(node));
}

bool is_identifier(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
    return false;
  }
  for (const char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::string member_path(const std::string& path, std::string_view name) {
  if (is_identifier(name)) {
    return path + "." + std::string(name);
  }
  std::string quoted;
  append_json_string(quoted, name);
  return path + "[" + quoted + "]";
}

std::size_t code_points(std::string_view text) {
  std::size_t n = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
      ++n;
    }
  }
  return n;
}

class checker {
public:
  void check(const schema_node& schema, element value, const std::string& path) {
    if (full()) {
      return;
    }
    if (schema.types != 0 && !type_matches(schema.types, value)) {
      std::string got(kind_of(value));
      if (value.type() == element_type::DOUBLE && got == "number") {
        got += " " + number_text(as_number(value).value_or(0));
      }
      report(path, "expected " + type_names(schema.types) + ", got " + got);
      return;
    }
    if (schema.enum_values) {
      check_enum(*schema.enum_values, value, path);
    }
    switch (value.type()) {
      case element_type::OBJECT:
        check_object(schema, value, path);
        break;
      case element_type::ARRAY:
        check_array(schema, value, path);
        break;
      case element_type::STRING:
        check_string(schema, value, path);
        break;
      case element_type::INT64:
      case element_type::UINT64:
      case element_type::DOUBLE:
        check_number(schema, *as_number(value), path);
        break;
      default:
        break;
    }
  }

  std::string message() const {
    std::string out;
    for (const auto& e : errors_) {
      out += (out.empty() ? "" : "; ") + e;
    }
    return out;
  }
  bool ok() const noexcept {
    return errors_.empty();
  }

private:
  bool full() const noexcept {
    return errors_.size() >= argument_schema::max_reported_errors;
  }
  void report(const std::string& path, std::string what) {
    if (!full()) {
      errors_.push_back(path + ": " + std::move(what));
    }
  }

  static bool type_matches(unsigned types, element value) {
    switch (value.type()) {
      case element_type::OBJECT:
        return (types & detail::type_object) != 0;
      case element_type::ARRAY:
        return (types & detail::type_array) != 0;
      case element_type::STRING:
        return (types & detail::type_string) != 0;
      case element_type::INT64:
      case element_type::UINT64:
      case element_type::DOUBLE:
        return (types & detail::type_number) != 0 ||
               ((types & detail::type_integer) != 0 && is_integral(value));
      case element_type::BOOL:
        return (types & detail::type_boolean) != 0;
      case element_type::NULL_VALUE:
        return (types & detail::type_null) != 0;
    }
    return false;
  }

  void check_enum(const std::vector<detail::enum_value>& allowed, element value,
                  const std::string& path) {
    const auto number = as_number(value);
    // A number compares by value; anything else by its canonical text, made only then.
    const auto text = number ? std::string() : canonical(value);
    for (const auto& v : allowed) {
      if ((number && v.number && *number == *v.number) || (!number && v.canonical == text)) {
        return;
      }
    }
    std::string list;
    for (const auto& v : allowed) {
      list += (list.empty() ? "" : ", ") + v.display;
    }
    report(path, "expected one of " + list + " (got " + (number ? canonical(value) : text) + ")");
  }

  void check_object(const schema_node& schema, element value, const std::string& path) {
    simdjson::dom::object object;
    if (value.get(object) != simdjson::SUCCESS) {
      return;
    }
    for (const auto& name : schema.required) {
      element ignored;
      if (object.at_key(name).get(ignored) != simdjson::SUCCESS) {
        report(member_path(path, name), "missing required property");
      }
    }
    for (auto field : object) {
      const detail::property* known = nullptr;
      for (const auto& p : schema.properties) {
        if (p.name == field.key) {
          known = &p;
          break;
        }
      }
      const auto child_path = member_path(path, field.key);
      if (known != nullptr) {
        check(*known->schema, field.value, child_path);
      } else if (schema.additional_schema) {
        check(*schema.additional_schema, field.value, child_path);
      } else if (!schema.additional_allowed) {
        std::string names;
        for (const auto& p : schema.properties) {
          names += (names.empty() ? "" : ", ") + p.name;
        }
        report(child_path,
               "unknown property (allowed: " + (names.empty() ? std::string("none") : names) + ")");
      }
    }
  }

  void check_array(const schema_node& schema, element value, const std::string& path) {
    simdjson::dom::array array;
    if (value.get(array) != simdjson::SUCCESS) {
      return;
    }
    const auto size = static_cast<std::uint64_t>(array.size());
    if (schema.min_items && size < *schema.min_items) {
      report(path, "must have at least " + std::to_string(*schema.min_items) + " item(s), got " +
                       std::to_string(size));
    }
    if (schema.max_items && size > *schema.max_items) {
      report(path, "must have at most " + std::to_string(*schema.max_items) + " item(s), got " +
                       std::to_string(size));
    }
    if (schema.items) {
      std::size_t index = 0;
      for (auto item : array) {
        check(*schema.items, item, path + "[" + std::to_string(index++) + "]");
      }
    }
  }

  void check_string(const schema_node& schema, element value, const std::string& path) {
    std::string_view text;
    if (value.get(text) != simdjson::SUCCESS) {
      return;
    }
    const auto length = static_cast<std::uint64_t>(code_points(text));
    if (schema.min_length && length < *schema.min_length) {
      report(path, "must be at least " + std::to_string(*schema.min_length) +
                       " character(s) long, got " + std::to_string(length));
    }
    if (schema.max_length && length > *schema.max_length) {
      report(path, "must be at most " + std::to_string(*schema.max_length) +
                       " character(s) long, got " + std::to_string(length));
    }
  }

  void check_number(const schema_node& schema, double number, const std::string& path) {
    const auto got = ", got " + number_text(number);
    if (schema.minimum && number < *schema.minimum) {
      report(path, "must be >= " + number_text(*schema.minimum) + got);
    }
    if (schema.maximum && number > *schema.maximum) {
      report(path, "must be <= " + number_text(*schema.maximum) + got);
    }
    if (schema.exclusive_minimum && number <= *schema.exclusive_minimum) {
      report(path, "must be > " + number_text(*schema.exclusive_minimum) + got);
    }
    if (schema.exclusive_maximum && number >= *schema.exclusive_maximum) {
      report(path, "must be < " + number_text(*schema.exclusive_maximum) + got);
    }
  }

  std::vector<std::string> errors_;
};

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// Arguments up to this size are parsed by the thread's reused parser.
constexpr std::size_t reused_parser_max_bytes = 64 * 1024;

} // namespace

expected<argument_schema> argument_schema::compile(std::string_view schema_json) {
  simdjson::dom::parser parser;
  const simdjson::padded_string buffer(schema_json);
  element root;
  if (auto err = parser.parse(buffer).get(root); err != simdjson::SUCCESS) {
    return fail(errc::invalid_argument,
                std::string("tool schema is not valid JSON: ") + simdjson::error_message(err));
  }
  auto node = compile_node(root, "$");
  if (!node) {
    return tl::unexpected(node.error());
  }
  argument_schema schema;
  schema.root_ = std::move(*node);
  return schema;
}

expected<void> argument_schema::validate(std::string_view arguments_json) const {
  auto text = trimmed(arguments_json);
  if (text.empty()) {
    text = "{}";
  }
  // One parser per thread for the common small call; a large one (a write of a big file)
  // gets its own, so no thread keeps a buffer that size for good.
  static thread_local simdjson::dom::parser shared_parser;
  simdjson::dom::parser own_parser;
  auto& parser = text.size() <= reused_parser_max_bytes ? shared_parser : own_parser;
  element root;
  // parse(const char*, size_t) copies into the parser's own padded buffer.
  if (auto err = parser.parse(text.data(), text.size()).get(root); err != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, std::string("arguments: not valid JSON (") +
                                            simdjson::error_message(err) +
                                            "); send exactly one JSON object that matches the "
                                            "tool's parameters");
  }
  if (!root_) {
    return {};
  }
  checker c;
  c.check(*root_, root, "arguments");
  if (c.ok()) {
    return {};
  }
  return fail(errc::invalid_argument, c.message());
}

expected<void> validate_arguments(std::string_view schema_json, std::string_view arguments_json) {
  auto schema = argument_schema::compile(schema_json);
  if (!schema) {
    return tl::unexpected(schema.error());
  }
  return schema->validate(arguments_json);
}

} // namespace troupe::tools
