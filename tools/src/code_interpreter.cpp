// The code interpreter: python, javascript or bash written to a real file in the
// workspace and run there in the sandbox; generated files come back as attachments.

#include <algorithm>
#include <random>
#include <set>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool_arguments.hpp"
#include "troupe/runtime/attachment_detection.hpp"
#include "troupe/runtime/base64.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/workspace.hpp"

namespace troupe::tools {

namespace asio = boost::asio;
using detail::parse_tool_arguments;

namespace {

constexpr std::int64_t default_timeout_ms = 60'000;
constexpr std::int64_t max_timeout_ms = 120'000;
constexpr std::int64_t default_memory_mb = 512;
constexpr std::int64_t min_memory_mb = 64;
constexpr std::int64_t max_memory_mb = 4096;
constexpr std::size_t output_cap = 16'000;
constexpr std::size_t max_input_file_bytes = 20 * 1024 * 1024;
// V8 reserves about 1 GiB of address space at start-up whatever the program uses.
constexpr std::size_t node_address_space_extra_mb = 1024;

struct language_spec {
  std::string name;
  std::string extension;
  std::filesystem::path binary;
  std::string package; // the Debian package providing the binary
};

std::string new_exec_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:08x}", static_cast<std::uint32_t>(rng()));
}

// Hidden files and folders (caches, dotfiles) are never offered as attachments.
bool is_hidden(const std::string& path) {
  return path.rfind('.', 0) == 0 || path.find("/.") != std::string::npos;
}

bool is_code_file(const std::string& path) {
  static const std::set<std::string, std::less<>> code_extensions = {".py", ".js", ".mjs", ".cjs",
                                                                     ".sh", ".rb", ".ts",  ".pyc"};
  const auto ext = std::filesystem::path(path).extension().string();
  return code_extensions.count(ext) > 0 || path.find("__pycache__") != std::string::npos;
}

// File work gets this long on the blocking pool; the program's own timeout is separate.
constexpr auto file_work_deadline = std::chrono::seconds(30);

// The workspace as prepared for a run: its root and what was in it before.
struct prepared_workspace {
  std::filesystem::path root;
  std::map<std::string, std::pair<std::uint64_t, std::int64_t>> before;
};

// Writes the input files and the program (handed to the sandbox's uid when troupe runs as
// root), then takes the workspace's snapshot. Blocks: runs on the blocking pool.
tl::expected<prepared_workspace, tool_result>
prepare_workspace(const std::filesystem::path& workspace_dir,
                  const std::vector<std::pair<std::string, std::string>>& input_files,
                  const std::string& file, const std::string& code, const sandbox_options& owner) {
  auto ws = workspace::open(workspace_dir);
  if (!ws) {
    return tl::unexpected(tool_failure("tool_error", ws.error().message));
  }
  // Input files first, so they count as inputs, not outputs.
  std::vector<std::string> inputs;
  for (std::size_t i = 0; i < input_files.size(); ++i) {
    const auto where = fmt::format("arguments.files[{}]", i);
    auto rel = ws->relative(input_files[i].first);
    if (!rel) {
      return tl::unexpected(
          tool_failure("permission_denied", where + ".path: " + rel.error().message));
    }
    if (auto written = ws->write_file(*rel, input_files[i].second); !written) {
      return tl::unexpected(tool_failure(
          written.error().code == errc::permission_denied ? "permission_denied" : "tool_error",
          where + ": " + written.error().message));
    }
    inputs.push_back(*rel);
  }
  if (auto written = ws->write_file(file, code); !written) {
    return tl::unexpected(tool_failure("tool_error", written.error().message));
  }
  if (::geteuid() == 0) {
    (void)::lchown((ws->root() / file).c_str(), owner.uid, owner.gid);
    for (const auto& input : inputs) {
      (void)::lchown((ws->root() / input).c_str(), owner.uid, owner.gid);
    }
  }
  return prepared_workspace{ws->root(), ws->snapshot()};
}

// What a run left in the workspace.
struct run_outputs {
  std::vector<std::string> changed;
  std::vector<tool_artifact> attachments;
};

// Finds the files the program created or changed and those its output named, as
// attachments: regular files inside the workspace only (a FIFO, device or symlink is
// never opened). Blocks: runs on the blocking pool.
expected<run_outputs>
find_outputs(const std::filesystem::path& workspace_dir,
             const std::map<std::string, std::pair<std::uint64_t, std::int64_t>>& before,
             const std::string& file, const std::string& stdout_text, const job_control& control) {
  auto ws = workspace::open(workspace_dir);
  if (!ws) {
    return tl::unexpected(ws.error());
  }
  run_outputs out;
  for (auto& path : changed_files(before, ws->snapshot())) {
    if (path != file) {
      out.changed.push_back(std::move(path));
    }
  }
  auto& attachments = out.attachments;
  const auto attach = [&](const std::string& rel) {
    if (rel == file || std::any_of(attachments.begin(), attachments.end(),
                                   [&rel](const tool_artifact& a) { return a.path == rel; })) {
      return;
    }
    // O_NOFOLLOW: a symlink is not an attachment; open_file refuses anything but a
    // regular file (or directory) without opening it.
    auto handle = ws->open_file(rel, O_RDONLY | O_NOFOLLOW);
    struct stat info {};
    if (!handle || ::fstat(handle->get(), &info) != 0 || !S_ISREG(info.st_mode)) {
      return; // only regular files that exist inside the workspace count
    }
    char head[512];
    const auto n = ::pread(handle->get(), head, sizeof head, 0);
    attachments.push_back(
        {rel, detect_mime(rel, std::string_view(head, n > 0 ? static_cast<std::size_t>(n) : 0)),
         static_cast<std::uint64_t>(info.st_size)});
  };
  for (const auto& mentioned : mentioned_paths(stdout_text)) {
    if (control.should_stop()) {
      break;
    }
    if (auto rel = ws->relative(mentioned); rel && *rel != ".") {
      attach(*rel);
    }
  }
  for (const auto& path : out.changed) {
    if (control.should_stop()) {
      break;
    }
    if (!is_code_file(path) && !is_hidden(path)) {
      attach(path);
    }
  }
  return out;
}

class code_interpreter final : public tool {
public:
  code_interpreter(code_interpreter_options options, std::shared_ptr<blocking_pool> pool)
      : options_(std::move(options)),
        pool_(pool ? std::move(pool) : blocking_pool::shared_default()) {
    descriptor_.name = "code_interpreter";
    descriptor_.description =
        "Run a python, javascript (node) or bash program in a sandbox (no network) with the "
        "workspace as its working directory. Python has numpy, pandas and matplotlib. Print "
        "results to stdout; files written to the working directory are returned as "
        "downloadable attachments.";
    descriptor_.input_schema =
        R"({"type":"object","properties":{)"
        R"("language":{"type":"string","enum":["python","javascript","bash"]},)"
        R"("code":{"type":"string","minLength":1},)"
        R"("files":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"encoding":{"type":"string","enum":["utf8","base64"]}},"required":["path","content"]}},)"
        R"("args":{"type":"array","items":{"type":"string"}},)"
        R"("timeout_ms":{"type":"integer","minimum":1,"maximum":120000},)"
        R"("memory_mb":{"type":"integer","minimum":64,"maximum":4096},)"
        R"("env":{"type":"object","additionalProperties":{"type":"string"}}},)"
        R"("required":["language","code"],"additionalProperties":false})";
    descriptor_.concurrency_safe = false;
  }

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }

  asio::awaitable<tool_result> invoke(std::string arguments, tool_context ctx) const override {
    return run(this, std::move(arguments), std::move(ctx));
  }

private:
  std::optional<language_spec> language(std::string_view name) const {
    if (name == "python" || name == "python3") {
      return language_spec{"python", "py", options_.python, "python3"};
    }
    if (name == "javascript" || name == "node" || name == "js") {
      return language_spec{"javascript", "js", options_.node, "nodejs"};
    }
    if (name == "bash" || name == "shell" || name == "sh") {
      return language_spec{"bash", "sh", options_.bash, "bash"};
    }
    return std::nullopt;
  }

  static asio::awaitable<tool_result> run(const code_interpreter* self, std::string arguments,
                                          tool_context ctx);

  code_interpreter_options options_;
  std::shared_ptr<blocking_pool> pool_;
  tool_descriptor descriptor_;
};

tool_result invalid(const error& e) {
  return tool_failure(e.code == errc::permission_denied ? "permission_denied" : "invalid_arguments",
                      e.message);
}

asio::awaitable<tool_result> code_interpreter::run(const code_interpreter* self,
                                                   std::string arguments, tool_context ctx) {
  auto args = parse_tool_arguments(arguments);
  if (!args) {
    co_return invalid(args.error());
  }
  auto language_name = args->required_text("language");
  auto code = args->required_text("code");
  auto timeout_ms = args->integer("timeout_ms");
  auto memory_mb = args->integer("memory_mb");
  auto extra_args = args->text_list("args");
  for (const auto* failed :
       {language_name ? nullptr : &language_name.error(), code ? nullptr : &code.error(),
        timeout_ms ? nullptr : &timeout_ms.error(), memory_mb ? nullptr : &memory_mb.error(),
        extra_args ? nullptr : &extra_args.error()}) {
    if (failed != nullptr) {
      co_return invalid(*failed);
    }
  }
  const auto spec = self->language(*language_name);
  if (!spec) {
    co_return tool_failure("invalid_arguments",
                           fmt::format("arguments.language: '{}' is not one of python, "
                                       "javascript, bash",
                                       *language_name));
  }
  if (code->empty()) {
    co_return tool_failure("invalid_arguments", "arguments.code: must not be empty");
  }
  const auto timeout = timeout_ms->value_or(default_timeout_ms);
  if (timeout < 1 || timeout > max_timeout_ms) {
    co_return tool_failure("invalid_arguments",
                           fmt::format("arguments.timeout_ms: must be 1 to {}", max_timeout_ms));
  }
  const auto memory = memory_mb->value_or(default_memory_mb);
  if (memory < min_memory_mb || memory > max_memory_mb) {
    co_return tool_failure("invalid_arguments", fmt::format("arguments.memory_mb: must be {} to {}",
                                                            min_memory_mb, max_memory_mb));
  }
  std::map<std::string, std::string> env;
  if (auto env_arg = args->element("env")) {
    simdjson::dom::object object;
    if (env_arg->get_object().get(object) != simdjson::SUCCESS) {
      co_return tool_failure("invalid_arguments", "arguments.env: expected an object of strings");
    }
    for (auto field : object) {
      std::string_view value;
      if (field.value.get_string().get(value) != simdjson::SUCCESS) {
        co_return tool_failure("invalid_arguments",
                               fmt::format("arguments.env.{}: must be a string", field.key));
      }
      env.emplace(std::string(field.key), std::string(value));
    }
  }
  if (ctx.sandbox == nullptr) {
    co_return tool_failure("policy_blocked",
                           "no sandbox is configured, so code cannot run; the code was not run");
  }
  if (::access(spec->binary.c_str(), X_OK) != 0) {
    json_writer w;
    w.begin_object().key("ok").value(false).key("language").value(spec->name);
    w.key("exit_code").value(127);
    w.key("error").value(fmt::format("the {} runtime is missing: {} does not exist; install it "
                                     "with `apt-get install {}`",
                                     spec->name, spec->binary.string(), spec->package));
    w.key("sandboxed").value(!ctx.sandbox->options().allow_host).end_object();
    tool_result missing{false, std::move(w).str(), {}, "tool_error"};
    co_return missing;
  }

  // Input files, as (relative path, bytes), checked before anything is written.
  std::vector<std::pair<std::string, std::string>> input_files;
  if (auto files = args->element("files")) {
    simdjson::dom::array array;
    if (files->get_array().get(array) != simdjson::SUCCESS) {
      co_return tool_failure("invalid_arguments", "arguments.files: expected an array");
    }
    std::size_t index = 0;
    for (auto item : array) {
      const auto where = fmt::format("arguments.files[{}]", index++);
      std::string_view path;
      std::string_view content;
      std::string_view encoding = "utf8";
      if (item["path"].get_string().get(path) != simdjson::SUCCESS ||
          item["content"].get_string().get(content) != simdjson::SUCCESS) {
        co_return tool_failure("invalid_arguments",
                               where + ": needs string fields path and content");
      }
      if (auto e = item["encoding"]; e.error() == simdjson::SUCCESS && !e.is_null()) {
        if (e.get_string().get(encoding) != simdjson::SUCCESS ||
            (encoding != "utf8" && encoding != "base64")) {
          co_return tool_failure("invalid_arguments",
                                 where + ".encoding: expected one of utf8, base64");
        }
      }
      std::string bytes(content);
      if (encoding == "base64") {
        auto decoded = base64_decode(content);
        if (!decoded) {
          co_return tool_failure("invalid_arguments",
                                 where + ".content: " + decoded.error().message);
        }
        bytes = std::move(*decoded);
      }
      if (bytes.size() > max_input_file_bytes) {
        co_return tool_failure("invalid_arguments", where + ".content: larger than 20 MiB");
      }
      input_files.emplace_back(std::string(path), std::move(bytes));
    }
  }
  const auto file = fmt::format("exec_{}.{}", new_exec_id(), spec->extension);

  // File work runs on the blocking pool: writing the inputs and the program, and the
  // scan of the workspace before the run.
  auto pool = self->pool_;
  // (Jobs are named locals, not temporaries inside the co_await: g++ 12 destroys such a
  // temporary twice.)
  auto prepare = [workspace_dir = ctx.workspace, input_files = std::move(input_files), file,
                  code = std::string(*code), owner = ctx.sandbox->options()](const job_control&) {
    return prepare_workspace(workspace_dir, input_files, file, code, owner);
  };
  auto prepared = co_await pool->run(std::move(prepare), file_work_deadline);
  if (!prepared) {
    co_return tool_failure("tool_error", "code_interpreter: " + prepared.error().message);
  }
  if (!*prepared) {
    co_return std::move(prepared->error());
  }
  const auto workspace_root = (*prepared)->root;

  sandbox_request request;
  request.argv = {spec->binary.string(), file};
  request.argv.insert(request.argv.end(), extra_args->begin(), extra_args->end());
  request.workspace = workspace_root;
  request.env = std::move(env);
  request.limits.timeout = std::chrono::milliseconds(timeout);
  request.limits.memory_mb = static_cast<std::size_t>(memory);
  if (spec->name == "javascript") {
    request.limits.address_space_mb =
        static_cast<std::size_t>(memory) + node_address_space_extra_mb;
  }
  request.limits.output_cap_bytes = output_cap;
  auto r = co_await ctx.sandbox->run(std::move(request));

  // What the program produced: files it created or changed, and files it named (found
  // on the blocking pool: the scan opens nothing but directories, and a named file is
  // opened only once it is known to be a regular file).
  auto collect = [workspace_dir = workspace_root, before = std::move((*prepared)->before), file,
                  stdout_text = r.stdout_text](const job_control& control) {
    return find_outputs(workspace_dir, before, file, stdout_text, control);
  };
  auto found = co_await pool->run(std::move(collect), file_work_deadline);
  std::vector<std::string> changed;
  std::vector<tool_artifact> attachments;
  std::vector<std::string> notes;
  if (found && *found) {
    changed = std::move((*found)->changed);
    attachments = std::move((*found)->attachments);
  } else {
    notes.push_back("the files the program wrote could not be collected: " +
                    (found ? found->error().message : found.error().message));
  }

  const bool ok = r.exit_code == 0 && !r.timed_out;
  if (!r.sandboxed) {
    notes.push_back("ran on the host: the sandbox is disabled by configuration");
  }
  if (r.stdout_truncated || r.stderr_truncated) {
    notes.push_back(fmt::format("output was truncated to {} bytes per stream", output_cap));
  }
  if (r.timed_out) {
    notes.push_back(fmt::format("killed after the {} ms timeout", timeout));
  }
  json_writer w;
  w.begin_object();
  w.key("ok").value(ok).key("language").value(spec->name).key("file").value(file);
  w.key("exit_code").value(r.exit_code).key("stdout").value(r.stdout_text);
  w.key("stderr").value(r.stderr_text);
  w.key("error").value(r.error.empty() && !ok && !r.timed_out
                           ? fmt::format("the program exited with code {}", r.exit_code)
                           : r.error);
  w.key("timed_out").value(r.timed_out).key("duration_ms").value(r.duration.count());
  w.key("sandboxed").value(r.sandboxed);
  w.key("files").begin_array();
  for (const auto& f : changed) {
    w.value(f);
  }
  w.end_array().key("attachments").begin_array();
  for (const auto& a : attachments) {
    w.begin_object().key("path").value(a.path).key("mime").value(a.mime);
    w.key("size").value(a.size).end_object();
  }
  w.end_array().key("notes").begin_array();
  for (const auto& n : notes) {
    w.value(n);
  }
  w.end_array().key("limits").begin_array();
  for (const auto& l : r.limits_in_force) {
    w.value(l);
  }
  w.end_array().end_object();
  tool_result result{ok, std::move(w).str(), std::move(attachments), {}};
  if (r.timed_out) {
    result.failure_kind = "timeout";
  } else if (!ok) {
    result.failure_kind = "tool_error";
  }
  co_return result;
}

} // namespace

std::shared_ptr<const tool> make_code_interpreter_tool(code_interpreter_options options,
                                                       std::shared_ptr<blocking_pool> pool) {
  return std::make_shared<code_interpreter>(std::move(options), std::move(pool));
}

expected<void> register_builtin_tools(tool_registry& registry, code_interpreter_options options,
                                      std::shared_ptr<blocking_pool> pool) {
  if (!pool) {
    pool = blocking_pool::shared_default();
  }
  for (auto t : {make_read_tool(pool), make_write_tool(pool), make_edit_tool(pool),
                 make_ls_tool(pool), make_find_tool(pool), make_grep_tool(pool), make_exec_tool(),
                 make_code_interpreter_tool(std::move(options), pool)}) {
    if (auto added = registry.add(std::move(t)); !added) {
      return added;
    }
  }
  return {};
}

} // namespace troupe::tools
