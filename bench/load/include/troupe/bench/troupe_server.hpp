#pragma once

/// \file
/// The troupe server a scenario measures: either a child process `troupe bench` starts
/// itself (the same binary, `troupe serve` on 127.0.0.1:0 with a fresh data directory and
/// a generated config declaring a provider that points at the bench's mock-llm and the
/// agents the scenario needs), or a running server given by URL and admin token, in which
/// the bench creates that provider and those agents through the admin API.
///
/// Every request to troupe carries `Authorization: Bearer <token>`: for a child, the
/// admin token troupe wrote to `<data-dir>/admin.token` on its first start.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::bench {

/// An agent a scenario needs.
struct bench_agent {
  std::string name;
  /// Tool names (empty: a plain chat agent, one LLM round per message).
  std::vector<std::string> tools;
  unsigned max_rounds = 4;
};

/// What the troupe under test must be configured with.
struct troupe_setup {
  /// OpenAI-compatible base URL of the model server troupe's provider uses (the bench's
  /// mock-llm), ending in /v1.
  std::string provider_base_url;
  std::string model = "mock-llm";
  std::vector<bench_agent> agents;
  /// Settings for a child troupe, dotted key -> TOML value text, e.g.
  /// {"actors.conversation_idle_ms", "1000"}; they win over the bench's own defaults
  /// (rate limits raised out of the way, a short shutdown). Not applied to a given server.
  std::vector<std::pair<std::string, std::string>> settings;
};

/// How to start a child troupe.
struct spawn_options {
  /// The troupe binary; empty: this very executable (/proc/self/exe).
  std::string binary;
  /// How long troupe may take to print its "listening on" line.
  std::chrono::milliseconds start_timeout{30'000};
  /// Keep the temporary directory (config, data dir, log) after the run.
  bool keep_dir = false;
};

/// A troupe server under test.
class troupe_server {
public:
  /// Starts `<binary> serve --config <generated>` as a child with a temporary data
  /// directory, waits for its "listening on http://HOST:PORT" log line and reads its
  /// admin token. The child gets SIGTERM if this process dies.
  static expected<std::unique_ptr<troupe_server>> spawn(const troupe_setup& setup,
                                                        const spawn_options& options);

  /// Uses a running troupe at `url` (loopback only) with an admin `token`: creates (or
  /// updates) the provider "troupe-bench-mock" and the agents through the admin API.
  /// `pid` (0: unknown) enables memory readings; `data_dir` (empty: unknown) lets
  /// scenarios reach workspaces and the database.
  static expected<std::unique_ptr<troupe_server>> attach(std::string_view url, std::string token,
                                                         const troupe_setup& setup, pid_t pid,
                                                         std::filesystem::path data_dir);

  ~troupe_server();
  troupe_server(const troupe_server&) = delete;
  troupe_server& operator=(const troupe_server&) = delete;

  /// http://HOST:PORT
  const std::string& origin() const noexcept {
    return origin_;
  }
  /// `Authorization: Bearer <token>`.
  net::http_header authorization() const;
  /// The troupe process (0 when it was given by URL without --troupe-pid).
  pid_t pid() const noexcept {
    return pid_;
  }
  /// Its data directory (empty when unknown).
  const std::filesystem::path& data_dir() const noexcept {
    return data_dir_;
  }
  bool spawned() const noexcept {
    return spawned_;
  }

  /// Stops a child and starts it again on the same config and data directory (a fresh
  /// process: nothing of the earlier one's memory), on a new port.
  expected<void> restart();

  /// Stops a child: SIGTERM, then SIGKILL after `grace`. Returns its exit status (128+N
  /// for signal N); 0 at once for a server that is not ours.
  int stop(std::chrono::milliseconds grace);

  /// The end of a child's log, for error messages.
  std::string log_tail(std::size_t max_bytes = 2'000) const;

  /// URL, how it was obtained, pid and config, for the report's `targets`.
  boost::json::object describe() const;

private:
  troupe_server() = default;
  /// Forks and execs the child, then waits for its port and reads its token.
  expected<void> launch();

  std::string origin_;
  std::string token_;
  pid_t pid_ = 0;
  bool spawned_ = false;
  bool stopped_ = false;
  std::filesystem::path dir_;
  std::filesystem::path data_dir_;
  std::filesystem::path log_path_;
  std::filesystem::path config_path_;
  std::chrono::milliseconds start_timeout_{30'000};
  std::string binary_;
  std::string config_text_;
  bool keep_dir_ = false;
};

/// Runs one request to completion on a private io_context (blocking the caller); for
/// set-up and preflight, not for measured load.
expected<net::http_client_response> fetch_blocking(net::http_client_request request);

/// The TOML config a child troupe is started with (exposed for tests).
std::string troupe_config_text(const troupe_setup& setup, const std::filesystem::path& data_dir);

} // namespace troupe::bench
