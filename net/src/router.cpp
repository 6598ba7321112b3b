#include <algorithm>

#include "troupe/net/http_server.hpp"

namespace troupe::net {

namespace {

// Splits "/a/b/c" into {"a","b","c"}; an empty path or "/" gives no segments.
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) {
      end = path.size();
    }
    if (end > start) {
      parts.push_back(path.substr(start, end - start));
    }
    start = end + 1;
  }
  return parts;
}

} // namespace

void router::add(http_method method, std::string_view pattern, route_handler handler) {
  route r{method, std::string(pattern), {}, std::move(handler)};
  for (auto part : split_path(pattern)) {
    const bool is_param = part.size() >= 2 && part.front() == '{' && part.back() == '}';
    r.segments.push_back(
        {std::string(is_param ? part.substr(1, part.size() - 2) : part), is_param});
  }
  routes_.push_back(std::move(r));
  // Literal segments win over parameters: /runs/active is tried before /runs/{id}.
  // Routes are ordered lexicographically by segment kind (literal before parameter);
  // stable_sort keeps registration order among equals.
  std::stable_sort(routes_.begin(), routes_.end(), [](const route& a, const route& b) {
    const auto n = std::min(a.segments.size(), b.segments.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (a.segments[i].is_param != b.segments[i].is_param) {
        return !a.segments[i].is_param;
      }
    }
    return a.segments.size() < b.segments.size();
  });
}

router::match router::find(http_method method, std::string_view path) const {
  match result;
  const auto parts = split_path(path);
  for (const auto& r : routes_) {
    if (r.segments.size() != parts.size()) {
      continue;
    }
    bool same = true;
    for (std::size_t i = 0; i < parts.size() && same; ++i) {
      same = r.segments[i].is_param || r.segments[i].text == parts[i];
    }
    if (!same) {
      continue;
    }
    const bool method_ok =
        r.method == method || (method == http_method::head && r.method == http_method::get);
    if (!method_ok) {
      if (std::find(result.allowed.begin(), result.allowed.end(), r.method) ==
          result.allowed.end()) {
        result.allowed.push_back(r.method);
      }
      continue;
    }
    result.handler = &r.handler;
    result.pattern = r.pattern;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (r.segments[i].is_param) {
        result.params.emplace_back(r.segments[i].text, percent_decode(parts[i]));
      }
    }
    result.allowed.clear();
    return result;
  }
  return result;
}

} // namespace troupe::net
