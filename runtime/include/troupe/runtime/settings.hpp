#pragma once

/// \file
/// troupe's configuration: the typed settings, their keys, and how a value is resolved
/// from the config file (TOML), the environment (`TROUPE_<KEY>`) and command-line flags.
/// Precedence: flag > environment > file > built-in default.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/channel_config.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/runtime/mcp_config.hpp"
#include "troupe/runtime/tool_config.hpp"

namespace troupe {

/// A parsed `HOST:PORT` (IPv6 hosts in brackets: `[::1]:8080`).
struct endpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;

  std::string to_string() const;
  friend bool operator==(const endpoint&, const endpoint&) = default;
};

/// Parses `HOST:PORT`; port 0 asks the kernel for a free port.
expected<endpoint> parse_endpoint(std::string_view text);

/// The HTTP server's knobs (`[server]` in the config file).
struct server_settings {
  /// Threads running the Asio io_context.
  unsigned io_threads = 1;
  /// Largest accepted request body; larger ones are answered 413.
  std::size_t body_limit_bytes = 1024 * 1024;
  /// Deadline for reading one request and producing its response (not SSE streams).
  std::chrono::milliseconds request_timeout{30'000};
  /// How long an idle keep-alive connection is kept open.
  std::chrono::milliseconds idle_timeout{65'000};
  /// How long in-flight requests and streams may run on after SIGTERM.
  std::chrono::milliseconds shutdown_timeout{10'000};
  /// Interval between SSE comment pings.
  std::chrono::milliseconds sse_ping_interval{15'000};
  /// Events buffered per SSE stream before the producer is told the client is slow.
  std::size_t sse_queue_capacity = 256;
  /// Connections accepted at once; further ones are closed immediately.
  std::size_t max_connections = 100'000;
};

/// The CAF actor system's knobs (`[actors]`).
struct actor_settings {
  /// Scheduler worker threads; 0 means one per core.
  unsigned scheduler_threads = 0;
  /// "shards" (one thread per shard runs its actors and its network I/O; see
  /// docs/execution-model.md), or CAF's own "sharing" (one shared queue) or "stealing"
  /// scheduler with `server.io_threads` separate io threads.
  std::string scheduler_policy = "shards";
  /// Messages an actor may handle before yielding its thread.
  std::size_t max_throughput = 300;
  /// With policy "shards": the shards (threads); 0 means one per core.
  unsigned shards = 0;
  /// With policy "shards": a shard's thread held this long by one actor or handler is
  /// logged as a warning naming it.
  std::chrono::milliseconds lag_warn{50};
  /// glibc malloc arenas the process may use (runtime/malloc_arenas.hpp); 0: two per
  /// shard (per scheduler thread with the other policies). MALLOC_ARENA_MAX, when set,
  /// wins.
  unsigned malloc_arenas = 0;
  /// A conversation without activity for this long leaves memory (its state is in
  /// SQLite; the next message brings it back).
  std::chrono::milliseconds conversation_idle{600'000};
  /// Earlier messages a conversation gives each run (loaded from SQLite on start).
  std::size_t history_messages = 100;
  /// Messages one conversation lets wait for a run at once (queued behind its active
  /// run, merged into a queued turn, or steering the active run); one more is refused
  /// with 429 before it is stored. 0: no bound.
  std::size_t max_pending = 64;
  /// The most estimated tokens (prompt/token_estimate.hpp: a quarter token per
  /// character, two thirds per CJK character) of a conversation's earlier turns that a
  /// round's prompt carries; the oldest whole messages go first. 0: only the model's
  /// context window bounds them.
  std::uint32_t history_max_tokens = 32'000;
  /// The longest a channel thread shows the platform's typing indicator for one stretch
  /// of runs (Telegram's `typing`, renewed every 4 s).
  std::chrono::milliseconds channel_typing_cap{120'000};
  /// Beyond an agent's own deadline, how long a channel thread waits for a run's answer.
  std::chrono::milliseconds channel_run_grace{60'000};
};

/// `[tools]`: how tools run.
struct tool_settings {
  /// Run code on the host, without the bubblewrap sandbox (explicit opt-in; every result
  /// then says sandboxed: false).
  bool allow_host = false;
  /// Longest a single tool call may take.
  std::chrono::milliseconds timeout{300'000};
  /// The most bytes a conversation's workspace may hold: a `write` or `edit` that would
  /// take it past this fails with a tool error saying so. 0: no cap.
  std::uint64_t workspace_max_bytes = 1024ull * 1024 * 1024;
  /// Seconds a pending approval waits before it counts as a denial, for agents that do
  /// not set `approval_timeout_s` (approval.hpp).
  std::uint32_t approval_timeout_s = 600;
};

/// `[skills]` (issue 19): where SKILL.md folders are found and how their scripts run.
struct skill_settings {
  /// `skills.dir`: the folder of skill folders; empty: `<data_dir>/skills`.
  std::filesystem::path dir;
  /// `skills.dirs`: further folders of skill folders (file only).
  std::vector<std::filesystem::path> dirs;
  /// `skills.runners.<ext>`: the command that runs a script with that extension (file
  /// only), e.g. `ts = "/usr/bin/node --experimental-strip-types"`; split on spaces.
  std::map<std::string, std::string> runners;

  /// Every folder to load, `skills.dir` (or its default under `data_dir`) first.
  std::vector<std::filesystem::path> folders(const std::filesystem::path& data_dir) const;
};

/// `[blocking]`: the pool of threads for work that may block (tools' file work), kept off
/// the threads that serve requests.
struct blocking_settings {
  /// Worker threads; a job offered while all are busy and the queue is full is refused.
  unsigned threads = 4;
};

/// The database's knobs (`[storage]`). The file is `<data_dir>/troupe.db`.
struct storage_settings {
  /// "normal" (WAL + synchronous=NORMAL: a commit survives a process crash) or "full"
  /// (fsync at every commit: survives power loss too).
  std::string synchronous = "normal";
  /// How long the writer waits for more writes before committing a batch; 0 commits
  /// once the writes already in its mailbox are in the batch (batches form under load
  /// without delaying a lone write: 8.0 -> 1.8 ms added p50 in `troupe bench`).
  std::chrono::milliseconds group_commit{0};
  /// Writes that end a batch at once, without waiting for the timer.
  std::size_t group_commit_max = 1024;
  /// Read-only connections in the read pool.
  unsigned read_connections = 4;
  /// Writes that admit new work (a message and its run, an API write) that may wait for
  /// the writer at once; past it such work is refused with 503 "storage is overloaded"
  /// before anything is acknowledged. The writes of admitted work are never refused.
  /// 0: no bound.
  std::size_t writer_max_queue = 4096;
  /// WAL frames beyond which a checkpoint copies them back into the database. It runs
  /// on a thread of its own (storage::wal_checkpointer), never inside a commit.
  unsigned checkpoint_frames = 1000;
  /// WAL frames beyond which the writer, after a commit, copies back what the checkpoint
  /// thread has not, so that the log restarts from its beginning (a writer that never
  /// pauses would otherwise grow it for as long as the load lasts).
  unsigned wal_restart_frames = 4000;
  /// The writer's connection writes each commit's WAL frames with one system call instead
  /// of two per page (storage/include/troupe/storage/wal_write_buffer.hpp).
  bool gather_wal_writes = true;
};

/// `[api]`: the /api/v1 surface: per-token rate limits, uploads, signed links and CORS.
struct api_settings {
  /// Requests per second each token may make on average (token bucket refill rate).
  double rate_per_second = 20.0;
  /// Requests a token may make at once before the rate applies (bucket size).
  double rate_burst = 40.0;
  /// Requests without a valid token (401, a bad signed link) and token mints one client
  /// address may make per second on average; past it every guarded request from that
  /// address is answered 429 with Retry-After, before its token is looked up.
  double unauthenticated_rate_per_second = 1.0;
  /// Such requests one address may make at once before that rate applies.
  double unauthenticated_rate_burst = 30.0;
  /// Client addresses tracked at most (an IPv6 address counts by its /64); past it the
  /// address seen least recently is forgotten.
  std::size_t unauthenticated_max_addresses = 10'000;
  /// Largest uploaded file (larger: 413). The server's body limit also applies.
  std::size_t max_upload_bytes = 1000 * 1000;
  /// How long a signed file link stays valid.
  std::chrono::milliseconds signed_link_ttl{3'600'000};
  /// Origins allowed by CORS (exact match, or "*"); empty: no CORS headers at all.
  std::vector<std::string> cors_origins;
  /// Serve /metrics without a token (for scrapers on a trusted network).
  bool open_metrics = false;
  /// How long a finished run's event log stays in memory for replay (`/runs/{id}/events`);
  /// later, replay serves the events stored in SQLite, under the same ids.
  std::chrono::milliseconds run_retention{900'000};
  /// Bytes all runs' journals may hold in memory together; past it the oldest finished
  /// journals leave memory first (their events are stored, so replay goes on from the
  /// database). Running journals are never dropped.
  std::size_t journal_max_bytes = std::size_t{64} << 20;
  /// How long a conversation that `/v1/chat/completions` created for one request (one that
  /// names no conversation to continue) is kept after its last activity; then it is
  /// deleted with its workspace and its files' bytes.
  std::chrono::milliseconds ephemeral_retention{3'600'000};
};

/// `[secrets]`: what may hold a provider's key. Read from the config file only: no flag,
/// environment variable or API call sets it (see `key_env_policy`).
struct secrets_settings {
  /// Environment variables that `api_key_env` / `api_key_ref` may name besides
  /// `TROUPE_KEY_*` and `OPENAI_API_KEY`.
  std::vector<std::string> allowed_env;
};

/// Everything `troupe serve` is configured by.
struct settings {
  endpoint listen;
  std::filesystem::path data_dir = "./var/troupe";
  log::level log_level = log::level::info;
  log::format log_format = log::format::text;
  server_settings server;
  actor_settings actors;
  storage_settings storage;
  api_settings api;
  tool_settings tools;
  blocking_settings blocking;
  secrets_settings secrets;
  /// `[web]`: web_fetch and web_search limits (tool_config.hpp).
  web_settings web;
  /// `[skills]`: SKILL.md folders (issue 19).
  skill_settings skills;
  /// `[compression]`: when a conversation's prompt is compressed (issue 16).
  compression_settings compression;
  /// `[[providers]]` entries of the config file.
  std::vector<provider_settings> providers;
  /// `[[agents]]` entries of the config file.
  std::vector<agent_settings> agents;
  /// `[[channels]]` entries of the config file (channel_config.hpp).
  std::vector<channel_settings> channels;
  /// `[[tools]]` and `[[search_engines]]` entries of the config file (tool_config.hpp).
  std::vector<custom_tool_settings> custom_tools;
  std::vector<search_engine_settings> search_engines;
  /// `[[mcp_servers]]` entries of the config file (mcp_config.hpp).
  std::vector<mcp_server_settings> mcp_servers;
};

/// One configurable key: its dotted name (`server.request_timeout_ms`), environment name
/// (`TROUPE_SERVER_REQUEST_TIMEOUT_MS`), default and meaning. Drives the README's
/// reference and `troupe serve --print-config`.
struct setting_info {
  std::string key;
  std::string env_name;
  std::string default_value;
  std::string help;
};

/// Every key troupe knows, in documentation order.
std::span<const setting_info> setting_catalog();

/// The raw inputs to `resolve_settings`, gathered by the CLI.
struct setting_sources {
  /// Path of the TOML config file; empty for none.
  std::filesystem::path config_file;
  /// The process environment (only `TROUPE_*` entries are looked at).
  std::map<std::string, std::string> environment;
  /// Values given as flags, by dotted key (`listen`, `data_dir`, …).
  std::map<std::string, std::string> flags;
};

/// The sources a troupe command resolves its settings from: the process environment,
/// the config file given on the command line (or else named by TROUPE_CONFIG), and the
/// flags by dotted key.
setting_sources command_line_sources(std::filesystem::path config_file,
                                     std::map<std::string, std::string> flags);

/// Applies file, environment and flags over the defaults. Errors name the offending key
/// and where it came from (file path, variable name or flag).
expected<settings> resolve_settings(const setting_sources& sources);

/// Applies a TOML document (already read) over `base`; `source_name` is used in errors.
expected<settings> apply_toml(settings base, std::string_view toml_text,
                              std::string_view source_name);

/// Applies one textual value to the key `key` (as from a flag or environment variable).
expected<void> apply_setting(settings& target, std::string_view key, std::string_view value);

/// The resolved settings as a TOML document (`troupe serve --print-config`).
std::string to_toml(const settings& s);

/// Snapshot of the process environment as a map.
std::map<std::string, std::string> environment_snapshot();

} // namespace troupe
