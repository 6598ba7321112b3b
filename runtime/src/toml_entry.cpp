#include "toml_entry.hpp"

#include <algorithm>
#include <optional>

namespace troupe::detail {

std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string toml_string_list(const std::vector<std::string>& items) {
  std::string text = "[";
  for (std::size_t k = 0; k < items.size(); ++k) {
    text += (k > 0 ? ", " : "") + toml_string(items[k]);
  }
  return text + "]";
}

const toml::node* toml_entry::take(std::string_view key) {
  seen_.emplace_back(key);
  return table_.get(key);
}

tl::unexpected<error> toml_entry::wrong(std::string_view key,
                                        std::string_view expected_type) const {
  return fail(errc::invalid_argument, fmt::format("{}: [[{}]] entry {}: '{}' must be {}", source_,
                                                  what_, index_ + 1, key, expected_type));
}

expected<void> toml_entry::text(std::string_view key, std::string& into) {
  const auto* node = take(key);
  if (node == nullptr) {
    return {};
  }
  if (!node->is_string()) {
    return wrong(key, "a string");
  }
  into = *node->value<std::string>();
  return {};
}

expected<void> toml_entry::text_list(std::string_view key, std::vector<std::string>& into) {
  const auto* node = take(key);
  if (node == nullptr) {
    return {};
  }
  const auto* array = node->as_array();
  if (array == nullptr) {
    return wrong(key, "an array of strings");
  }
  std::vector<std::string> items;
  for (const auto& item : *array) {
    if (!item.is_string()) {
      return wrong(key, "an array of strings");
    }
    items.push_back(*item.value<std::string>());
  }
  into = std::move(items);
  return {};
}

expected<void> toml_entry::text_map(std::string_view key,
                                    std::map<std::string, std::string>& into) {
  const auto* node = take(key);
  if (node == nullptr) {
    return {};
  }
  const auto* table = node->as_table();
  if (table == nullptr) {
    return wrong(key, "a table of strings");
  }
  std::map<std::string, std::string> items;
  for (const auto& [k, v] : *table) {
    if (!v.is_string()) {
      return wrong(key, "a table of strings");
    }
    items[std::string(k.str())] = *v.value<std::string>();
  }
  into = std::move(items);
  return {};
}

expected<void> toml_entry::boolean(std::string_view key, bool& into) {
  const auto* node = take(key);
  if (node == nullptr) {
    return {};
  }
  if (!node->is_boolean()) {
    return wrong(key, "true or false");
  }
  into = *node->value<bool>();
  return {};
}

expected<std::optional<std::int64_t>> toml_entry::whole_number(std::string_view key,
                                                               std::int64_t min, std::int64_t max) {
  const auto* node = take(key);
  if (node == nullptr) {
    return std::optional<std::int64_t>{};
  }
  const auto value = node->is_integer() ? node->value<std::int64_t>() : std::nullopt;
  if (!value || *value < min || *value > max) {
    return wrong(key, fmt::format("a whole number from {} to {}", min, max));
  }
  return value;
}

expected<void> toml_entry::no_unknown_keys() const {
  for (const auto& [key, node] : table_) {
    if (std::find(seen_.begin(), seen_.end(), key.str()) == seen_.end()) {
      return fail(errc::invalid_argument,
                  fmt::format("{}:{}: unknown key '{}' in [[{}]] entry {}", source_,
                              key.source().begin.line, key.str(), what_, index_ + 1));
    }
  }
  return {};
}

} // namespace troupe::detail
