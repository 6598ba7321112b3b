#include "troupe/runtime/channel/archive.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "harness/text.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/harness/evidence_ledger.hpp"

namespace troupe::channel {

namespace {

/// The first line of `text` that is not blank, trimmed.
std::string_view first_line(std::string_view text) {
  text = harness::detail::trim(text);
  return harness::detail::trim(text.substr(0, text.find('\n')));
}

} // namespace

archive_summary summarize_archive(std::span<const chat_message> messages, std::string_view title,
                                  archive_limits limits) {
  archive_summary out;
  std::vector<std::string_view> answers;
  for (const auto& m : messages) {
    if (m.role == chat_role::user) {
      const auto line = first_line(m.content);
      if (line.empty() || line.front() == '/') {
        continue;
      }
      auto goal = harness::summarize(single_line(line), limits.goal_runes);
      if (out.title.empty()) {
        out.title = harness::summarize(single_line(line), limits.title_runes);
      }
      if (out.goals.size() < limits.max_goals &&
          std::find(out.goals.begin(), out.goals.end(), goal) == out.goals.end()) {
        out.goals.push_back(std::move(goal));
      }
    } else if (m.role == chat_role::assistant) {
      for (const auto& call : m.tool_calls) {
        auto used = std::find_if(out.tools.begin(), out.tools.end(),
                                 [&](const auto& t) { return t.first == call.name; });
        if (used == out.tools.end()) {
          out.tools.emplace_back(call.name, 1);
        } else {
          ++used->second;
        }
      }
      if (!harness::detail::trim(m.content).empty()) {
        answers.push_back(m.content);
      }
    }
  }
  std::stable_sort(out.tools.begin(), out.tools.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  const auto kept = std::min(answers.size(), limits.max_decisions);
  for (auto it = answers.end() - static_cast<std::ptrdiff_t>(kept); it != answers.end(); ++it) {
    out.decisions.push_back(harness::summarize(single_line(*it), limits.decision_runes));
  }
  if (const auto given = single_line(title); !given.empty()) {
    out.title = harness::summarize(given, limits.title_runes);
  }
  if (out.title.empty()) {
    out.title = "Untitled conversation";
  }
  return out;
}

std::string render_archive(const archive_summary& summary) {
  std::string out = fmt::format("# {}\n", summary.title);
  const auto section = [&](std::string_view heading, const auto& entries, const auto& line) {
    fmt::format_to(std::back_inserter(out), "\n## {}\n", heading);
    if (entries.empty()) {
      out += "- none\n";
    }
    for (const auto& entry : entries) {
      out += "- ";
      out += line(entry);
      out += '\n';
    }
  };
  const auto as_is = [](const std::string& s) { return s; };
  section("Goals", summary.goals, as_is);
  section("Tools used", summary.tools, [](const std::pair<std::string, std::size_t>& tool) {
    return fmt::format("{} \xC3\x97 {}", tool.first, tool.second);
  });
  section("Recent decisions", summary.decisions, as_is);
  return out;
}

bool archive_due(std::size_t message_count, std::size_t archived_at) noexcept {
  if (message_count < archive_first_at) {
    return false;
  }
  const auto mark =
      archive_first_at + (message_count - archive_first_at) / archive_every * archive_every;
  return archived_at < mark;
}

} // namespace troupe::channel
