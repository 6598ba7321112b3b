#pragma once

/// \file
/// The skills block (issue 19): the agent's enabled skills as one compact line each
/// (`- name: description (triggers: a, b)`), inside `<skills>…</skills>` with the tags on
/// the first and last line, so that N skills cost N lines of the system prompt. A skill's
/// body is not here: the model reads it with the `skill` tool, and it enters the
/// conversation as that tool's result. Pure.

#include <span>
#include <string>
#include <string_view>

namespace troupe::prompt {

/// The slot of the skills block (declared by the run when the agent has skills).
inline constexpr std::string_view skills_block = "skills";

/// The block for `lines` (one per skill, without newlines); empty when there are none.
std::string render_skills_block(std::span<const std::string> lines);

} // namespace troupe::prompt
