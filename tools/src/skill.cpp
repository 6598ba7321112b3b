// SKILL.md files: the front matter read with yaml-cpp, the body kept as it is, and the
// checks that decide whether a skill can run as a tool.

#include "troupe/tools/skill.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::tools {

namespace {

// The largest SKILL.md read; a bigger one is reported, not loaded.
constexpr std::uintmax_t max_skill_bytes = 1024 * 1024;

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
}

// A plain (unquoted) scalar as JSON: true/false, null, a number, else a string.
void plain_scalar(json_writer& w, const std::string& text) {
  if (text == "true" || text == "True" || text == "TRUE") {
    w.value(true);
    return;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    w.value(false);
    return;
  }
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    w.value(nullptr);
    return;
  }
  std::int64_t whole = 0;
  const auto* end = text.data() + text.size();
  if (auto [p, ec] = std::from_chars(text.data(), end, whole); ec == std::errc{} && p == end) {
    w.value(whole);
    return;
  }
  double number = 0;
  if (auto [p, ec] = std::from_chars(text.data(), end, number); ec == std::errc{} && p == end) {
    w.value(number);
    return;
  }
  w.value(text);
}

void to_json(json_writer& w, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      w.begin_object();
      for (const auto& item : node) {
        w.key(item.first.Scalar());
        to_json(w, item.second);
      }
      w.end_object();
      break;
    case YAML::NodeType::Sequence:
      w.begin_array();
      for (const auto& item : node) {
        to_json(w, item);
      }
      w.end_array();
      break;
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a quoted scalar "!" and a plain one "?".
      if (node.Tag() == "!") {
        w.value(node.Scalar());
      } else {
        plain_scalar(w, node.Scalar());
      }
      break;
    default:
      w.value(nullptr);
      break;
  }
}

// The front matter's lines start on line 2 of the file (after the opening `---`).
constexpr std::size_t front_matter_first_line = 2;

std::size_t line_of(const YAML::Mark& mark) {
  return mark.line < 0 ? 0 : static_cast<std::size_t>(mark.line) + front_matter_first_line;
}

tl::unexpected<skill_problem> problem(const std::filesystem::path& file, std::size_t line,
                                      std::string message) {
  return tl::unexpected(skill_problem{file, line, std::move(message)});
}

// A scalar field as text; a missing one is empty, a map or list is an error.
tl::expected<std::string, skill_problem> text_field(const std::filesystem::path& file,
                                                    const YAML::Node& root, const char* key) {
  const auto node = root[key];
  if (!node || node.IsNull()) {
    return std::string();
  }
  if (!node.IsScalar()) {
    return problem(file, line_of(node.Mark()), fmt::format("'{}' must be a string", key));
  }
  return node.Scalar();
}

tl::expected<std::vector<std::string>, skill_problem>
list_field(const std::filesystem::path& file, const YAML::Node& node, std::string_view key) {
  std::vector<std::string> out;
  if (!node || node.IsNull()) {
    return out;
  }
  if (!node.IsSequence()) {
    return problem(file, line_of(node.Mark()), fmt::format("'{}' must be a list of strings", key));
  }
  for (const auto& item : node) {
    if (!item.IsScalar()) {
      return problem(file, line_of(item.Mark()),
                     fmt::format("'{}' must be a list of strings", key));
    }
    out.push_back(item.Scalar());
  }
  return out;
}

// `requires.bins` at the top, or under `metadata.<vendor>.requires` (the seed's layout).
YAML::Node required_bins_node(const YAML::Node& root) {
  if (const auto top = root["requires"]; top && top.IsMap() && top["bins"]) {
    return top["bins"];
  }
  if (const auto metadata = root["metadata"]; metadata && metadata.IsMap()) {
    for (const auto& vendor : metadata) {
      if (vendor.second.IsMap()) {
        if (const auto req = vendor.second["requires"]; req && req.IsMap() && req["bins"]) {
          return req["bins"];
        }
      }
    }
  }
  return YAML::Node();
}

// The program `name` names: itself when it has a slash, else the first executable of
// that name on `path`.
std::optional<std::filesystem::path> find_program(std::string_view name, std::string_view path) {
  if (name.find('/') != std::string_view::npos) {
    if (::access(std::string(name).c_str(), X_OK) == 0) {
      return std::filesystem::path(name);
    }
    return std::nullopt;
  }
  while (!path.empty()) {
    const auto colon = path.find(':');
    const auto dir = path.substr(0, colon);
    if (!dir.empty()) {
      auto candidate = std::filesystem::path(dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    path = colon == std::string_view::npos ? std::string_view{} : path.substr(colon + 1);
  }
  return std::nullopt;
}

} // namespace

std::string skill_problem::to_string() const {
  if (line == 0) {
    return fmt::format("{}: {}", file.string(), message);
  }
  return fmt::format("{}:{}: {}", file.string(), line, message);
}

tl::expected<skill, skill_problem> parse_skill(const std::filesystem::path& file,
                                               std::string_view text) {
  // The front matter: from a first line `---` to the next line that is `---`.
  auto first_end = text.find('\n');
  auto first = text.substr(0, first_end);
  if (!first.empty() && first.back() == '\r') {
    first.remove_suffix(1);
  }
  if (first != "---" || first_end == std::string_view::npos) {
    return problem(file, 1, "a SKILL.md must start with a '---' line opening its front matter");
  }
  std::size_t pos = first_end + 1;
  std::size_t line = front_matter_first_line;
  std::size_t close = std::string_view::npos;
  std::size_t body_start = text.size();
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    auto current = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    if (!current.empty() && current.back() == '\r') {
      current.remove_suffix(1);
    }
    if (current == "---") {
      close = pos;
      body_start = end == std::string_view::npos ? text.size() : end + 1;
      break;
    }
    if (end == std::string_view::npos) {
      break;
    }
    pos = end + 1;
    ++line;
  }
  if (close == std::string_view::npos) {
    return problem(file, line, "the front matter is not closed by a '---' line");
  }
  const auto front = text.substr(first_end + 1, close - first_end - 1);

  YAML::Node root;
  try {
    root = YAML::Load(std::string(front));
  } catch (const YAML::Exception& e) {
    return problem(file, line_of(e.mark), fmt::format("invalid YAML: {}", e.msg));
  }
  if (!root.IsMap()) {
    return problem(file, front_matter_first_line, "the front matter must be a mapping of keys");
  }
  skill s;
  s.file = file;
  s.dir = file.parent_path();
  s.body = std::string(text.substr(body_start));
  try {
    auto name = text_field(file, root, "name");
    auto description = text_field(file, root, "description");
    auto version = text_field(file, root, "version");
    auto approval = text_field(file, root, "approval");
    for (auto* field : {&name, &description, &version, &approval}) {
      if (!*field) {
        return tl::unexpected(field->error());
      }
    }
    if (name->empty()) {
      return problem(file, front_matter_first_line, "'name' is required");
    }
    if (!valid_name(*name)) {
      return problem(file, line_of(root["name"].Mark()),
                     fmt::format("'name' '{}' must be 1 to 64 letters, digits, '_' or '-'", *name));
    }
    if (description->empty()) {
      return problem(file, front_matter_first_line, "'description' is required");
    }
    if (!approval->empty() && *approval != "never" && *approval != "agent_initiated" &&
        *approval != "always") {
      return problem(
          file, line_of(root["approval"].Mark()),
          fmt::format("'approval' '{}' must be never, agent_initiated or always", *approval));
    }
    s.name = std::move(*name);
    s.description = std::move(*description);
    s.version = std::move(*version);
    s.approval = std::move(*approval);
    auto triggers = list_field(file, root["triggers"], "triggers");
    if (!triggers) {
      return tl::unexpected(triggers.error());
    }
    s.triggers = std::move(*triggers);
    auto bins = list_field(file, required_bins_node(root), "requires.bins");
    if (!bins) {
      return tl::unexpected(bins.error());
    }
    s.required_bins = std::move(*bins);
    if (const auto schema = root["inputSchema"]; schema && !schema.IsNull()) {
      if (!schema.IsMap()) {
        return problem(file, line_of(schema.Mark()), "'inputSchema' must be a mapping");
      }
      json_writer w;
      to_json(w, schema);
      s.input_schema = std::move(w).str();
    }
    if (const auto scripts = root["scripts"]; scripts && !scripts.IsNull()) {
      if (!scripts.IsMap()) {
        return problem(file, line_of(scripts.Mark()), "'scripts' must be a mapping");
      }
      if (const auto run = scripts["run"]; run) {
        if (!run.IsScalar() || run.Scalar().empty()) {
          return problem(file, line_of(run.Mark()), "'scripts.run' must be a path");
        }
        const std::filesystem::path script(run.Scalar());
        const auto normal = script.lexically_normal();
        if (script.is_absolute() || normal.empty() || *normal.begin() == "..") {
          return problem(file, line_of(run.Mark()),
                         "'scripts.run' must be a path inside the skill's folder");
        }
        s.run_script = normal.string();
      }
    }
  } catch (const YAML::Exception& e) {
    return problem(file, line_of(e.mark), fmt::format("invalid front matter: {}", e.msg));
  }
  return s;
}

skill_runners skill_runners::defaults() {
  skill_runners r;
  r.by_extension["py"] = {"/usr/bin/python3"};
  for (const auto* js : {"js", "mjs", "cjs"}) {
    r.by_extension[js] = {"/usr/bin/node"};
  }
  r.by_extension["sh"] = {"/usr/bin/bash"};
  return r;
}

const std::vector<std::string>* skill_runners::find(const std::filesystem::path& script) const {
  auto ext = script.extension().string();
  if (!ext.empty() && ext.front() == '.') {
    ext.erase(0, 1);
  }
  const auto it = by_extension.find(ext);
  return it == by_extension.end() || it->second.empty() ? nullptr : &it->second;
}

void check_skill(skill& s, const skill_runners& runners, std::string_view path) {
  s.runnable = false;
  s.unavailable_reason.clear();
  for (const auto& bin : s.required_bins) {
    if (!find_program(bin, path)) {
      s.unavailable_reason = fmt::format("requires '{}', which is not on this machine", bin);
      return;
    }
  }
  if (!s.is_tool()) {
    return;
  }
  const auto* runner = runners.find(s.run_script);
  if (runner == nullptr) {
    const auto ext = std::filesystem::path(s.run_script).extension().string();
    s.unavailable_reason =
        fmt::format("no runner for '{}' scripts (name one as skills.runners.{} in the config)", ext,
                    ext.empty() ? std::string("<ext>") : ext.substr(1));
    return;
  }
  if (!find_program(runner->front(), path)) {
    s.unavailable_reason =
        fmt::format("the runner '{}' for {} is not on this machine", runner->front(), s.run_script);
    return;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(s.dir / s.run_script, ec)) {
    s.unavailable_reason = fmt::format("its script {} does not exist", s.run_script);
    return;
  }
  s.runnable = true;
}

const skill* skill_set::find(std::string_view name) const noexcept {
  const auto it =
      std::find_if(skills.begin(), skills.end(), [&](const skill& s) { return s.name == name; });
  return it == skills.end() ? nullptr : &*it;
}

skill_set load_skills(const std::vector<std::filesystem::path>& dirs, const skill_runners& runners,
                      std::string_view path) {
  skill_set out;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      continue;
    }
    std::vector<std::filesystem::path> folders;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec)) {
        folders.push_back(it->path());
      }
    }
    if (ec) {
      out.problems.push_back({dir, 0, fmt::format("cannot be read: {}", ec.message())});
      continue;
    }
    std::sort(folders.begin(), folders.end());
    for (const auto& folder : folders) {
      const auto file = folder / "SKILL.md";
      if (!std::filesystem::is_regular_file(file, ec)) {
        continue; // not a skill folder
      }
      const auto size = std::filesystem::file_size(file, ec);
      if (ec || size > max_skill_bytes) {
        out.problems.push_back({file, 0,
                                ec ? fmt::format("cannot be read: {}", ec.message())
                                   : fmt::format("is larger than {} bytes", max_skill_bytes)});
        continue;
      }
      std::ifstream in(file, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      if (!in && !in.eof()) {
        out.problems.push_back({file, 0, "cannot be read"});
        continue;
      }
      auto parsed = parse_skill(file, text.str());
      if (!parsed) {
        out.problems.push_back(std::move(parsed.error()));
        continue;
      }
      if (const auto* earlier = out.find(parsed->name)) {
        out.problems.push_back({file, 0,
                                fmt::format("skill '{}' is already defined by {}", parsed->name,
                                            earlier->file.string())});
        continue;
      }
      check_skill(*parsed, runners, path);
      out.skills.push_back(std::move(*parsed));
    }
  }
  return out;
}

std::string skill_prompt_line(const skill& s) {
  // One line whatever the description holds.
  std::string description = s.description;
  std::replace(description.begin(), description.end(), '\n', ' ');
  std::string line = fmt::format("- {}: {}", s.name, description);
  if (!s.triggers.empty()) {
    line += " (triggers: ";
    for (std::size_t i = 0; i < s.triggers.size(); ++i) {
      line += (i == 0 ? "" : ", ") + s.triggers[i];
    }
    line += ")";
  }
  return line;
}

} // namespace troupe::tools
