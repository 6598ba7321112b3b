#include "troupe/runtime/harness/loop_guard.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "harness/text.hpp"
#include "troupe/runtime/canonical_json.hpp"

namespace troupe::harness {

namespace {

std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = 14695981039346656037ull) {
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

} // namespace

std::string canonical_arguments(std::string_view arguments) {
  const auto trimmed = detail::trim(arguments);
  if (trimmed.empty()) {
    return "{}";
  }
  simdjson::dom::parser parser;
  const simdjson::padded_string buffer(trimmed);
  simdjson::dom::element root;
  if (parser.parse(buffer).get(root) != simdjson::SUCCESS) {
    return std::string(trimmed);
  }
  return canonical_json(root);
}

loop_verdict loop_guard::check(std::string_view tool, std::string_view arguments) {
  const auto signature =
      fnv1a(canonical_arguments(arguments), fnv1a(std::string_view("\0", 1), fnv1a(tool)));
  history_.push_back(signature);
  if (history_.size() > history_limit) {
    history_.pop_front();
  }

  std::size_t repeats = 0;
  for (auto it = history_.rbegin(); it != history_.rend() && *it == signature; ++it) {
    ++repeats;
  }
  loop_verdict verdict;
  if (repeats >= repeat_limit) {
    verdict.what = loop_verdict::kind::repeated_call;
    verdict.blocked = true;
    verdict.message = "Refused: this is call number " + std::to_string(repeats) + " of " +
                      std::string(tool) +
                      " with the same arguments in a row, and it will not give a different "
                      "result. Change the arguments, use another tool, or give your answer "
                      "with what you have.";
    return verdict;
  }

  // Length of the trailing A-B-A-B alternation (A != B) that ends with this call.
  const auto n = history_.size();
  std::size_t alternation = 0;
  if (n >= 2 && history_[n - 1] != history_[n - 2]) {
    alternation = 2;
    while (alternation < n && history_[n - 1 - alternation] == history_[n - 1 - alternation + 2]) {
      ++alternation;
    }
  }
  if (alternation >= ping_pong_warning) {
    verdict.what = loop_verdict::kind::ping_pong;
    verdict.blocked = alternation >= ping_pong_limit;
    verdict.message = std::string(verdict.blocked ? "Refused: " : "Warning: ") + "the last " +
                      std::to_string(alternation) +
                      " tool calls alternate between the same two calls without progress. "
                      "Stop alternating: change your approach or give your answer with what "
                      "you have.";
  }
  return verdict;
}

} // namespace troupe::harness
