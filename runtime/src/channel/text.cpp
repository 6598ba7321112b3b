#include "troupe/runtime/channel/text.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "harness/text.hpp"

namespace troupe::channel {

namespace {

using harness::detail::next_rune;

bool is_blank_char(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

bool is_blank(std::string_view text) noexcept {
  return std::all_of(text.begin(), text.end(), is_blank_char);
}

std::string_view trim_right(std::string_view text) noexcept {
  while (!text.empty() && is_blank_char(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

/// UTF-16 code units of the code point that spans bytes [i, next).
std::size_t units_of(std::size_t i, std::size_t next) noexcept {
  return next - i == 4 ? 2 : 1;
}

/// The largest code point boundary `b` of `text` with message_length(text[0, b)) <= limit.
std::size_t fit(std::string_view text, std::size_t limit) noexcept {
  std::size_t units = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto next = next_rune(text, i);
    units += units_of(i, next);
    if (units > limit) {
      break;
    }
    i = next;
  }
  return i;
}

/// A fence line's marker: ``` or ~~~ (or longer), after at most three spaces.
struct fence_marker {
  char marker = '`';
  std::size_t run = 0;
};

std::optional<fence_marker> fence_of(std::string_view line) noexcept {
  std::size_t i = 0;
  while (i < 3 && i < line.size() && line[i] == ' ') {
    ++i;
  }
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) {
    return std::nullopt;
  }
  const char marker = line[i];
  std::size_t run = 0;
  while (i + run < line.size() && line[i + run] == marker) {
    ++run;
  }
  if (run < 3) {
    return std::nullopt;
  }
  // CommonMark: a backtick fence's info string holds no backtick (else it is inline code).
  if (marker == '`' && line.find('`', i + run) != std::string_view::npos) {
    return std::nullopt;
  }
  return fence_marker{marker, run};
}

/// True when `line` closes a fence opened with `open`: the same marker, at least as long,
/// after at most three spaces, and nothing but white space after it.
bool closes(std::string_view line, const fence_marker& open) noexcept {
  std::size_t i = 0;
  while (i < 3 && i < line.size() && line[i] == ' ') {
    ++i;
  }
  std::size_t run = 0;
  while (i + run < line.size() && line[i + run] == open.marker) {
    ++run;
  }
  return run >= open.run && is_blank(line.substr(i + run));
}

/// The fenced code block a window position lies in, tracked line by line.
struct fence_state {
  bool open = false;
  fence_marker marker;
  std::string_view opener;

  void step(std::string_view line) noexcept {
    if (!open) {
      if (auto f = fence_of(line)) {
        open = true;
        marker = *f;
        opener = trim_right(line);
      }
    } else if (closes(line, marker)) {
      open = false;
    }
  }
};

/// Where one part ends and how the text goes on after it.
struct cut_plan {
  /// Bytes of the window the part takes.
  std::size_t at = 0;
  /// Appended to the part: the closing fence of a block cut in two ("\n```").
  std::string closer;
  /// Put before the rest: the block's opening line again ("```python\n").
  std::string reopen;
  /// Spaces at the start of the rest are dropped (a cut between words).
  bool drop_leading_spaces = false;
};

/// The cut of a window that does not fit in `limit` (see split_message's preferences).
cut_plan plan_cut(std::string_view window, std::size_t limit) {
  const auto end = fit(window, limit);
  std::size_t best_paragraph = 0;
  std::size_t best_line = 0;
  const auto first_content = window.find_first_not_of(" \t\r\n\f\v");
  fence_state fence;
  bool previous_blank = false;
  std::size_t start = 0;
  // Fence state of the line holding `end`.
  fence_state at_end;
  // A line break right at `end` still ends a part that fits: its break is dropped.
  while (start <= end + 1 && start < window.size()) {
    if (start > 0 && !fence.open && first_content < start) {
      best_line = start;
      if (previous_blank) {
        best_paragraph = start;
      }
    }
    at_end = fence;
    const auto newline = window.find('\n', start);
    const auto line = window.substr(
        start, newline == std::string_view::npos ? std::string_view::npos : newline - start);
    previous_blank = is_blank(line);
    fence.step(line);
    if (newline == std::string_view::npos) {
      break;
    }
    start = newline + 1;
  }
  if (best_paragraph > 0) {
    return {best_paragraph, {}, {}, false};
  }
  if (best_line > 0) {
    return {best_line, {}, {}, false};
  }
  if (at_end.open) {
    // One code block fills the window from its first line: close it here, open it again.
    cut_plan plan;
    plan.closer = "\n" + std::string(at_end.marker.run, at_end.marker.marker);
    plan.reopen = std::string(at_end.opener) + "\n";
    const auto room = plan.closer.size() + plan.reopen.size() + 2;
    if (limit > room) {
      const auto fenced_end = fit(window, limit - plan.closer.size());
      const auto body = window.substr(0, fenced_end + 1);
      // A line break inside the block, else a space, else anywhere: each after the opener.
      const auto line = body.rfind('\n');
      const auto space = body.find_last_of(" \t");
      if (line != std::string_view::npos && line + 1 > plan.reopen.size()) {
        plan.at = line + 1;
      } else if (space != std::string_view::npos && space + 1 > plan.reopen.size()) {
        plan.at = space + 1;
      } else if (fenced_end > plan.reopen.size()) {
        plan.at = fenced_end;
      }
      if (plan.at > 0) {
        return plan;
      }
    }
  }
  // Between words, after the first word (a space right at `end` is dropped with the cut).
  const auto body = window.substr(0, end + 1);
  if (const auto space = body.find_last_of(" \t");
      space != std::string_view::npos && first_content < space) {
    return {space + 1, {}, {}, true};
  }
  return {end, {}, {}, false};
}

/// Drops leading blank lines (white space and all) of `text` from `pos`, keeping the
/// indentation of the first line with content.
std::size_t skip_blank_lines(std::string_view text, std::size_t pos) noexcept {
  while (pos < text.size()) {
    const auto newline = text.find('\n', pos);
    const auto line = text.substr(pos, newline == std::string_view::npos ? std::string_view::npos
                                                                         : newline - pos);
    if (!is_blank(line)) {
      break;
    }
    pos = newline == std::string_view::npos ? text.size() : newline + 1;
  }
  return pos;
}

} // namespace

std::size_t message_length(std::string_view text) noexcept {
  std::size_t units = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto next = next_rune(text, i);
    units += units_of(i, next);
    i = next;
  }
  return units;
}

std::vector<std::string> split_message_bytes(std::string_view text, std::size_t max_bytes) {
  max_bytes = std::max<std::size_t>(max_bytes, 8);
  std::vector<std::string> out;
  for (auto& part : split_message(text, max_bytes)) {
    if (part.size() <= max_bytes) {
      out.push_back(std::move(part));
      continue;
    }
    // Too many bytes for its characters: a smaller character limit in proportion (with a
    // margin for a reopened fence), never below 2, shrinking until every piece fits.
    auto limit = std::max<std::size_t>(message_length(part) * max_bytes / part.size(), 2);
    while (true) {
      limit = std::max<std::size_t>(limit * 9 / 10, 2);
      auto pieces = split_message(part, limit);
      const bool fits = std::all_of(pieces.begin(), pieces.end(),
                                    [&](const std::string& p) { return p.size() <= max_bytes; });
      if (fits || limit == 2) {
        for (auto& p : pieces) {
          out.push_back(std::move(p));
        }
        break;
      }
    }
  }
  return out;
}

std::vector<std::string> split_message(std::string_view text, std::size_t limit) {
  limit = std::max<std::size_t>(limit, 2);
  std::vector<std::string> parts;
  // The rest of the text is `prefix` (a reopened fence line) followed by text[pos, end).
  std::string prefix;
  std::size_t pos = 0;
  // A part's worth of bytes: limit code points of up to four bytes each, and one more.
  const auto window_bytes = 4 * limit + 4;
  while (true) {
    if (prefix.empty()) {
      pos = skip_blank_lines(text, pos);
    }
    if (prefix.empty() && pos >= text.size()) {
      break;
    }
    const auto remaining = text.size() - pos;
    std::string window = prefix;
    window.append(text.substr(pos, window_bytes));
    if (remaining <= window_bytes && message_length(window) <= limit) {
      if (!is_blank(window)) {
        parts.emplace_back(trim_right(window));
      }
      break;
    }
    const auto plan = plan_cut(window, limit);
    const auto part = trim_right(std::string_view(window).substr(0, plan.at));
    if (!is_blank(part)) {
      parts.emplace_back(std::string(part) + plan.closer);
    }
    if (plan.at >= prefix.size()) {
      pos += plan.at - prefix.size();
      prefix.clear();
    } else {
      prefix.erase(0, plan.at);
    }
    if (!plan.reopen.empty()) {
      prefix = plan.reopen + prefix;
    }
    if (plan.drop_leading_spaces && prefix.empty()) {
      while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) {
        ++pos;
      }
    }
  }
  return parts;
}

// ---------------------------------------------------------------------------------------
// Markdown → Telegram HTML

namespace {

void append_escaped(std::string& out, std::string_view text, bool attribute) {
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += attribute ? "&quot;" : "\"";
        break;
      default:
        out += c;
    }
  }
}

/// How one platform writes the marks Markdown converts to.
struct dialect {
  std::string_view bold_open, bold_close;
  std::string_view italic_open, italic_close;
  std::string_view strike_open, strike_close;
  std::string_view code_open, code_close;
  /// Escapes text; `attribute` for a link's URL.
  void (*escape)(std::string& out, std::string_view text, bool attribute);
  /// Appends a link to `url` (unescaped) labelled `label` (already converted).
  void (*link)(std::string& out, std::string_view url, std::string_view label);
  /// Appends the start of a code block with `language` (may be empty), and its end.
  void (*block_open)(std::string& out, std::string_view language);
  void (*block_close)(std::string& out, std::string_view language);
};

void telegram_link(std::string& out, std::string_view url, std::string_view label) {
  out += "<a href=\"";
  append_escaped(out, url, true);
  out += "\">";
  out += label;
  out += "</a>";
}

void telegram_block_open(std::string& out, std::string_view language) {
  if (language.empty()) {
    out += "<pre>";
  } else {
    out += "<pre><code class=\"language-";
    out += language;
    out += "\">";
  }
}

void telegram_block_close(std::string& out, std::string_view language) {
  out += language.empty() ? "</pre>" : "</code></pre>";
}

constexpr dialect telegram_html{"<b>",
                                "</b>",
                                "<i>",
                                "</i>",
                                "<s>",
                                "</s>",
                                "<code>",
                                "</code>",
                                append_escaped,
                                telegram_link,
                                telegram_block_open,
                                telegram_block_close};

/// Slack's text escaping: &, < and > (Slack reads `<…>` as a mention or link), as
/// Telegram's outside attributes.
void slack_escape(std::string& out, std::string_view text, bool) {
  append_escaped(out, text, false);
}

void slack_link(std::string& out, std::string_view url, std::string_view label) {
  out += '<';
  slack_escape(out, url, true);
  out += '|';
  // A '|' in the label would end it early.
  for (char c : label) {
    out += c == '|' ? '/' : c;
  }
  out += '>';
}

void slack_block_open(std::string& out, std::string_view) {
  out += "```\n";
}

void slack_block_close(std::string& out, std::string_view) {
  out += "\n```";
}

constexpr dialect slack_mrkdwn{"*",
                               "*",
                               "_",
                               "_",
                               "~",
                               "~",
                               "`",
                               "`",
                               slack_escape,
                               slack_link,
                               slack_block_open,
                               slack_block_close};

bool is_word_char(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || u >= 0x80;
}

bool is_ascii_punctuation(char c) noexcept {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

bool allowed_link(std::string_view url) noexcept {
  constexpr std::array schemes{std::string_view{"http://"}, std::string_view{"https://"},
                               std::string_view{"tg://"}, std::string_view{"mailto:"}};
  if (url.find_first_of(" \t\r\n<>\"|") != std::string_view::npos) {
    return false;
  }
  return std::any_of(schemes.begin(), schemes.end(), [&](std::string_view scheme) {
    return url.size() > scheme.size() && url.starts_with(scheme);
  });
}

/// Nesting of emphasis inside emphasis beyond this is left as text.
constexpr int max_inline_depth = 8;

/// The inline converter of one line: emphasis, code spans, links.
class inline_converter {
public:
  inline_converter(std::string& out, const dialect& d, int depth, bool links)
      : out_(out), d_(d), depth_(depth), links_(links) {}

  void convert(std::string_view s) {
    text_ = s;
    std::size_t i = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '\\' && i + 1 < s.size() && is_ascii_punctuation(s[i + 1])) {
        d_.escape(out_, s.substr(i + 1, 1), false);
        i += 2;
      } else if (c == '`') {
        i = code_span(i);
      } else if (c == '[' && links_) {
        i = link(i);
      } else if ((c == '*' || c == '_' || c == '~') && depth_ < max_inline_depth) {
        i = emphasis(i);
      } else {
        const auto next = std::min(s.size(), s.find_first_of("\\`[*_~", i + 1));
        d_.escape(out_, s.substr(i, next - i), false);
        i = next;
      }
    }
  }

private:
  std::size_t run_at(std::size_t i, char c) const noexcept {
    std::size_t n = 0;
    while (i + n < text_.size() && text_[i + n] == c) {
      ++n;
    }
    return n;
  }

  std::size_t code_span(std::size_t i) {
    const auto run = run_at(i, '`');
    for (auto j = text_.find('`', i + run); j != std::string_view::npos;) {
      const auto closing = run_at(j, '`');
      if (closing == run) {
        auto code = text_.substr(i + run, j - i - run);
        if (code.size() >= 2 && code.front() == ' ' && code.back() == ' ' && !is_blank(code)) {
          code = code.substr(1, code.size() - 2);
        }
        out_ += d_.code_open;
        d_.escape(out_, code, false);
        out_ += d_.code_close;
        return j + run;
      }
      j = text_.find('`', j + closing);
    }
    d_.escape(out_, text_.substr(i, run), false);
    return i + run;
  }

  std::size_t link(std::size_t i) {
    const auto close = text_.find(']', i + 1);
    if (close != std::string_view::npos && close > i + 1 && close + 1 < text_.size() &&
        text_[close + 1] == '(') {
      const auto end = text_.find(')', close + 2);
      if (end != std::string_view::npos) {
        const auto url = text_.substr(close + 2, end - close - 2);
        if (allowed_link(url)) {
          std::string label;
          inline_converter(label, d_, depth_ + 1, false)
              .convert(text_.substr(i + 1, close - i - 1));
          d_.link(out_, url, label);
          return end + 1;
        }
      }
    }
    out_ += '[';
    return i + 1;
  }

  /// A closing delimiter `delim` at or after `from` for an opener at `open`: preceded by
  /// a non-space; for `_`, not followed by a word character; a single `*` or `_` is not
  /// part of a longer run. npos when there is none.
  std::size_t find_closer(std::size_t from, std::string_view delim) const noexcept {
    for (auto j = text_.find(delim, from); j != std::string_view::npos;) {
      const auto run = run_at(j, delim.front());
      const bool whole = delim.size() == 1 ? run == 1 : run >= delim.size();
      const auto at = delim.size() == 1 ? j : j + run - delim.size();
      const bool after_text = !is_blank_char(text_[at - 1]);
      const bool free_after = delim.front() != '_' || at + delim.size() >= text_.size() ||
                              !is_word_char(text_[at + delim.size()]);
      if (whole && after_text && free_after) {
        return at;
      }
      j = text_.find(delim, j + run);
    }
    return std::string_view::npos;
  }

  std::size_t emphasis(std::size_t i) {
    const char c = text_[i];
    const auto run = run_at(i, c);
    // `**`/`__` bold, `*`/`_` italic, `~~` struck; a single `~` is text.
    const bool strike = c == '~';
    const bool bold = run >= 2 && !strike;
    const auto open = strike ? d_.strike_open : bold ? d_.bold_open : d_.italic_open;
    const auto closing = strike ? d_.strike_close : bold ? d_.bold_close : d_.italic_close;
    const auto width = run >= 2 ? std::size_t{2} : std::size_t{1};
    const auto inner = i + width;
    const bool opens = (!strike || run >= 2) && inner < text_.size() &&
                       !is_blank_char(text_[inner]) &&
                       (c != '_' || i == 0 || !is_word_char(text_[i - 1]));
    if (opens) {
      const auto delim = text_.substr(i, width);
      const auto slot = static_cast<std::size_t>(c == '*' ? 0 : c == '_' ? 2 : 4) + (width - 1);
      if (inner + 1 >= no_closer_from_[slot]) {
        // An earlier search found no closer from a smaller position: none from here.
      } else if (const auto close = find_closer(inner + 1, delim);
                 close != std::string_view::npos) {
        out_ += open;
        inline_converter(out_, d_, depth_ + 1, links_).convert(text_.substr(inner, close - inner));
        out_ += closing;
        return close + width;
      } else {
        no_closer_from_[slot] = inner + 1;
      }
    }
    d_.escape(out_, text_.substr(i, run), false);
    return i + run;
  }

  std::string& out_;
  const dialect& d_;
  int depth_;
  bool links_;
  std::string_view text_;
  // Per delimiter (*, **, _, __, ~, ~~): a position from which a search found no closer.
  std::array<std::size_t, 6> no_closer_from_{std::string_view::npos, std::string_view::npos,
                                             std::string_view::npos, std::string_view::npos,
                                             std::string_view::npos, std::string_view::npos};
};

/// The language of a fence's info string, as a CSS class word ("python"), or empty.
std::string fence_language(std::string_view opener, const fence_marker& f) {
  auto info = opener.substr(opener.find(f.marker) + f.run);
  info = harness::detail::trim(info);
  std::string language;
  for (char c : info) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '+' || c == '-' || c == '.' || c == '#';
    if (!ok) {
      break;
    }
    language += c;
  }
  return language;
}

/// A heading line's text ("# Title" → "Title"), or nullopt.
std::optional<std::string_view> heading_text(std::string_view line) noexcept {
  std::size_t level = 0;
  while (level < line.size() && line[level] == '#') {
    ++level;
  }
  if (level == 0 || level > 6 || level >= line.size() || line[level] != ' ') {
    return std::nullopt;
  }
  auto text = harness::detail::trim(line.substr(level));
  while (!text.empty() && text.back() == '#') {
    text.remove_suffix(1);
  }
  return harness::detail::trim(text);
}

} // namespace

std::string single_line(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : harness::detail::trim(text)) {
    if (is_blank_char(c)) {
      space = true;
      continue;
    }
    if (space) {
      out += ' ';
      space = false;
    }
    out += c;
  }
  return out;
}

std::string escape_telegram_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_escaped(out, text, false);
  return out;
}

namespace {

/// Markdown in `d`'s marks, line by line (see markdown_to_telegram_html).
std::string convert_markdown(std::string_view markdown, const dialect& d) {
  std::string out;
  out.reserve(markdown.size() + markdown.size() / 8);
  std::optional<fence_marker> fence;
  std::string language;
  bool first_code_line = true;
  std::size_t start = 0;
  bool first_line = true;
  while (start <= markdown.size()) {
    const auto newline = markdown.find('\n', start);
    auto line = markdown.substr(start, newline == std::string_view::npos ? std::string_view::npos
                                                                         : newline - start);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (fence) {
      if (closes(line, *fence)) {
        d.block_close(out, language);
        fence.reset();
      } else {
        if (!first_code_line) {
          out += '\n';
        }
        d.escape(out, line, false);
        first_code_line = false;
      }
    } else {
      if (!first_line) {
        out += '\n';
      }
      if (auto f = fence_of(line)) {
        language = fence_language(line, *f);
        d.block_open(out, language);
        fence = f;
        first_code_line = true;
      } else if (auto heading = heading_text(line)) {
        out += d.bold_open;
        inline_converter(out, d, 1, true).convert(*heading);
        out += d.bold_close;
      } else {
        inline_converter(out, d, 0, true).convert(line);
      }
    }
    first_line = false;
    if (newline == std::string_view::npos) {
      break;
    }
    start = newline + 1;
  }
  if (fence) {
    // An unclosed fence runs to the end of the text.
    d.block_close(out, language);
  }
  return out;
}

} // namespace

std::string markdown_to_telegram_html(std::string_view markdown) {
  return convert_markdown(markdown, telegram_html);
}

std::string markdown_to_slack_mrkdwn(std::string_view markdown) {
  return convert_markdown(markdown, slack_mrkdwn);
}

} // namespace troupe::channel
