#include "troupe/runtime/canonical_json.hpp"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/runtime/json_writer.hpp"

namespace troupe {

namespace {

void write_canonical(json_writer& w, simdjson::dom::element element) {
  switch (element.type()) {
    case simdjson::dom::element_type::OBJECT: {
      simdjson::dom::object object;
      if (element.get(object) != simdjson::SUCCESS) {
        return;
      }
      std::vector<std::pair<std::string_view, simdjson::dom::element>> members;
      for (auto field : object) {
        members.emplace_back(field.key, field.value);
      }
      std::stable_sort(members.begin(), members.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      w.begin_object();
      for (const auto& [key, value] : members) {
        w.key(key);
        write_canonical(w, value);
      }
      w.end_object();
      break;
    }
    case simdjson::dom::element_type::ARRAY: {
      simdjson::dom::array array;
      if (element.get(array) != simdjson::SUCCESS) {
        return;
      }
      w.begin_array();
      for (auto value : array) {
        write_canonical(w, value);
      }
      w.end_array();
      break;
    }
    case simdjson::dom::element_type::STRING:
      w.value(element.get_string().value_unsafe());
      break;
    case simdjson::dom::element_type::INT64:
      w.value(element.get_int64().value_unsafe());
      break;
    case simdjson::dom::element_type::UINT64:
      w.value(element.get_uint64().value_unsafe());
      break;
    case simdjson::dom::element_type::DOUBLE:
      w.value(element.get_double().value_unsafe());
      break;
    case simdjson::dom::element_type::BOOL:
      w.value(element.get_bool().value_unsafe());
      break;
    case simdjson::dom::element_type::NULL_VALUE:
      w.value(nullptr);
      break;
  }
}

} // namespace

std::string canonical_json(simdjson::dom::element value) {
  json_writer w;
  write_canonical(w, value);
  return std::move(w).str();
}

} // namespace troupe
