// `troupe serve`: resolve the settings (flag > environment > file > default) and run a
// node until SIGINT/SIGTERM.

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "troupe/actors/node.hpp"
#include "troupe/api/routes.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/runtime/malloc_arenas.hpp"
#include "troupe/runtime/settings.hpp"

#if defined(TROUPE_MIMALLOC)
#include <mimalloc.h>
#endif

namespace troupe::app {

namespace {

struct serve_options {
  std::string config_file;
  std::map<std::string, std::string> flags;
  bool print_config = false;
};

#if !defined(TROUPE_MIMALLOC)
void log_arena_limit(const arena_limit& limit) {
  switch (limit.source) {
    case arena_limit_source::setting:
      log::info("malloc arenas: at most {} (actors.malloc_arenas)", limit.arenas);
      break;
    case arena_limit_source::environment:
      log::info("malloc arenas: at most {} (MALLOC_ARENA_MAX)", limit.arenas);
      break;
    case arena_limit_source::unsupported:
      log::info("malloc arenas: not limited (not glibc)");
      break;
  }
}
#endif

int serve(const serve_options& options) {
  auto resolved = resolve_settings(command_line_sources(options.config_file, options.flags));
  if (!resolved) {
    fmt::print(stderr, "troupe: {}\n", resolved.error().message);
    return 2;
  }
  if (options.print_config) {
    fmt::print("{}", to_toml(*resolved));
    return 0;
  }
  log::configure(resolved->log_level, resolved->log_format);
#if defined(TROUPE_MIMALLOC)
  // glibc's arenas are not in use: mimalloc gives each thread its own heap and returns
  // what it frees to the thread's pages (app/CMakeLists.txt).
  const int v = mi_version();
  log::info("malloc: mimalloc {}.{}.{} (actors.malloc_arenas applies to glibc's malloc only)",
            v / 100, v / 10 % 10, v % 10);
#else
  // Before the node's threads start, so that every one of them is bound to a limited arena.
  const auto& a = resolved->actors;
  const auto arenas = limit_malloc_arenas(
      a.malloc_arenas, a.scheduler_policy == "shards" ? a.shards : a.scheduler_threads);
  log_arena_limit(arenas);
#endif
  actors::node node(std::move(*resolved), api::frontend());
  return node.run();
}

} // namespace

void add_serve_command(CLI::App& cli, command_action& action) {
  auto options = std::make_shared<serve_options>();
  auto* cmd = cli.add_subcommand("serve", "Run the troupe server (HTTP/SSE API) until SIGTERM");
  cmd->add_option("--config", options->config_file,
                  "TOML config file; unknown keys are errors (env TROUPE_CONFIG)");
  // Each flag stores into the map under its settings key, so precedence is applied in
  // one place (resolve_settings) rather than by the CLI library.
  auto add_setting_flag = [&](const char* flag, const char* key, const char* help) {
    cmd->add_option_function<std::string>(
        flag, [options, key](const std::string& value) { options->flags[key] = value; }, help);
  };
  add_setting_flag("--listen", "listen",
                   "HOST:PORT to listen on (env TROUPE_LISTEN; default 127.0.0.1:8080)");
  add_setting_flag("--data-dir", "data_dir",
                   "data directory (env TROUPE_DATA_DIR; default ./var/troupe)");
  add_setting_flag("--log-level", "log_level",
                   "trace|debug|info|warn|error|off (env TROUPE_LOG_LEVEL; default info)");
  add_setting_flag("--log-format", "log_format", "text|json (env TROUPE_LOG_FORMAT; default text)");
  cmd->add_flag("--print-config", options->print_config,
                "print the resolved configuration as TOML and exit");
  cmd->footer("Every config key can also be set as TROUPE_<KEY> in the environment, e.g.\n"
              "TROUPE_SERVER_REQUEST_TIMEOUT_MS=5000. Precedence: flag > env > file > default.");
  cmd->callback([&action, options] { action = [options] { return serve(*options); }; });
}

} // namespace troupe::app
