#include "troupe/runtime/memory_rules.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

namespace troupe::memory {

namespace {

template <std::size_t N>
bool contains(const std::string_view (&list)[N], std::string_view s) noexcept {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

/// One decoded code point and its length in bytes; `valid` false for a bad sequence
/// (then `length` is 1).
struct decoded {
  char32_t code_point = 0;
  std::size_t length = 1;
  bool valid = true;
};

decoded decode_at(std::string_view s, std::size_t i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    return {b0, 1, true};
  }
  std::size_t length = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return {0, 1, false};
  }
  if (i + length > s.size()) {
    return {0, 1, false};
  }
  for (std::size_t k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      return {0, 1, false};
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return {0, 1, false};
  }
  return {cp, length, true};
}

bool is_invisible(char32_t cp) noexcept {
  return (cp >= 0x200B && cp <= 0x200F) || cp == 0x2060 || cp == 0xFEFF ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Words that may stand between "ignore" / "disregard" / "forget" and what is ignored.
constexpr std::string_view qualifiers[] = {
    "previous", "all", "above", "prior", "earlier",   "your",   "the",    "any",
    "of",       "my",  "these", "those", "preceding", "former", "system", "every"};
constexpr std::string_view ignored_targets[] = {
    "instructions", "instruction", "rules",      "rule",   "prompts", "prompt",
    "directions",   "guidelines",  "directives", "orders", "context"};
constexpr std::string_view ignore_verbs[] = {"ignore", "disregard", "forget", "override"};

std::optional<std::string> injection_phrase(const std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i + 2 < words.size() && words[i] == "you" && words[i + 1] == "are" &&
        words[i + 2] == "now") {
      return std::string("you are now");
    }
    if (!contains(ignore_verbs, words[i])) {
      continue;
    }
    // Up to three qualifiers, then the thing ignored; "forget" and "override" need a
    // qualifier ("forget the rules"), "ignore instructions" needs none.
    std::size_t j = i + 1;
    std::size_t qualified = 0;
    while (j < words.size() && qualified < 3 && contains(qualifiers, words[j])) {
      ++j;
      ++qualified;
    }
    if (j < words.size() && contains(ignored_targets, words[j]) &&
        (qualified > 0 || words[i] == "ignore" || words[i] == "disregard")) {
      std::string phrase;
      for (std::size_t k = i; k <= j; ++k) {
        phrase += k == i ? "" : " ";
        phrase += words[k];
      }
      return phrase;
    }
  }
  return std::nullopt;
}

bool is_value_char(char c) noexcept {
  return std::isspace(static_cast<unsigned char>(c)) == 0 && c != '"' && c != '\'' && c != ',' &&
         c != ';';
}

// `key[:=]value`, with spaces and a quote allowed around the separator, the value at
// least six characters.
constexpr std::string_view credential_keys[] = {
    "api_key", "api-key",       "apikey",     "password",    "passwd",     "secret",
    "cookie",  "authorization", "access_key", "private_key", "auth_token", "access_token"};

std::optional<std::string> credential_assignment(const std::string& lower) {
  for (const auto key : credential_keys) {
    for (auto at = lower.find(key); at != std::string::npos; at = lower.find(key, at + 1)) {
      std::size_t i = at + key.size();
      while (i < lower.size() &&
             (lower[i] == ' ' || lower[i] == '\t' || lower[i] == '"' || lower[i] == '\'')) {
        ++i;
      }
      if (i >= lower.size() || (lower[i] != ':' && lower[i] != '=')) {
        continue;
      }
      ++i;
      while (i < lower.size() &&
             (lower[i] == ' ' || lower[i] == '\t' || lower[i] == '"' || lower[i] == '\'')) {
        ++i;
      }
      std::size_t n = 0;
      while (i + n < lower.size() && is_value_char(lower[i + n])) {
        ++n;
      }
      if (n >= 6) {
        return std::string(key);
      }
    }
  }
  return std::nullopt;
}

bool is_key_char(char c) noexcept {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}

// Keys of well-known shapes: OpenAI/Anthropic "sk-…", GitHub tokens, AWS access key ids,
// Slack tokens, PEM private keys.
std::optional<std::string> known_key_shape(std::string_view text, const std::string& lower) {
  const auto run_after = [&](std::size_t from) {
    std::size_t n = 0;
    while (from + n < text.size() && is_key_char(text[from + n])) {
      ++n;
    }
    return n;
  };
  const auto starts_word = [&](std::size_t at) { return at == 0 || !is_key_char(text[at - 1]); };
  constexpr std::array<std::pair<std::string_view, std::size_t>, 6> prefixes = {
      {{"sk-", 20}, {"ghp_", 20}, {"gho_", 20}, {"github_pat_", 20}, {"xoxb-", 16}, {"xoxp-", 16}}};
  for (const auto& [prefix, min_run] : prefixes) {
    for (auto at = text.find(prefix); at != std::string_view::npos;
         at = text.find(prefix, at + 1)) {
      if (starts_word(at) && run_after(at + prefix.size()) >= min_run) {
        return fmt::format("a key starting with '{}'", prefix);
      }
    }
  }
  for (auto at = text.find("AKIA"); at != std::string_view::npos; at = text.find("AKIA", at + 1)) {
    std::size_t n = 0;
    while (at + 4 + n < text.size() &&
           (std::isupper(static_cast<unsigned char>(text[at + 4 + n])) != 0 ||
            std::isdigit(static_cast<unsigned char>(text[at + 4 + n])) != 0)) {
      ++n;
    }
    if (starts_word(at) && n >= 16) {
      return std::string("an AWS access key id");
    }
  }
  if (lower.find("-----begin") != std::string::npos &&
      lower.find("private key-----") != std::string::npos) {
    return std::string("a PEM private key");
  }
  return std::nullopt;
}

// The distinct comparison words of a text, sorted (cheaper to build and to compare than a
// std::set: one allocation per word and a merge walk).
std::vector<std::string> word_set(std::string_view text) {
  auto words = comparison_words(text);
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

// Words two sorted sets share.
std::size_t shared_words(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::size_t common = 0;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i < *j) {
      ++i;
    } else if (*j < *i) {
      ++j;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  return common;
}

// Jaccard similarity of two word sets: shared words over all words (1 when both are empty).
double set_similarity(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.empty() && b.empty()) {
    return 1.0;
  }
  const auto common = shared_words(a, b);
  const auto all = a.size() + b.size() - common;
  return all == 0 ? 0.0 : static_cast<double>(common) / static_cast<double>(all);
}

// Collapses every run of whitespace (line breaks included) into one space and
// neutralises the block's own tags, so an item stays one line of the block.
std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = !out.empty();
      continue;
    }
    if (space) {
      out += ' ';
      space = false;
    }
    out += c;
  }
  for (const std::string_view tag : {"<memory_context>", "</memory_context>"}) {
    for (auto at = lower_ascii(out).find(tag); at != std::string::npos;
         at = lower_ascii(out).find(tag)) {
      out.replace(at, 1, "[");
      out.replace(at + tag.size() - 1, 1, "]");
    }
  }
  return out;
}

} // namespace

bool is_kind(std::string_view s) noexcept {
  return contains(kinds, s);
}
bool is_scope(std::string_view s) noexcept {
  return contains(scopes, s);
}
bool is_status(std::string_view s) noexcept {
  return contains(statuses, s);
}

std::string_view to_string(refusal_reason r) noexcept {
  switch (r) {
    case refusal_reason::empty:
      return "empty";
    case refusal_reason::too_long:
      return "too_long";
    case refusal_reason::invalid_utf8:
      return "invalid_utf8";
    case refusal_reason::instruction_injection:
      return "instruction_injection";
    case refusal_reason::credential:
      return "credential";
    case refusal_reason::invisible_character:
      return "invisible_character";
  }
  return "refused";
}

std::optional<refusal> check_text(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto d = decode_at(text, i);
    if (!d.valid) {
      return refusal{refusal_reason::invalid_utf8,
                     fmt::format("the text is not valid UTF-8 (at byte {})", i)};
    }
    if (is_invisible(d.code_point)) {
      return refusal{refusal_reason::invisible_character,
                     fmt::format("the text holds an invisible or bidirectional control "
                                 "character (U+{:04X})",
                                 static_cast<std::uint32_t>(d.code_point))};
    }
    i += d.length;
  }
  if (auto phrase = injection_phrase(comparison_words(text))) {
    return refusal{refusal_reason::instruction_injection,
                   fmt::format("the text reads as an instruction to the model (\"{}\"); a "
                               "memory holds facts, not instructions",
                               *phrase)};
  }
  const auto lower = lower_ascii(text);
  if (auto key = credential_assignment(lower)) {
    return refusal{refusal_reason::credential,
                   fmt::format("the text holds a credential ({}); secrets are never kept in "
                               "memory",
                               *key)};
  }
  if (auto shape = known_key_shape(text, lower)) {
    return refusal{refusal_reason::credential,
                   fmt::format("the text holds a credential ({}); secrets are never kept in "
                               "memory",
                               *shape)};
  }
  return std::nullopt;
}

std::optional<refusal> check_memory(std::string_view content, std::string_view summary) {
  if (std::all_of(content.begin(), content.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; })) {
    return refusal{refusal_reason::empty, "the content is empty"};
  }
  if (content.size() > max_content_bytes) {
    return refusal{refusal_reason::too_long,
                   fmt::format("the content is {} bytes, more than the {} a memory may hold",
                               content.size(), max_content_bytes)};
  }
  if (summary.size() > max_summary_bytes) {
    return refusal{refusal_reason::too_long,
                   fmt::format("the summary is {} bytes, more than the {} allowed", summary.size(),
                               max_summary_bytes)};
  }
  if (auto r = check_text(content)) {
    return r;
  }
  return check_text(summary);
}

std::vector<std::string> comparison_words(std::string_view text) {
  std::vector<std::string> words;
  std::string current;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || u >= 0x80) {
      current += static_cast<char>(std::tolower(u));
    } else if (!current.empty()) {
      words.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) {
    words.push_back(std::move(current));
  }
  return words;
}

double similarity(std::string_view a, std::string_view b) {
  return set_similarity(word_set(a), word_set(b));
}

bool is_near_duplicate(std::string_view a, std::string_view b) {
  return similarity(a, b) >= near_duplicate_threshold;
}

bool restates(std::string_view proposal, std::string_view recalled, bool same_key) {
  const auto wp = word_set(proposal);
  const auto wr = word_set(recalled);
  if (wp.empty() || wr.empty()) {
    return false;
  }
  const auto common = shared_words(wp, wr);
  if (same_key) {
    // A new value of the recalled key ("editor: vim" -> "editor: not vim anymore, now
    // helix") holds the old words and more: only one that adds nothing restates it.
    return common == wp.size() || set_similarity(wp, wr) >= near_duplicate_threshold;
  }
  // One set inside the other, or close enough.
  return common == wp.size() || common == wr.size() || set_similarity(wp, wr) >= recalled_threshold;
}

std::size_t count_chars(std::string_view text) noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); i += decode_at(text, i).length) {
    ++n;
  }
  return n;
}

std::string cut_chars(std::string_view text, std::size_t max_chars) {
  if (count_chars(text) <= max_chars) {
    return std::string(text);
  }
  std::size_t i = 0;
  std::size_t n = 0;
  while (i < text.size() && n + 1 < max_chars) {
    i += decode_at(text, i).length;
    ++n;
  }
  return std::string(text.substr(0, i)) + "…";
}

rendered_block render_block(std::span<const block_item> ranked, std::span<const block_item> pinned,
                            const block_limits& limits) {
  rendered_block out;
  std::vector<const block_item*> chosen;
  // The chosen items' word sets, built once each (not once per comparison).
  std::vector<std::vector<std::string>> chosen_words;
  const auto choose = [&](const block_item& item) {
    auto words = word_set(item.content);
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      if (chosen[i]->id == item.id ||
          set_similarity(chosen_words[i], words) >= near_duplicate_threshold) {
        return false;
      }
    }
    chosen.push_back(&item);
    chosen_words.push_back(std::move(words));
    return true;
  };
  const auto max_items = std::min(limits.max_items, max_block_items);
  for (const auto& item : ranked) {
    if (chosen.size() >= max_items) {
      break;
    }
    choose(item);
  }
  std::size_t pinned_added = 0;
  for (const auto& item : pinned) {
    if (pinned_added >= limits.max_pinned) {
      break;
    }
    if (choose(item)) {
      ++pinned_added;
    }
  }
  std::string lines;
  std::size_t used = 0;
  for (const auto* item : chosen) {
    auto content = one_line(item->content);
    std::string text;
    if (count_chars(content) <= limits.item_chars) {
      text = std::move(content);
    } else if (auto summary = one_line(item->summary); !summary.empty()) {
      text = cut_chars(summary, limits.summary_chars);
    } else {
      text = cut_chars(content, limits.item_chars);
    }
    auto line = fmt::format("- [{} / {}] {}", one_line(item->kind), one_line(item->key), text);
    const auto cost = count_chars(line);
    if (used + cost > limits.max_chars) {
      continue;
    }
    used += cost;
    lines += line;
    lines += '\n';
    out.ids.push_back(item->id);
  }
  if (out.ids.empty()) {
    return out;
  }
  out.text = fmt::format("<memory_context>\n{}\n{}</memory_context>", block_preamble, lines);
  return out;
}

} // namespace troupe::memory
