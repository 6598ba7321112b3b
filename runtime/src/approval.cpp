// Approval rules (approval.hpp): the mode of a tool for an agent and whether the user's
// own message asked for it.

#include "troupe/runtime/approval.hpp"

#include <cctype>

#include <fmt/format.h>

namespace troupe {

namespace {

char fold(char c) noexcept {
  if (c == '_' || c == '-') {
    return ' ';
  }
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// A name goes on through `_` and `-` ("code_x" is not "code"), though inside the tool's
// name they match a space.
bool word_char(char c) noexcept {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}

} // namespace

std::string_view to_string(approval_mode m) noexcept {
  switch (m) {
    case approval_mode::never:
      return "never";
    case approval_mode::agent_initiated:
      return "agent_initiated";
    case approval_mode::always:
      return "always";
  }
  return "never";
}

expected<approval_mode> parse_approval_mode(std::string_view text) {
  for (auto m : {approval_mode::never, approval_mode::agent_initiated, approval_mode::always}) {
    if (to_string(m) == text) {
      return m;
    }
  }
  return fail(errc::invalid_argument,
              fmt::format("approval: '{}' is not one of never, agent_initiated, always", text));
}

expected<void> check_approval_profile(std::string_view profile) {
  if (profile.empty() || profile == "strict") {
    return {};
  }
  return fail(errc::invalid_argument,
              fmt::format("approval_profile: '{}' is not a profile (expected strict)", profile));
}

approval_mode approval_for(const approval_inputs& in) noexcept {
  if (in.agent_overrides != nullptr) {
    if (auto it = in.agent_overrides->find(in.tool); it != in.agent_overrides->end()) {
      return it->second;
    }
  }
  if (in.tool_default) {
    return *in.tool_default;
  }
  if (in.profile == "strict" &&
      (in.tool == "code_interpreter" || in.tool == "exec" || in.writes_over_http)) {
    return approval_mode::agent_initiated;
  }
  return approval_mode::never;
}

bool user_asked_for(std::string_view tool, std::string_view user_message) noexcept {
  if (tool.empty() || user_message.size() < tool.size()) {
    return false;
  }
  for (std::size_t start = 0; start + tool.size() <= user_message.size(); ++start) {
    if (start > 0 && word_char(user_message[start - 1])) {
      continue;
    }
    bool same = true;
    for (std::size_t k = 0; k < tool.size() && same; ++k) {
      same = fold(user_message[start + k]) == fold(tool[k]);
    }
    const auto end = start + tool.size();
    if (same && (end == user_message.size() || !word_char(user_message[end]))) {
      return true;
    }
  }
  return false;
}

bool needs_approval(approval_mode mode, std::string_view tool,
                    std::string_view user_message) noexcept {
  switch (mode) {
    case approval_mode::never:
      return false;
    case approval_mode::always:
      return true;
    case approval_mode::agent_initiated:
      return !user_asked_for(tool, user_message);
  }
  return false;
}

} // namespace troupe
