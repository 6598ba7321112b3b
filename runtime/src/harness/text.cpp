#include "harness/text.hpp"

#include <algorithm>
#include <array>

namespace troupe::harness::detail {

namespace {

bool is_ascii_alnum(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_name_char(char c) noexcept {
  return is_ascii_alnum(c) || c == '_' || c == '-' || c == '.' || c == '/';
}

bool is_ascii_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Multi-byte characters trimmed like white space: U+00A0, U+3000, U+200B, U+FEFF.
constexpr std::array<std::string_view, 4> wide_spaces = {"\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\x8B",
                                                         "\xEF\xBB\xBF"};

struct extension_rule {
  std::string_view extension;
  bool needs_name;
};

// Deliverable file types. ".json" and ".txt" need a name: "answer in json" is a format,
// "results.json" is a file.
constexpr std::array<extension_rule, 17> extensions = {{
    {".markdown", false},
    {".md", false},
    {".html", false},
    {".htm", false},
    {".xlsx", false},
    {".xls", false},
    {".csv", false},
    {".pdf", false},
    {".png", false},
    {".jpeg", false},
    {".jpg", false},
    {".svg", false},
    {".docx", false},
    {".pptx", false},
    {".zip", false},
    {".json", true},
    {".txt", true},
}};

} // namespace

std::string fold(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' &&
               (text[i + 2] == '\x98' || text[i + 2] == '\x99')) {
      out.push_back('\'');
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::size_t find_phrase(std::string_view folded, std::string_view phrase,
                        std::size_t from) noexcept {
  if (phrase.empty()) {
    return std::string_view::npos;
  }
  const bool bounded_front = is_ascii_alnum(phrase.front());
  const bool bounded_back = is_ascii_alnum(phrase.back());
  for (auto pos = folded.find(phrase, from); pos != std::string_view::npos;
       pos = folded.find(phrase, pos + 1)) {
    const auto end = pos + phrase.size();
    if (bounded_front && pos > 0 && is_ascii_alnum(folded[pos - 1])) {
      continue;
    }
    if (bounded_back && end < folded.size() && is_ascii_alnum(folded[end])) {
      continue;
    }
    return pos;
  }
  return std::string_view::npos;
}

bool contains_any(std::string_view folded,
                  std::initializer_list<std::string_view> phrases) noexcept {
  return std::any_of(phrases.begin(), phrases.end(), [&](std::string_view p) {
    return find_phrase(folded, p) != std::string_view::npos;
  });
}

std::size_t last_phrase_end(std::string_view folded,
                            std::initializer_list<std::string_view> phrases) noexcept {
  auto best = std::string_view::npos;
  for (auto phrase : phrases) {
    for (auto pos = find_phrase(folded, phrase); pos != std::string_view::npos;
         pos = find_phrase(folded, phrase, pos + 1)) {
      const auto end = pos + phrase.size();
      if (best == std::string_view::npos || end > best) {
        best = end;
      }
    }
  }
  return best;
}

std::string_view trim(std::string_view text) noexcept {
  bool changed = true;
  while (changed && !text.empty()) {
    changed = false;
    if (is_ascii_space(text.front())) {
      text.remove_prefix(1);
      changed = true;
      continue;
    }
    for (auto space : wide_spaces) {
      if (text.starts_with(space)) {
        text.remove_prefix(space.size());
        changed = true;
        break;
      }
    }
  }
  changed = true;
  while (changed && !text.empty()) {
    changed = false;
    if (is_ascii_space(text.back())) {
      text.remove_suffix(1);
      changed = true;
      continue;
    }
    for (auto space : wide_spaces) {
      if (text.ends_with(space)) {
        text.remove_suffix(space.size());
        changed = true;
        break;
      }
    }
  }
  return text;
}

std::size_t next_rune(std::string_view text, std::size_t i) noexcept {
  const auto lead = static_cast<unsigned char>(text[i]);
  std::size_t length = 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
  }
  bool valid = i + length <= text.size();
  for (std::size_t k = 1; valid && k < length; ++k) {
    valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
  }
  return i + (valid ? length : 1);
}

std::size_t count_runes(std::string_view text) noexcept {
  std::size_t runes = 0;
  for (std::size_t i = 0; i < text.size(); i = next_rune(text, i)) {
    ++runes;
  }
  return runes;
}

std::vector<file_mention> find_file_mentions(std::string_view folded) {
  std::vector<file_mention> mentions;
  for (auto dot = folded.find('.'); dot != std::string_view::npos;
       dot = folded.find('.', dot + 1)) {
    const extension_rule* match = nullptr;
    for (const auto& rule : extensions) {
      const auto end = dot + rule.extension.size();
      if (folded.compare(dot, rule.extension.size(), rule.extension) == 0 &&
          (end == folded.size() || !is_ascii_alnum(folded[end]))) {
        match = &rule;
        break;
      }
    }
    if (match == nullptr) {
      continue;
    }
    auto start = dot;
    while (start > 0 && is_name_char(folded[start - 1])) {
      --start;
    }
    // A URL ("https://host/page.html") names a page, not a deliverable file.
    auto token_start = start;
    while (token_start > 0 && !is_ascii_space(folded[token_start - 1])) {
      --token_start;
    }
    const auto token = folded.substr(token_start, dot - token_start);
    if (token.find("://") != std::string_view::npos ||
        token.find("www.") != std::string_view::npos) {
      continue;
    }
    auto path = folded.substr(start, dot + match->extension.size() - start);
    const auto slash = path.rfind('/');
    auto name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    if (name.size() == match->extension.size()) {
      name = {};
    }
    if (name.empty() && match->needs_name) {
      continue;
    }
    mentions.push_back({std::string(name), std::string(match->extension), start});
  }
  return mentions;
}

namespace {

// Where the sentence holding byte `pos` begins.
std::size_t sentence_start(std::string_view text, std::size_t pos) {
  const auto head = text.substr(0, pos);
  std::size_t start = 0;
  for (std::string_view delimiter : {"\n", ". ", "! ", "? ", "; ", "。", "！", "？", "；"}) {
    const auto at = head.rfind(delimiter);
    if (at != std::string_view::npos) {
      start = std::max(start, at + delimiter.size());
    }
  }
  return start;
}

} // namespace

bool mention_is_input(std::string_view text, const file_mention& mention) {
  const auto start = sentence_start(text, mention.position);
  const auto segment = text.substr(start, mention.position - start);
  const auto input_end = last_phrase_end(
      segment,
      {"read",       "open",      "load",   "parse", "from",    "attached", "analyze", "analyse",
       "summarize",  "summarise", "review", "check", "convert", "of",       "inside",  "what's in",
       "what is in", "读取",      "打开",   "分析",  "根据",    "总结",     "转换"});
  const auto output_end = last_phrase_end(
      segment, {"write",  "create", "generate", "produce", "make",    "save",      "export",
                "output", "build",  "draw",     "plot",    "render",  "to",        "into",
                "as",     "saved",  "wrote",    "written", "created", "generated", "exported",
                "生成",   "保存",   "导出",     "写入",    "输出",    "为",        "成"});
  if (input_end == std::string_view::npos) {
    return false;
  }
  return output_end == std::string_view::npos || input_end > output_end;
}

} // namespace troupe::harness::detail
