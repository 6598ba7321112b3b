// `troupe version`: the release and build.

#include <fmt/format.h>

#include "commands.hpp"
#include "troupe/runtime/version.hpp"

namespace troupe::app {

void add_version_command(CLI::App& cli, command_action& action) {
  auto* cmd = cli.add_subcommand("version", "Print troupe's version and build");
  cmd->callback([&action] {
    action = [] {
      fmt::print("troupe {} ({})\n", version(), build_info());
      return 0;
    };
  });
}

} // namespace troupe::app
