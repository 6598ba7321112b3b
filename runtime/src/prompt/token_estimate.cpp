#include "troupe/runtime/prompt/token_estimate.hpp"

#include <cstdint>
#include <cstring>

namespace troupe::prompt {

namespace {

struct code_point_counts {
  std::size_t cjk = 0;
  std::size_t other = 0;

  void add(std::string_view text) noexcept {
    const auto* bytes = text.data();
    const auto size = text.size();
    std::size_t i = 0;
    while (i < size) {
      // ASCII runs, 8 bytes at a time: none of them is CJK.
      while (i + 8 <= size) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes + i, sizeof word);
        if ((word & 0x8080808080808080ULL) != 0) {
          break;
        }
        other += 8;
        i += 8;
      }
      if (i >= size) {
        break;
      }
      const auto lead = static_cast<unsigned char>(bytes[i]);
      std::size_t length = 0;
      char32_t cp = 0;
      if (lead < 0x80) {
        ++other;
        ++i;
        continue;
      }
      if ((lead & 0xE0) == 0xC0) {
        length = 2;
        cp = lead & 0x1F;
      } else if ((lead & 0xF0) == 0xE0) {
        length = 3;
        cp = lead & 0x0F;
      } else if ((lead & 0xF8) == 0xF0) {
        length = 4;
        cp = lead & 0x07;
      }
      bool valid = length > 0 && i + length <= size;
      for (std::size_t k = 1; valid && k < length; ++k) {
        const auto next = static_cast<unsigned char>(bytes[i + k]);
        if ((next & 0xC0) != 0x80) {
          valid = false;
        } else {
          cp = (cp << 6) | (next & 0x3F);
        }
      }
      if (!valid) {
        // A stray byte: one character, and decoding resumes at the next byte.
        ++other;
        ++i;
        continue;
      }
      // Below U+1100 (Latin, Greek, Cyrillic, ...) nothing is CJK.
      if (cp >= 0x1100 && is_cjk(cp)) {
        ++cjk;
      } else {
        ++other;
      }
      i += length;
    }
  }

  std::size_t tokens() const noexcept {
    // cjk * 2/3 + other / 4 == (8 * cjk + 3 * other) / 12, rounded up.
    return (8 * cjk + 3 * other + 11) / 12;
  }
};

} // namespace

bool is_cjk(char32_t cp) noexcept {
  return (cp >= 0x1100 && cp <= 0x11FF)       // Hangul Jamo
         || (cp >= 0x2E80 && cp <= 0x2FDF)    // CJK radicals, Kangxi radicals
         || (cp >= 0x3000 && cp <= 0x303F)    // CJK symbols and punctuation
         || (cp >= 0x3040 && cp <= 0x30FF)    // Hiragana, Katakana
         || (cp >= 0x3100 && cp <= 0x312F)    // Bopomofo
         || (cp >= 0x3130 && cp <= 0x318F)    // Hangul compatibility Jamo
         || (cp >= 0x31A0 && cp <= 0x31FF)    // Bopomofo extended, CJK strokes, Katakana ext.
         || (cp >= 0x3200 && cp <= 0x33FF)    // enclosed CJK letters, CJK compatibility
         || (cp >= 0x3400 && cp <= 0x4DBF)    // CJK Unified Ideographs Extension A
         || (cp >= 0x4E00 && cp <= 0x9FFF)    // CJK Unified Ideographs
         || (cp >= 0xA960 && cp <= 0xA97F)    // Hangul Jamo extended A
         || (cp >= 0xAC00 && cp <= 0xD7FF)    // Hangul syllables, Jamo extended B
         || (cp >= 0xF900 && cp <= 0xFAFF)    // CJK compatibility ideographs
         || (cp >= 0xFE30 && cp <= 0xFE4F)    // CJK compatibility forms
         || (cp >= 0xFF00 && cp <= 0xFFEF)    // half-width and full-width forms
         || (cp >= 0x20000 && cp <= 0x3134F); // Extensions B-G, compatibility supplement
}

std::size_t estimate_tokens(std::string_view text) noexcept {
  code_point_counts counts;
  counts.add(text);
  return counts.tokens();
}

std::size_t estimate_tokens(const chat_message& message) noexcept {
  return estimate_tokens(message, message.content);
}

std::size_t estimate_tokens(const chat_message& message, std::string_view content) noexcept {
  code_point_counts counts;
  counts.add(content);
  for (const auto& call : message.tool_calls) {
    counts.add(call.id);
    counts.add(call.name);
    counts.add(call.arguments);
  }
  counts.add(message.tool_call_id);
  return counts.tokens() + message_overhead_tokens;
}

} // namespace troupe::prompt
