// The skills block (skills_block.hpp).

#include "troupe/runtime/prompt/skills_block.hpp"

#include <algorithm>

namespace troupe::prompt {

std::string render_skills_block(std::span<const std::string> lines) {
  if (lines.empty()) {
    return {};
  }
  std::string out = "<skills>";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    // One line per skill whatever it holds.
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::replace(line.begin(), line.end(), '\r', ' ');
    out += (i == 0 ? "" : "\n") + line;
  }
  return out + "</skills>";
}

} // namespace troupe::prompt
