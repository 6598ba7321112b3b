#pragma once

/// \file
/// Reply text for messaging platforms (issue 17): splitting a long answer into parts a
/// platform accepts, and Markdown as Telegram's HTML or Slack's mrkdwn. Pure functions, no
/// I/O. Split the Markdown first, then convert each part: conversion never lengthens what
/// Telegram counts (markup goes, an entity counts as one character), and the part as
/// written is the plain-text fallback when Telegram cannot parse the HTML.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::channel {

/// Longest Telegram message part troupe sends. sendMessage accepts 4,096 characters after
/// entity parsing; 4,000 leaves room, as OpenClaw does (reference/channels.md).
inline constexpr std::size_t telegram_message_limit = 4000;
/// Longest Slack message part troupe sends: chat.postMessage truncates at 40,000 and a
/// section block holds 3,000; Slack advises 4,000 at most (reference/channels.md).
inline constexpr std::size_t slack_message_limit = 3500;

/// Length of `text` as Telegram counts it: UTF-16 code units (a code point above U+FFFF
/// counts two). Never less than the number of code points, so a part that fits by this
/// measure fits Slack's character count too. An invalid byte counts as one.
std::size_t message_length(std::string_view text) noexcept;

/// `text` in parts of at most `limit` (by `message_length`), in order. A part ends, by
/// preference, at a paragraph break (a blank line), else at a line break, else between
/// words, else anywhere between two code points: a UTF-8 sequence is never split. A
/// fenced code block (```) is kept whole when it fits in a part; one that does not is
/// closed at the end of a part and reopened (with its info string) at the start of the
/// next, so that every part renders as code, when the limit leaves room for that. White
/// space at a cut is dropped; no part is empty or blank; text that is blank gives no
/// parts. A `limit` below 2 is taken as 2 (room for any code point).
std::vector<std::string> split_message(std::string_view text, std::size_t limit);

/// `split_message` for a platform that counts bytes (WeChat and WeCom: 2,048 bytes of
/// UTF-8): parts of at most `max_bytes` bytes, cut the same way. A part split at
/// `max_bytes` characters that is still too long in bytes is split again at a
/// proportionally smaller limit. A `max_bytes` below 8 is taken as 8.
std::vector<std::string> split_message_bytes(std::string_view text, std::size_t max_bytes);

/// Markdown as the HTML subset Telegram's `parse_mode: "HTML"` accepts: **bold** and
/// __bold__ → <b>, *italic* and _italic_ → <i>, ~~struck~~ → <s>, `code` → <code>, fenced
/// code → <pre> (<pre><code class="language-x"> with an info string), [text](url) → <a>
/// for http, https, tg and mailto URLs, a heading line → <b>. Everything else is text
/// with &, < and > escaped (and " in attributes). A marker without its partner stays
/// literal, so the output's tags are always balanced and properly nested; an unclosed
/// fence runs to the end of the text. Works line by line: emphasis does not span lines.
std::string markdown_to_telegram_html(std::string_view markdown);

/// Markdown as Slack's mrkdwn: **bold** and __bold__ → *bold*, *italic* and _italic_ →
/// _italic_, ~~struck~~ → ~struck~, `code` stays, fenced code → a ``` block (without its
/// info string), [text](url) → <url|text> for http, https, tg and mailto URLs, a heading
/// line → *bold*. &, < and > are escaped everywhere, so that no text of the answer reads as
/// a mention (<!channel>, <@U123>) or a link. The same rules as markdown_to_telegram_html.
std::string markdown_to_slack_mrkdwn(std::string_view markdown);

/// `text` on one line: every run of white space (line breaks included) becomes one space,
/// and none is left at either end. For titles and summary lines.
std::string single_line(std::string_view text);

/// `text` with &, < and > as HTML entities (Telegram's HTML text escaping).
std::string escape_telegram_html(std::string_view text);

} // namespace troupe::channel
