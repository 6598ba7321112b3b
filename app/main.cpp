// troupe: an actor-based runtime for LLM agents. `troupe --help` lists the commands.

#include <cstdio>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App cli{"troupe: an actor-based runtime for LLM agents", "troupe"};
  cli.require_subcommand(1);
  cli.set_help_all_flag("--help-all", "Help for every command");
  troupe::app::command_action action;
  troupe::app::add_serve_command(cli, action);
  troupe::app::add_version_command(cli, action);
  troupe::app::add_migrate_command(cli, action);
  troupe::app::add_mock_llm_command(cli, action);
  troupe::app::add_chat_command(cli, action);
  troupe::app::add_bench_command(cli, action);
  troupe::app::add_mcp_command(cli, action);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  return action ? action() : 0;
}
