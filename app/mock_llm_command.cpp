// `troupe mock-llm`: run the MOCK model server (canned answers over the real OpenAI and
// Anthropic wire formats) for tests, demos and benchmarks.

#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/runtime/settings.hpp"

namespace troupe::app {

namespace {

struct mock_llm_cli {
  std::string listen = "127.0.0.1:8081";
  std::string script;
  std::string random_faults;
  unsigned threads = 1;
  mock::mock_llm_options options;
};

int run_mock_llm(mock_llm_cli cli) {
  auto where = parse_endpoint(cli.listen);
  if (!where) {
    fmt::print(stderr, "troupe mock-llm: {}\n", where.error().message);
    return 2;
  }
  if (!cli.script.empty()) {
    std::ifstream in(cli.script, std::ios::binary);
    if (!in) {
      fmt::print(stderr, "troupe mock-llm: cannot read script {}\n", cli.script);
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto rules = mock::parse_mock_script(text.str());
    if (!rules) {
      fmt::print(stderr, "troupe mock-llm: {}: {}\n", cli.script, rules.error().message);
      return 2;
    }
    cli.options.rules = std::move(*rules);
  }
  if (!cli.random_faults.empty()) {
    auto faults = mock::parse_mock_fault_list(cli.random_faults);
    if (!faults) {
      fmt::print(stderr, "troupe mock-llm: --random-faults: {}\n", faults.error().message);
      return 2;
    }
    cli.options.random_faults = std::move(*faults);
  }
  boost::asio::io_context io;
  const auto rule_count = cli.options.rules.size();
  mock::mock_llm_server server(io, std::move(cli.options));
  auto bound = server.listen(*where);
  if (!bound) {
    fmt::print(stderr, "troupe mock-llm: {}\n", bound.error().message);
    return 1;
  }
  server.start();
  fmt::print("troupe mock-llm: a MOCK model server (canned answers, not a model) listening on "
             "http://{}\n"
             "  OpenAI wire:    POST http://{}/v1/chat/completions\n"
             "  Anthropic wire: POST http://{}/v1/messages\n"
             "  stats:          GET  http://{}/_mock/stats\n"
             "  script rules:   {}\n",
             bound->to_string(), bound->to_string(), bound->to_string(), bound->to_string(),
             rule_count);
  std::fflush(stdout);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) {
      server.stop(std::chrono::seconds(2), [&io] { io.stop(); });
    }
  });
  std::vector<std::thread> extra;
  for (unsigned i = 1; i < cli.threads; ++i) {
    extra.emplace_back([&io] { io.run(); });
  }
  io.run();
  for (auto& t : extra) {
    t.join();
  }
  return 0;
}

} // namespace

void add_mock_llm_command(CLI::App& cli, command_action& action) {
  auto opts = std::make_shared<mock_llm_cli>();
  auto* cmd = cli.add_subcommand(
      "mock-llm", "Run a MOCK OpenAI/Anthropic-compatible model server for tests and benchmarks");
  cmd->add_option("--listen", opts->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--script", opts->script,
                  "JSON or JSONL file of rules (match on user text, tool result, call number)");
  cmd->add_option("--tokens", opts->options.tokens, "words per default answer")
      ->capture_default_str();
  cmd->add_option("--ttft-ms", opts->options.ttft_ms, "time to first token")->capture_default_str();
  cmd->add_option("--token-delay-ms", opts->options.token_delay_ms, "delay between chunks")
      ->capture_default_str();
  cmd->add_option("--chunk-tokens", opts->options.chunk_tokens, "words per chunk")
      ->capture_default_str();
  cmd->add_option("--model", opts->options.model, "model id reported by GET /v1/models")
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "io threads")->capture_default_str();
  cmd->add_option("--random-faults", opts->random_faults,
                  "faults drawn at random for calls that have none, e.g. 429,500,reset,no-done");
  cmd->add_option("--random-fault-rate", opts->options.random_fault_rate,
                  "share of calls (0 to 1) that get one of --random-faults")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--random-fault-seed", opts->options.random_fault_seed,
                  "seed of the random faults (the same seed, the same faulty calls)")
      ->capture_default_str();
  cmd->footer("Per-request headers override the knobs: X-Mock-Tokens, X-Mock-TTFT-Ms,\n"
              "X-Mock-Token-Delay-Ms, X-Mock-Chunk-Tokens. Faults: X-Mock-Fault: 429[:S] | 500 |\n"
              "401 | reset[:N] | malformed[:N] | stall:MS[:N] | no-done | split[:BYTES], and\n"
              "X-Mock-Fault-Until: K to fail only the first K calls.");
  cmd->callback([&action, opts] { action = [opts] { return run_mock_llm(*opts); }; });
}

} // namespace troupe::app
