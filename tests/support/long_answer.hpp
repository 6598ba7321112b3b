#pragma once

// A model answer longer than one message part of a platform, for the tests of reply
// splitting, and the way to put it into a mock-llm script.

#include <string>

namespace troupe::test {

/// `paragraphs` paragraphs of about 1,500 characters each, separated by blank lines.
inline std::string long_answer(int paragraphs) {
  std::string out;
  for (int p = 0; p < paragraphs; ++p) {
    if (p > 0) {
      out += "\n\n";
    }
    out += "Paragraph " + std::to_string(p) + ":";
    for (int w = 0; w < 250; ++w) {
      out += " word";
    }
  }
  return out;
}

/// `text` as the inside of a JSON string (it holds letters, spaces and line breaks).
inline std::string json_escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

} // namespace troupe::test
