#pragma once

/// \file
/// A token estimate that needs no tokenizer: CJK characters cost about 2/3 of a token
/// each, other characters about 1/4 (the rule the reference system uses for its
/// compression threshold). Characters are Unicode code points, not bytes: "é" is one
/// character, "你" is one CJK character. Good enough to budget a context window; the
/// provider's own count (usage) stays the truth.

#include <cstddef>
#include <string_view>

#include "troupe/runtime/chat.hpp"

namespace troupe::prompt {

/// What every message costs beyond its text (role and framing, as OpenAI counts it).
inline constexpr std::size_t message_overhead_tokens = 4;

/// True for a code point counted as CJK: Han ideographs (with extensions and
/// compatibility forms), kana, Hangul, Bopomofo, CJK symbols and punctuation, and
/// full-width forms.
bool is_cjk(char32_t code_point) noexcept;

/// The estimated tokens of `text` (UTF-8): ceil(cjk * 2/3 + others / 4). A byte that is
/// not part of valid UTF-8 counts as one non-CJK character.
std::size_t estimate_tokens(std::string_view text) noexcept;

/// The estimated tokens of one message: its content, its tool calls (names and
/// arguments), the id of the call it answers, and `message_overhead_tokens`.
std::size_t estimate_tokens(const chat_message& message) noexcept;

/// The estimate of `message` as if its content were `content` (a pruned or cut copy,
/// without making the copy).
std::size_t estimate_tokens(const chat_message& message, std::string_view content) noexcept;

} // namespace troupe::prompt
