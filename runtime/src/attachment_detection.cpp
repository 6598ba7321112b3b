#include "troupe/runtime/attachment_detection.hpp"

#include <algorithm>

namespace troupe {

namespace {

bool path_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
         c == '.' || c == '_' || c == '-' || c == '+' || static_cast<unsigned char>(c) >= 0x80;
}

// True for "name.ext" where ext is 1-8 alphanumerics: a file, not a directory or a URL.
bool has_extension(std::string_view path) {
  const auto slash = path.rfind('/');
  const auto name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= name.size()) {
    return false;
  }
  const auto ext = name.substr(dot + 1);
  return ext.size() <= 8 && std::all_of(ext.begin(), ext.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
         });
}

void add(std::vector<std::string>& out, std::string_view path, std::size_t max_paths) {
  while (!path.empty() && (path.back() == '.' || path.back() == ',')) {
    path.remove_suffix(1); // sentence punctuation after the path
  }
  if (path.empty() || out.size() >= max_paths) {
    return;
  }
  if (std::find(out.begin(), out.end(), path) == out.end()) {
    out.emplace_back(path);
  }
}

// `"path"` members of JSON objects: the value of every "path": "…" pair.
void json_paths(std::string_view text, std::vector<std::string>& out, std::size_t max_paths) {
  std::size_t at = 0;
  while ((at = text.find("\"path\"", at)) != std::string_view::npos) {
    auto i = at + 6;
    while (i < text.size() && (text[i] == ' ' || text[i] == ':')) {
      ++i;
    }
    if (i >= text.size() || text[i] != '"') {
      at = i;
      continue;
    }
    const auto end = text.find('"', i + 1);
    if (end == std::string_view::npos) {
      break;
    }
    add(out, text.substr(i + 1, end - i - 1), max_paths);
    at = end;
  }
}

} // namespace

std::vector<std::string> mentioned_paths(std::string_view output, std::size_t max_paths) {
  std::vector<std::string> out;
  json_paths(output, out, max_paths);
  std::size_t line_start = 0;
  while (line_start < output.size()) {
    auto line_end = output.find('\n', line_start);
    if (line_end == std::string_view::npos) {
      line_end = output.size();
    }
    auto line = output.substr(line_start, line_end - line_start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    // An absolute path alone on the line (a directory-less file name is too vague).
    if (!line.empty() && line.front() == '/' && std::all_of(line.begin(), line.end(), path_char)) {
      add(out, line, max_paths);
    } else {
      // Absolute paths with a file extension inside a sentence.
      for (std::size_t i = 0; i < line.size(); ++i) {
        const bool starts =
            line[i] == '/' &&
            (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\'' || line[i - 1] == '"' ||
             line[i - 1] == '(' || line[i - 1] == ':' || line[i - 1] == '\t');
        if (!starts) {
          continue;
        }
        auto j = i;
        while (j < line.size() && path_char(line[j])) {
          ++j;
        }
        auto candidate = line.substr(i, j - i);
        while (!candidate.empty() && (candidate.back() == '.' || candidate.back() == ',')) {
          candidate.remove_suffix(1);
        }
        // "//host/…" is the rest of a URL, not a file.
        if (has_extension(candidate) && candidate.substr(0, 2) != "//") {
          add(out, candidate, max_paths);
        }
        i = j;
      }
    }
    line_start = line_end + 1;
  }
  return out;
}

} // namespace troupe
