#pragma once

/// \file
/// The built-in tools that work in an agent's workspace: read, write, edit, ls, find,
/// grep and exec (a shell command in the sandbox), and the code interpreter (python,
/// javascript or bash in the sandbox, with generated files returned as attachments).

#include <filesystem>
#include <memory>

#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/sandbox.hpp"
#include "troupe/tools/tool.hpp"

namespace troupe::tools {

/// The file tools do their file work on `pool` (the process's default pool when null),
/// never on the calling thread, each call within a wall-clock deadline.
std::shared_ptr<const tool> make_read_tool(std::shared_ptr<blocking_pool> pool = nullptr);
std::shared_ptr<const tool> make_write_tool(std::shared_ptr<blocking_pool> pool = nullptr);
std::shared_ptr<const tool> make_edit_tool(std::shared_ptr<blocking_pool> pool = nullptr);
std::shared_ptr<const tool> make_ls_tool(std::shared_ptr<blocking_pool> pool = nullptr);
std::shared_ptr<const tool> make_find_tool(std::shared_ptr<blocking_pool> pool = nullptr);
std::shared_ptr<const tool> make_grep_tool(std::shared_ptr<blocking_pool> pool = nullptr);
std::shared_ptr<const tool> make_exec_tool();

/// Where the code interpreter finds each language's runtime (inside the sandbox, the
/// host's /usr is mounted read-only, so these are host paths under /usr).
struct code_interpreter_options {
  std::filesystem::path python = "/usr/bin/python3";
  std::filesystem::path node = "/usr/bin/node";
  std::filesystem::path bash = "/usr/bin/bash";
};

/// The code interpreter scans and reads the workspace on `pool` (default pool when null).
std::shared_ptr<const tool>
make_code_interpreter_tool(code_interpreter_options options = {},
                           std::shared_ptr<blocking_pool> pool = nullptr);

/// Adds every built-in workspace tool and the code interpreter to `registry`; their file
/// work runs on `pool` (the process's default pool when null).
expected<void> register_builtin_tools(tool_registry& registry,
                                      code_interpreter_options options = {},
                                      std::shared_ptr<blocking_pool> pool = nullptr);

} // namespace troupe::tools
