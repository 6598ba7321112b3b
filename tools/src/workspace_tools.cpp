// The workspace tools: read, write, edit, ls, find, grep, exec.

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fcntl.h>
#include <fmt/format.h>
#include <fnmatch.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool_arguments.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/workspace.hpp"

namespace troupe::tools {

namespace asio = boost::asio;
using detail::parse_tool_arguments;

namespace {

constexpr std::size_t max_read_bytes = 256 * 1024;
constexpr std::int64_t default_read_lines = 200;
constexpr std::int64_t max_read_lines = 2000;
constexpr std::size_t max_find_results = 500;
constexpr std::size_t max_grep_matches = 200;
constexpr std::size_t max_grep_file_bytes = 1024 * 1024;
constexpr std::size_t max_edit_bytes = 4 * 1024 * 1024;
constexpr std::size_t max_ls_entries = 1000;
constexpr std::size_t max_walk_entries = 100'000;
constexpr std::size_t max_grep_pattern_bytes = 1000;
// RE2's memory budget for the compiled pattern: bounds the program's size (a pattern
// like (a{100}){100} is refused instead of compiled into megabytes of automaton).
constexpr std::int64_t max_grep_program_bytes = 2 * 1024 * 1024;
// A file tool that has not finished by then is answered with a timeout; its job is told
// to stop and does so at its next file or line.
constexpr auto file_tool_deadline = std::chrono::seconds(30);

std::string_view failure_kind_of(errc code) {
  switch (code) {
    case errc::not_found:
      return "not_found";
    case errc::permission_denied:
      return "permission_denied";
    case errc::invalid_argument:
      return "invalid_arguments";
    case errc::timeout:
      return "timeout";
    default:
      return "tool_error";
  }
}

tool_result failure_from(const error& e) {
  return tool_failure(failure_kind_of(e.code), e.message);
}

// Bytes of the regular files beneath the workspace's root (symlinks not followed; a walk
// cut short at its limits counts what it saw).
std::uint64_t workspace_bytes(const workspace& ws, const job_control& control) {
  std::uint64_t total = 0;
  walk_limits limits;
  limits.max_entries = max_walk_entries;
  limits.should_stop = [&control] { return control.should_stop(); };
  (void)ws.walk(
      ".",
      [&total](const workspace_entry& e) {
        if (e.type == S_IFREG) {
          total += e.size;
        }
        return true;
      },
      limits);
  return total;
}

// The size of `rel` when it is a regular file, else 0.
std::uint64_t file_bytes(const workspace& ws, const std::string& rel) {
  auto handle = ws.open_file(rel, O_PATH | O_NOFOLLOW);
  struct stat st {};
  if (!handle || ::fstat(handle->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return 0;
  }
  return static_cast<std::uint64_t>(st.st_size);
}

// A failure when replacing `replaced` bytes of the workspace by `added` ones would grow it
// past the context's cap; nothing without a cap.
std::optional<tool_result> over_workspace_cap(const tool_context& ctx, const workspace& ws,
                                              std::uint64_t replaced, std::uint64_t added,
                                              const job_control& control) {
  // No cap, or a change that does not grow the workspace (freeing space is always allowed).
  if (ctx.workspace_max_bytes == 0 || added <= replaced) {
    return std::nullopt;
  }
  const auto now = workspace_bytes(ws, control);
  const auto after = now - std::min(now, replaced) + added;
  if (after <= ctx.workspace_max_bytes) {
    return std::nullopt;
  }
  return tool_failure("limit_exceeded",
                      fmt::format("the workspace would hold {} bytes, more than its cap of {} "
                                  "bytes (tools.workspace_max_bytes; it holds {} now): remove "
                                  "files or write less",
                                  after, ctx.workspace_max_bytes, now));
}

// The first error among argument reads, or null when all succeeded.
template <class... Results> const error* first_error(const Results&... results) {
  const error* found = nullptr;
  ((found = found != nullptr || results ? found : &results.error()), ...);
  return found;
}

// A path from the model, resolved inside the call's workspace.
struct located_path {
  workspace ws;
  std::string rel;
};

expected<located_path> locate(const tool_context& ctx, std::string_view user_path) {
  auto ws = workspace::open(ctx.workspace);
  if (!ws) {
    return tl::unexpected(ws.error());
  }
  auto rel = ws->relative(user_path);
  if (!rel) {
    return tl::unexpected(rel.error());
  }
  return located_path{std::move(*ws), std::move(*rel)};
}

// A file tool: a function that may block (file system work), run on the blocking pool
// with a wall-clock deadline, awaited from the calling coroutine, which stays free to
// serve others meanwhile.
class file_tool final : public tool {
public:
  using body = tool_result (*)(const std::string&, const tool_context&, const job_control&);

  file_tool(tool_descriptor d, body f, std::shared_ptr<blocking_pool> pool)
      : descriptor_(std::move(d)), body_(f),
        pool_(pool ? std::move(pool) : blocking_pool::shared_default()) {}

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  asio::awaitable<tool_result> invoke(std::string arguments, tool_context context) const override {
    return run_on_pool(pool_, descriptor_.name, body_, std::move(arguments), std::move(context));
  }

private:
  static asio::awaitable<tool_result> run_on_pool(std::shared_ptr<blocking_pool> pool,
                                                  std::string name, body f, std::string arguments,
                                                  tool_context context) {
    // A named local, not a temporary inside the co_await (g++ 12 destroys those twice).
    auto job = [f, arguments = std::move(arguments), context = std::move(context)](
                   const job_control& control) { return f(arguments, context, control); };
    auto result = co_await pool->run(std::move(job), file_tool_deadline);
    if (!result) {
      co_return tool_failure(failure_kind_of(result.error().code),
                             fmt::format("{}: {}", name, result.error().message));
    }
    co_return std::move(*result);
  }

  tool_descriptor descriptor_;
  body body_;
  std::shared_ptr<blocking_pool> pool_;
};

// A tool whose work is asynchronous already (a sandboxed process): a coroutine function.
class function_tool final : public tool {
public:
  using body = asio::awaitable<tool_result> (*)(std::string, tool_context);

  function_tool(tool_descriptor d, body f) : descriptor_(std::move(d)), body_(f) {}

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  asio::awaitable<tool_result> invoke(std::string arguments, tool_context context) const override {
    return body_(std::move(arguments), std::move(context));
  }

private:
  tool_descriptor descriptor_;
  body body_;
};

// When troupe runs as root the sandbox runs as another uid: files troupe writes must be
// the sandbox's too, or code could not change its own inputs.
void hand_to_sandbox(const tool_context& ctx, const std::filesystem::path& file) {
  if (ctx.sandbox != nullptr && ::geteuid() == 0) {
    const auto& o = ctx.sandbox->options();
    (void)::lchown(file.c_str(), o.uid, o.gid);
  }
}

tool_result read_body(const std::string& arguments, const tool_context& ctx,
                      const job_control& control) {
  (void)control; // one bounded file: nothing to stop between
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    return failure_from(args.error());
  }
  auto path = args->required_text("file_path");
  auto offset = args->integer("offset");
  auto limit = args->integer("limit");
  if (const auto* e = first_error(path, offset, limit)) {
    return failure_from(*e);
  }
  const auto from = std::max<std::int64_t>(1, offset->value_or(1));
  const auto count =
      std::clamp<std::int64_t>(limit->value_or(default_read_lines), 1, max_read_lines);
  auto target = locate(ctx, *path);
  if (!target) {
    return failure_from(target.error());
  }
  const auto& ws = target->ws;
  const auto& rel = target->rel;
  auto content = ws.read_file(rel, max_read_bytes);
  if (!content) {
    return failure_from(content.error());
  }
  std::string numbered;
  std::int64_t line_number = 0;
  std::int64_t last = 0;
  std::size_t start = 0;
  while (start < content->size()) {
    auto end = content->find('\n', start);
    if (end == std::string::npos) {
      end = content->size();
    }
    ++line_number;
    if (line_number >= from && line_number < from + count) {
      numbered += fmt::format("{:6}\t{}\n", line_number,
                              std::string_view(*content).substr(start, end - start));
      last = line_number;
    }
    start = end + 1;
  }
  json_writer w;
  w.begin_object();
  w.key("ok").value(true).key("path").value(rel);
  w.key("from_line").value(from).key("to_line").value(last);
  w.key("total_lines").value(line_number);
  w.key("more").value(last < line_number);
  w.key("content").value(numbered);
  w.end_object();
  return tool_result{true, std::move(w).str(), {}, {}};
}

tool_result write_body(const std::string& arguments, const tool_context& ctx,
                       const job_control& control) {
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    return failure_from(args.error());
  }
  auto path = args->required_text("path");
  auto content = args->required_text("content");
  auto append = args->boolean("append");
  if (const auto* e = first_error(path, content, append)) {
    return failure_from(*e);
  }
  auto target = locate(ctx, *path);
  if (!target) {
    return failure_from(target.error());
  }
  const auto& ws = target->ws;
  const auto& rel = target->rel;
  if (rel == ".") {
    return tool_failure("invalid_arguments", "arguments.path: names the workspace itself");
  }
  const bool appending = append->value_or(false);
  if (auto over = over_workspace_cap(ctx, ws, appending ? 0 : file_bytes(ws, rel), content->size(),
                                     control)) {
    return std::move(*over);
  }
  auto written = ws.write_file(rel, *content, appending);
  if (!written) {
    return failure_from(written.error());
  }
  hand_to_sandbox(ctx, ws.root() / rel);
  const auto mime = detect_mime(rel, std::string_view(*content).substr(0, 512));
  json_writer w;
  w.begin_object();
  w.key("ok").value(true).key("__type").value("file").key("path").value(rel);
  w.key("bytes").value(*written).key("mime").value(mime);
  w.end_object();
  tool_result r{true, std::move(w).str(), {}, {}};
  r.artifacts.push_back({rel, mime, *written});
  return r;
}

tool_result edit_body(const std::string& arguments, const tool_context& ctx,
                      const job_control& control) {
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    return failure_from(args.error());
  }
  auto path = args->required_text("file_path");
  auto old_text = args->required_text("old_string");
  auto new_text = args->required_text("new_string");
  auto replace_all = args->boolean("replace_all");
  if (const auto* e = first_error(path, old_text, new_text, replace_all)) {
    return failure_from(*e);
  }
  if (old_text->empty()) {
    return tool_failure("invalid_arguments", "arguments.old_string: must not be empty");
  }
  auto target = locate(ctx, *path);
  if (!target) {
    return failure_from(target.error());
  }
  const auto& ws = target->ws;
  const auto& rel = target->rel;
  auto content = ws.read_file(rel, max_edit_bytes);
  if (!content) {
    return failure_from(content.error());
  }
  std::size_t matches = 0;
  for (auto at = content->find(*old_text); at != std::string::npos;
       at = content->find(*old_text, at + old_text->size())) {
    ++matches;
  }
  if (matches == 0) {
    return tool_failure("not_found",
                        fmt::format("old_string was not found in '{}'; read the file and copy "
                                    "the exact text, including whitespace",
                                    rel));
  }
  if (matches > 1 && !replace_all->value_or(false)) {
    return tool_failure("invalid_arguments",
                        fmt::format("old_string occurs {} times in '{}'; include more context "
                                    "to make it unique, or set replace_all",
                                    matches, rel));
  }
  std::string updated;
  updated.reserve(content->size());
  std::size_t from = 0;
  for (auto at = content->find(*old_text); at != std::string::npos;
       at = content->find(*old_text, from)) {
    updated.append(*content, from, at - from);
    updated += *new_text;
    from = at + old_text->size();
  }
  updated.append(*content, from);
  if (auto over = over_workspace_cap(ctx, ws, content->size(), updated.size(), control)) {
    return std::move(*over);
  }
  auto written = ws.write_file(rel, updated);
  if (!written) {
    return failure_from(written.error());
  }
  json_writer w;
  w.begin_object().key("ok").value(true).key("path").value(rel);
  w.key("replacements").value(matches).end_object();
  return tool_result{true, std::move(w).str(), {}, {}};
}

tool_result ls_body(const std::string& arguments, const tool_context& ctx,
                    const job_control& control) {
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    return failure_from(args.error());
  }
  auto path = args->text("path");
  if (!path) {
    return failure_from(path.error());
  }
  auto target = locate(ctx, path->value_or("."));
  if (!target) {
    return failure_from(target.error());
  }
  const auto& ws = target->ws;
  const auto& rel = target->rel;
  (void)control;
  // Resolved through openat2 (a symlinked directory pointing out is refused) and read
  // through the descriptor, so nothing swapped in meanwhile is followed.
  auto listed = ws.list(rel, max_ls_entries);
  if (!listed) {
    return failure_from(listed.error());
  }
  struct entry {
    std::string name;
    std::string type;
    std::uint64_t size;
  };
  std::vector<entry> entries;
  for (auto& e : *listed) {
    std::string type = e.type == S_IFDIR    ? "dir"
                       : e.type == S_IFLNK  ? "symlink"
                       : e.type == S_IFREG  ? "file"
                       : e.type == S_IFIFO  ? "fifo"
                       : e.type == S_IFSOCK ? "socket"
                                            : "device";
    entries.push_back({std::move(e.path), std::move(type), e.type == S_IFREG ? e.size : 0});
  }
  json_writer w;
  w.begin_object().key("ok").value(true).key("path").value(rel).key("entries").begin_array();
  for (const auto& e : entries) {
    w.begin_object().key("name").value(e.name).key("type").value(e.type);
    w.key("size").value(e.size).end_object();
  }
  w.end_array().end_object();
  return tool_result{true, std::move(w).str(), {}, {}};
}

// Regular files under `rel` (symlinks not followed), relative to the workspace root,
// sorted; `rel` itself when it is a regular file. Stops at `limit` files, or when the
// job is told to stop (then `stopped` is set).
expected<std::vector<std::string>> files_under(const workspace& ws, const std::string& rel,
                                               std::size_t limit, const job_control& control,
                                               bool& stopped) {
  std::vector<std::string> out;
  auto start = ws.open_file(rel, O_PATH);
  if (!start) {
    return tl::unexpected(start.error());
  }
  struct stat info {};
  if (::fstat(start->get(), &info) != 0) {
    return fail(errc::io_error, fmt::format("cannot stat '{}'", rel));
  }
  if (S_ISREG(info.st_mode)) {
    out.push_back(rel);
    return out;
  }
  if (!S_ISDIR(info.st_mode)) {
    return fail(errc::permission_denied,
                fmt::format("not a regular file: {} is {}; only regular files and directories "
                            "can be searched",
                            rel, describe_file_type(info.st_mode)));
  }
  walk_limits limits;
  limits.max_entries = max_walk_entries;
  limits.should_stop = [&control, &stopped] { return stopped = control.should_stop(); };
  auto walked = ws.walk(
      rel,
      [&out, limit](const workspace_entry& e) {
        if (e.type == S_IFREG) {
          out.push_back(e.path);
        }
        return out.size() < limit;
      },
      limits);
  if (!walked) {
    return tl::unexpected(walked.error());
  }
  std::sort(out.begin(), out.end());
  return out;
}

tool_result find_body(const std::string& arguments, const tool_context& ctx,
                      const job_control& control) {
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    return failure_from(args.error());
  }
  auto pattern = args->required_text("pattern");
  auto path = args->text("path");
  if (const auto* e = first_error(pattern, path)) {
    return failure_from(*e);
  }
  auto target = locate(ctx, path->value_or("."));
  if (!target) {
    return failure_from(target.error());
  }
  const auto& ws = target->ws;
  const auto& rel = target->rel;
  bool stopped = false;
  auto files = files_under(ws, rel, max_walk_entries, control, stopped);
  if (!files) {
    return failure_from(files.error());
  }
  const bool whole_path = pattern->find('/') != std::string::npos;
  std::vector<std::string> matches;
  bool truncated = stopped;
  for (const auto& file : *files) {
    const auto name = whole_path ? file : std::filesystem::path(file).filename().string();
    if (::fnmatch(pattern->c_str(), name.c_str(), 0) == 0) {
      if (matches.size() >= max_find_results) {
        truncated = true;
        break;
      }
      matches.push_back(file);
    }
  }
  json_writer w;
  w.begin_object().key("ok").value(true).key("matches").begin_array();
  for (const auto& m : matches) {
    w.value(m);
  }
  w.end_array().key("count").value(matches.size()).key("truncated").value(truncated).end_object();
  return tool_result{true, std::move(w).str(), {}, {}};
}

// The pattern compiled by RE2 (linear time in the text, whatever the pattern), within
// the length and program-size limits; an error the model can act on otherwise.
expected<std::unique_ptr<re2::RE2>> compile_pattern(const std::string& pattern, bool ignore_case) {
  if (pattern.empty()) {
    return fail(errc::invalid_argument, "arguments.pattern: must not be empty");
  }
  if (pattern.size() > max_grep_pattern_bytes) {
    return fail(errc::invalid_argument,
                fmt::format("arguments.pattern: is {} bytes; at most {} are accepted",
                            pattern.size(), max_grep_pattern_bytes));
  }
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_case_sensitive(!ignore_case);
  options.set_max_mem(max_grep_program_bytes);
  auto re = std::make_unique<re2::RE2>(pattern, options);
  if (!re->ok()) {
    if (re->error_code() == re2::RE2::ErrorPatternTooLarge) {
      return fail(errc::invalid_argument,
                  "arguments.pattern: compiles to a program larger than the limit; use a "
                  "simpler pattern (fewer or smaller counted repetitions)");
    }
    return fail(errc::invalid_argument,
                fmt::format("arguments.pattern: not a valid regular expression (RE2 syntax): {}",
                            re->error()));
  }
  return re;
}

tool_result grep_body(const std::string& arguments, const tool_context& ctx,
                      const job_control& control) {
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    return failure_from(args.error());
  }
  auto pattern = args->required_text("pattern");
  auto path = args->text("path");
  auto glob = args->text("glob");
  auto ignore_case = args->boolean("ignore_case");
  if (const auto* e = first_error(pattern, path, glob, ignore_case)) {
    return failure_from(*e);
  }
  auto re = compile_pattern(*pattern, ignore_case->value_or(false));
  if (!re) {
    return failure_from(re.error());
  }
  auto target = locate(ctx, path->value_or("."));
  if (!target) {
    return failure_from(target.error());
  }
  const auto& ws = target->ws;
  const auto& rel = target->rel;
  bool stopped = false;
  auto files = files_under(ws, rel, max_walk_entries, control, stopped);
  if (!files) {
    return failure_from(files.error());
  }
  const bool single_file = files->size() == 1 && files->front() == rel;
  json_writer w;
  w.begin_object().key("ok").value(true).key("matches").begin_array();
  std::size_t found = 0;
  bool truncated = stopped;
  for (const auto& file : *files) {
    if (truncated || control.should_stop()) {
      truncated = true;
      break;
    }
    if (*glob &&
        ::fnmatch(glob->value().c_str(), std::filesystem::path(file).filename().c_str(), 0) != 0) {
      continue;
    }
    auto content = ws.read_file(file, max_grep_file_bytes);
    if (!content && single_file) {
      return failure_from(content.error()); // the file asked for: say why it was not searched
    }
    if (!content || content->find('\0') != std::string::npos) {
      continue; // too large, unreadable, not a regular file, or binary
    }
    std::size_t line_number = 0;
    std::size_t start = 0;
    while (start < content->size() && !truncated) {
      auto end = content->find('\n', start);
      if (end == std::string::npos) {
        end = content->size();
      }
      ++line_number;
      if (line_number % 4096 == 0 && control.should_stop()) {
        truncated = true;
        break;
      }
      const auto line = std::string_view(*content).substr(start, end - start);
      if (re2::RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), **re)) {
        if (found >= max_grep_matches) {
          truncated = true;
          break;
        }
        w.begin_object().key("path").value(file).key("line").value(line_number);
        w.key("text").value(line.substr(0, 500)).end_object();
        ++found;
      }
      start = end + 1;
    }
  }
  w.end_array().key("count").value(found).key("truncated").value(truncated).end_object();
  return tool_result{true, std::move(w).str(), {}, {}};
}

asio::awaitable<tool_result> exec_body(std::string arguments, tool_context ctx) {
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    co_return failure_from(args.error());
  }
  auto command = args->required_text("command");
  auto timeout = args->integer("timeout_s");
  if (const auto* e = first_error(command, timeout)) {
    co_return failure_from(*e);
  }
  const auto seconds = timeout->value_or(30);
  if (seconds < 1 || seconds > 300) {
    co_return tool_failure("invalid_arguments", "arguments.timeout_s: must be 1 to 300");
  }
  if (ctx.sandbox == nullptr) {
    co_return tool_failure("policy_blocked", "no sandbox is configured; exec is unavailable");
  }
  sandbox_request request;
  request.argv = {"/usr/bin/bash", "-c", *command};
  request.workspace = ctx.workspace;
  request.limits.timeout = std::chrono::seconds(seconds);
  request.limits.output_cap_bytes = 64'000;
  auto r = co_await ctx.sandbox->run(std::move(request));
  json_writer w;
  w.begin_object();
  w.key("ok").value(r.exit_code == 0 && !r.timed_out);
  w.key("exit_code").value(r.exit_code).key("timed_out").value(r.timed_out);
  w.key("stdout").value(r.stdout_text).key("stderr").value(r.stderr_text);
  w.key("duration_ms").value(r.duration.count()).key("sandboxed").value(r.sandboxed);
  if (!r.error.empty()) {
    w.key("error").value(r.error);
  }
  w.end_object();
  tool_result result{r.exit_code == 0 && !r.timed_out, std::move(w).str(), {}, {}};
  if (r.timed_out) {
    result.failure_kind = "timeout";
  } else if (!result.ok) {
    result.failure_kind = "tool_error";
  }
  co_return result;
}

std::shared_ptr<const tool> make_file_tool(std::string name, std::string description,
                                           std::string schema, bool concurrency_safe,
                                           file_tool::body body,
                                           std::shared_ptr<blocking_pool> pool) {
  return std::make_shared<file_tool>(
      tool_descriptor{std::move(name), std::move(description), std::move(schema), concurrency_safe},
      body, std::move(pool));
}

std::shared_ptr<const tool> make(std::string name, std::string description, std::string schema,
                                 bool concurrency_safe, function_tool::body body) {
  return std::make_shared<function_tool>(
      tool_descriptor{std::move(name), std::move(description), std::move(schema), concurrency_safe},
      body);
}

} // namespace

std::shared_ptr<const tool> make_read_tool(std::shared_ptr<blocking_pool> pool) {
  return make_file_tool(
      "read",
      "Read a text file from the workspace with numbered lines (at most 256 KiB; "
      "use offset and limit for long files).",
      R"({"type":"object","properties":{"file_path":{"type":"string"},"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1,"maximum":2000}},"required":["file_path"],"additionalProperties":false})",
      true, read_body, std::move(pool));
}

std::shared_ptr<const tool> make_write_tool(std::shared_ptr<blocking_pool> pool) {
  return make_file_tool(
      "write", "Write (or append to) a file in the workspace; parents are created.",
      R"({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"append":{"type":"boolean"}},"required":["path","content"],"additionalProperties":false})",
      false, write_body, std::move(pool));
}

std::shared_ptr<const tool> make_edit_tool(std::shared_ptr<blocking_pool> pool) {
  return make_file_tool(
      "edit",
      "Replace old_string with new_string in a workspace file; old_string must occur "
      "exactly once unless replace_all is true.",
      R"({"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string","minLength":1},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["file_path","old_string","new_string"],"additionalProperties":false})",
      false, edit_body, std::move(pool));
}

std::shared_ptr<const tool> make_ls_tool(std::shared_ptr<blocking_pool> pool) {
  return make_file_tool(
      "ls", "List a directory of the workspace.",
      R"({"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false})",
      true, ls_body, std::move(pool));
}

std::shared_ptr<const tool> make_find_tool(std::shared_ptr<blocking_pool> pool) {
  return make_file_tool(
      "find", "Find workspace files by glob (e.g. *.csv, or data/*.json to match the path).",
      R"({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"],"additionalProperties":false})",
      true, find_body, std::move(pool));
}

std::shared_ptr<const tool> make_grep_tool(std::shared_ptr<blocking_pool> pool) {
  return make_file_tool(
      "grep",
      "Search workspace text files with a regular expression (RE2 syntax: no backreferences "
      "or lookaround; at most 200 matches).",
      R"({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},"glob":{"type":"string"},"ignore_case":{"type":"boolean"}},"required":["pattern"],"additionalProperties":false})",
      true, grep_body, std::move(pool));
}

std::shared_ptr<const tool> make_exec_tool() {
  return make(
      "exec",
      "Run a shell command in the sandbox with the workspace as its directory (no "
      "network; output capped at 64,000 bytes per stream).",
      R"({"type":"object","properties":{"command":{"type":"string"},"timeout_s":{"type":"integer","minimum":1,"maximum":300}},"required":["command"],"additionalProperties":false})",
      false, exec_body);
}

} // namespace troupe::tools
