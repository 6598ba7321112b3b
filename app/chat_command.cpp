// `troupe chat`: one-shot terminal chat against a provider, streaming the answer to
// stdout as it arrives; with --agent, a full agent run (actors/agent_chat.hpp).

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "troupe/actors/agent_chat.hpp"
#include "troupe/net/provider_client.hpp"

namespace troupe::app {

namespace {

namespace asio = boost::asio;

struct chat_cli {
  std::string provider_url;
  std::string provider_type = "openai-compatible";
  std::string model;
  std::string api_key;
  std::string system;
  std::string message;
  std::optional<unsigned> max_tokens;
  std::optional<double> temperature;
  unsigned timeout_s = 600;
  bool no_stream = false;
  bool list_models = false;
  bool show_usage = false;
  /// Run this configured agent (with its tools) instead of a raw provider chat.
  std::string agent;
  std::string config_file;
};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// Writes each event as it arrives: answer text to stdout, the rest to stderr.
void print_event(const stream_event& e) {
  switch (e.type) {
    case stream_event::kind::text_delta:
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
      break;
    case stream_event::kind::reasoning_delta:
      std::fwrite(e.text.data(), 1, e.text.size(), stderr);
      break;
    case stream_event::kind::tool_call_complete:
      fmt::print(stderr, "\n[tool call {}] {}({})\n", e.id, e.name, e.text);
      break;
    default:
      break;
  }
}

asio::awaitable<int> chat(net::http_client& http, net::provider_config config, chat_cli cli) {
  net::provider_client client(http, std::move(config));
  if (cli.list_models) {
    auto models = co_await client.list_models();
    if (!models) {
      fmt::print(stderr, "troupe chat: {}: {}\n", to_string(models.error().kind),
                 models.error().message);
      co_return 1;
    }
    for (const auto& id : *models) {
      fmt::print("{}\n", id);
    }
    co_return 0;
  }
  completion_request request;
  request.model = cli.model;
  if (!cli.system.empty()) {
    request.messages.push_back({chat_role::system, cli.system, {}, "", ""});
  }
  request.messages.push_back({chat_role::user, cli.message, {}, "", ""});
  request.max_tokens = cli.max_tokens;
  request.temperature = cli.temperature;
  request.stream = !cli.no_stream;
  // A named sink: g++ 12 destroys non-trivial temporaries of a co_await expression twice.
  net::stream_event_sink sink = print_event;
  auto outcome = co_await client.complete(std::move(request), std::move(sink));
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (cli.show_usage && outcome.answer.usage) {
    const auto& u = *outcome.answer.usage;
    fmt::print(stderr, "[usage] prompt {} + completion {} = {} tokens\n", u.prompt_tokens,
               u.completion_tokens, u.total_tokens);
  }
  if (outcome.failure) {
    fmt::print(stderr, "troupe chat: {}: {}\n", to_string(outcome.failure->kind),
               outcome.failure->message);
    co_return 1;
  }
  co_return 0;
}

int run_agent(chat_cli cli) {
  setting_sources sources;
  sources.environment = environment_snapshot();
  sources.config_file = cli.config_file;
  if (sources.config_file.empty()) {
    if (auto it = sources.environment.find("TROUPE_CONFIG"); it != sources.environment.end()) {
      sources.config_file = it->second;
    }
  }
  auto resolved = resolve_settings(sources);
  if (!resolved) {
    fmt::print(stderr, "troupe chat: {}\n", resolved.error().message);
    return 2;
  }
  if (cli.message.empty() || cli.message == "-") {
    cli.message.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  if (cli.message.empty()) {
    fmt::print(stderr, "troupe chat: no message (give one, or pipe it on stdin)\n");
    return 2;
  }
  actors::agent_chat_options options;
  options.config = std::move(*resolved);
  options.agent = cli.agent;
  options.message = cli.message;
  return actors::run_agent_chat(std::move(options));
}

int run_chat(chat_cli cli) {
  if (!cli.agent.empty()) {
    return run_agent(std::move(cli));
  }
  auto type = net::parse_provider_type(cli.provider_type);
  if (!type) {
    fmt::print(stderr, "troupe chat: {}\n", type.error().message);
    return 2;
  }
  if (cli.provider_url.empty() && net::default_base_url(*type).empty()) {
    fmt::print(stderr, "troupe chat: --provider-url is required for {}\n", cli.provider_type);
    return 2;
  }
  if (!cli.list_models) {
    if (cli.model.empty()) {
      fmt::print(stderr, "troupe chat: --model is required\n");
      return 2;
    }
    if (cli.message.empty() || cli.message == "-") {
      cli.message.assign(std::istreambuf_iterator<char>(std::cin), {});
    }
    if (cli.message.empty()) {
      fmt::print(stderr, "troupe chat: no message (give one, or pipe it on stdin)\n");
      return 2;
    }
  }
  net::provider_config config;
  config.type = *type;
  config.base_url = cli.provider_url;
  config.api_key = cli.api_key;
  if (config.api_key.empty()) {
    config.api_key = env("TROUPE_API_KEY");
  }
  if (config.api_key.empty()) {
    config.api_key = env(net::wire_of(*type) == net::wire_format::anthropic ? "ANTHROPIC_API_KEY"
                                                                            : "OPENAI_API_KEY");
  }
  config.deadlines.total = std::chrono::seconds(cli.timeout_s);
  asio::io_context io;
  net::http_client http(io.get_executor());
  int code = 1;
  asio::co_spawn(io, chat(http, std::move(config), std::move(cli)),
                 [&](std::exception_ptr e, int result) {
                   code = e ? 1 : result;
                   io.stop();
                 });
  io.run();
  return code;
}

} // namespace

void add_chat_command(CLI::App& cli, command_action& action) {
  auto opts = std::make_shared<chat_cli>();
  auto* cmd = cli.add_subcommand("chat", "One-shot chat with a model provider, streamed to stdout");
  cmd->add_option("message", opts->message, "the message (default: read stdin)");
  cmd->add_option("--provider-url", opts->provider_url,
                  "base URL up to /v1, e.g. http://127.0.0.1:8081/v1 (default: the type's)");
  cmd->add_option("--provider-type", opts->provider_type,
                  "openai | openai-compatible | openrouter | qwen | kimi | claude")
      ->capture_default_str();
  cmd->add_option("--model", opts->model, "model id");
  cmd->add_option("--api-key", opts->api_key,
                  "API key (default: env TROUPE_API_KEY, then OPENAI_API_KEY or "
                  "ANTHROPIC_API_KEY)");
  cmd->add_option("--system", opts->system, "system prompt");
  cmd->add_option("--max-tokens", opts->max_tokens, "answer token limit");
  cmd->add_option("--temperature", opts->temperature, "sampling temperature");
  cmd->add_option("--timeout", opts->timeout_s, "total deadline in seconds")->capture_default_str();
  cmd->add_flag("--no-stream", opts->no_stream, "wait for the whole answer instead of streaming");
  cmd->add_flag("--list-models", opts->list_models, "list the provider's models and exit");
  cmd->add_flag("--usage", opts->show_usage, "print token usage to stderr");
  cmd->add_option("--agent", opts->agent,
                  "run this [[agents]] entry with its tools (answer to stdout, steps to stderr)");
  cmd->add_option("--config", opts->config_file,
                  "TOML config file with [[providers]] and [[agents]] (env TROUPE_CONFIG)");
  cmd->callback([&action, opts] { action = [opts] { return run_chat(*opts); }; });
}

} // namespace troupe::app
