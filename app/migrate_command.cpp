// `troupe migrate`: apply the database migrations in the data directory and print the
// schema version, without starting the server.

#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "troupe/runtime/settings.hpp"
#include "troupe/storage/data_dir.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/schema.hpp"

namespace troupe::app {

namespace {

struct migrate_options {
  std::string config_file;
  std::map<std::string, std::string> flags;
};

int migrate(const migrate_options& options) {
  auto resolved = resolve_settings(command_line_sources(options.config_file, options.flags));
  if (!resolved) {
    fmt::print(stderr, "troupe: {}\n", resolved.error().message);
    return 2;
  }
  auto lock = storage::open_data_dir(resolved->data_dir);
  if (!lock) {
    fmt::print(stderr, "troupe: {}\n", lock.error().message);
    return 1;
  }
  auto sync = storage::parse_sync_mode(resolved->storage.synchronous);
  if (!sync) {
    fmt::print(stderr, "troupe: {}\n", sync.error().message);
    return 2;
  }
  const auto path = storage::database_path(resolved->data_dir);
  auto conn = storage::connection::open(path, {.sync = *sync});
  if (!conn) {
    fmt::print(stderr, "troupe: {}\n", conn.error().message);
    return 1;
  }
  auto before = storage::schema_version(*conn);
  auto after = before ? storage::migrate(*conn) : before;
  if (after) {
    if (auto idx = storage::ensure_message_index(*conn); !idx) {
      after = tl::unexpected(idx.error());
    }
  }
  if (!after) {
    fmt::print(stderr, "troupe: {}\n", after.error().message);
    return 1;
  }
  if (*before == *after) {
    fmt::print("{}: schema version {} (up to date)\n", path.string(), *after);
  } else {
    fmt::print("{}: schema version {} (migrated from {})\n", path.string(), *after, *before);
  }
  return 0;
}

} // namespace

void add_migrate_command(CLI::App& cli, command_action& action) {
  auto options = std::make_shared<migrate_options>();
  auto* cmd =
      cli.add_subcommand("migrate", "Apply database migrations and print the schema version");
  cmd->add_option("--config", options->config_file,
                  "TOML config file; unknown keys are errors (env TROUPE_CONFIG)");
  cmd->add_option_function<std::string>(
      "--data-dir", [options](const std::string& value) { options->flags["data_dir"] = value; },
      "data directory (env TROUPE_DATA_DIR; default ./var/troupe)");
  cmd->callback([&action, options] { action = [options] { return migrate(*options); }; });
}

} // namespace troupe::app
