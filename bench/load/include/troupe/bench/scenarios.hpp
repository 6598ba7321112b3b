#pragma once

/// \file
/// The named scenarios of `troupe bench`. Each takes the same options, runs against a
/// loopback target (a mock-llm started in-process when none is given) and returns a
/// report.
///
/// - `overhead`: the same non-streaming chat completion sent straight to the target
///   and through `via`, interleaved at concurrency 1; p50/p99 of each and the added
///   latency. Without `via`, only the direct half runs (and the report says so).
/// - `throughput`: open-loop steps at rising rates (doubling, then bisecting) against
///   `via` (else the target) with an instant mock answer; the highest rate whose p99
///   stays under `p99_bound` with zero errors. `rate` or `concurrency` runs one fixed
///   step instead.
/// - `stream`: `concurrency` concurrent streamed completions of `tokens` chunks paced
///   `token_delay` apart; time to first token and inter-token gaps measured at the
///   client, tokens/s. `fire_hose` sets the delay to zero for the relay ceiling. With
///   `via`, the direct path runs first with the same load, and the added TTFT and gap
///   percentiles are reported.
///
/// `via = "troupe"` routes the second path through troupe's OpenAI-compatible
/// `POST /v1/chat/completions`, the model being an agent without tools (one LLM round
/// through troupe's run actor): a troupe started here as a child (`troupe_server`) whose
/// provider is this run's mock-llm, or the one given by `troupe_url`.
///
/// The chat-API scenarios always run against troupe (started here unless `troupe_url`):
/// - `agent`: the peers' task (bench/peers: LLM → `read` tool → LLM → answer) through
///   `POST /api/v1/chat`, closed loop at concurrency 1, 100 and 1000 (or `concurrency`):
///   runs/s, run latency and what lies beyond the mock's own time, troupe's RSS idle and
///   peak, memory per concurrent run, CPU per run; every answer verified. Side by side
///   with the peers' JSON results when `peers_dir` has them.
/// - `storage`: the agent load at one concurrency, with the rows troupe persisted counted
///   in its SQLite file while it runs: messages/s (and runs, steps); commit latency is not
///   exposed by troupe, so the report says what bounds it.
/// - `idle`: `conversations` conversations kept in memory, then a run waiting on the model
///   in each, then an SSE subscriber on each run: troupe's resident memory per
///   conversation, per waiting run and per subscriber, kernel socket memory separately.
/// - `channel`: `conversations` threads (default 1,000) × `runs` messages (default 5) into
///   a channel of `channel_type` (a generic webhook by default; telegram, slack, wecom,
///   wechat_mp, whatsapp, feishu and dingtalk against their fake platforms), replies at the
///   platform's side: messages/s and the latency from delivery to reply, every reply
///   checked (missing, twice, out of order).
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/bench/report.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::bench {

/// Options of one run (the CLI's flags).
struct scenario_options {
  std::string scenario = "overhead";
  /// Loopback URL of an OpenAI-compatible model server (mock-llm); a bare origin or a
  /// base URL ending in /v1 means its /v1/chat/completions, another path is used as is. Empty:
  /// start a mock-llm in-process on 127.0.0.1:0.
  std::string target;
  /// The second path: "troupe" (troupe's OpenAI-compatible route), or a loopback URL used
  /// as given (a bare origin or .../v1 as for `target`).
  std::string via;
  /// Open-loop arrivals per second (0: not set).
  double rate = 0;
  /// Closed-loop workers / concurrent streams (0: the scenario's default).
  unsigned concurrency = 0;
  /// Length of the run (throughput: of each step).
  std::chrono::milliseconds duration{5'000};
  std::chrono::milliseconds timeout{5'000};
  /// throughput: the p99 a step must stay under.
  std::chrono::microseconds p99_bound{1'000};
  /// Words per answer; stream: chunks per stream (0: 16 for chat scenarios, 64 for a
  /// paced stream, 1024 for the fire hose).
  unsigned tokens = 0;
  /// stream: delay between chunks.
  unsigned token_delay_ms = 20;
  bool fire_hose = false;
  /// Progress lines on stderr.
  bool progress = true;
  /// A running troupe to use instead of starting one (loopback only), with its admin
  /// token; optionally its pid (memory readings) and data directory (workspaces, database).
  std::string troupe_url;
  std::string troupe_token;
  int troupe_pid = 0;
  std::string troupe_data_dir;
  /// Settings for a troupe started here, KEY=VALUE (dotted key, TOML value).
  std::vector<std::string> troupe_settings;
  /// Keep the started troupe's temporary directory (config, data, log).
  bool keep_troupe_dir = false;
  /// agent, storage: measured runs per concurrency level (0: 200, 2000, 5000 for 1, 100,
  /// 1000 as the peers; 20 x concurrency otherwise).
  unsigned runs = 0;
  /// idle: conversations (0: 1000); channel: threads (0: 1000).
  unsigned conversations = 0;
  /// channel: the platform driven (webhook, telegram, slack, wecom, wechat_mp, whatsapp,
  /// feishu, dingtalk; empty: webhook).
  std::string channel_type;
  /// channel, telegram: the numbers of simulated users, one level each (default 1, 10,
  /// 100); with `peers_dir` (the directory holding openclaw/) OpenClaw gets the same users.
  std::vector<unsigned> users;
  /// channel, telegram users: unrecorded messages of a warm-up user first (default 3).
  unsigned warmup_messages = 0;
  /// agent: "agent" (the 3-step tool task at 1/100/1000, plus the one-round levels of any
  /// one-round peer results), "one-round" (only the one-round task: the peers' levels, or
  /// --concurrency, or 1 and 8) or "all" (both, one-round at 1 and 8 without such peers).
  std::string task = "agent";
  /// agent: a directory of the peers' JSON results (bench/peers/results) to compare with.
  std::string peers_dir;
  /// agent: also write troupe's result per level in the peers' format here
  /// (troupe-c<N>.json), so that bench/peers/summarize.mjs lists troupe with the peers.
  std::string peers_out;
  /// agent, storage: the mock-llm script (default bench/peers/agent_scenario.jsonl) and
  /// the file put into each conversation's workspace (bench/peers/fixtures/input.txt).
  std::string agent_script;
  std::string agent_fixture;
  /// Recorded verbatim in the report.
  std::vector<std::string> command_line;
};

/// Every scenario name, the runnable ones first.
const std::vector<std::string_view>& scenario_names();

/// Checks the options (known scenario, loopback targets) without sending anything.
expected<void> validate(const scenario_options& options);

/// Runs the scenario. Fails with `invalid_argument` / `permission_denied` before any
/// traffic when the options are wrong, `unavailable` when a target does not answer at
/// all or troupe cannot be started.
expected<bench_report> run_scenario(const scenario_options& options);

} // namespace troupe::bench
