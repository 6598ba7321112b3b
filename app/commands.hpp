#pragma once

// Each troupe subcommand registers itself on the CLI and, when chosen, sets `action` to
// the function main runs after parsing. Logic lives in the layers; these files only wire
// options to it.

#include <functional>

#include <CLI/CLI.hpp>

namespace troupe::app {

/// What main runs once the command line is parsed; returns the exit code.
using command_action = std::function<int()>;

void add_serve_command(CLI::App& cli, command_action& action);
void add_version_command(CLI::App& cli, command_action& action);
void add_migrate_command(CLI::App& cli, command_action& action);
void add_mock_llm_command(CLI::App& cli, command_action& action);
void add_chat_command(CLI::App& cli, command_action& action);
void add_bench_command(CLI::App& cli, command_action& action);
void add_mcp_command(CLI::App& cli, command_action& action);

} // namespace troupe::app
