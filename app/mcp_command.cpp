// `troupe mcp`: an MCP client on the command line and troupe as an MCP server on stdio.
//   troupe mcp tools [--json] URL | -- COMMAND [ARGS…]
//   troupe mcp call [--json] URL TOOL [JSON] | TOOL [JSON] -- COMMAND [ARGS…]
//   troupe mcp client URL          (the client the official conformance suite drives;
//                                   scenario in MCP_CONFORMANCE_SCENARIO)
//   troupe mcp serve [--url URL] [--token T | --token-file F] [--config F] [--data-dir D]
// `serve` relays stdio to a node's /mcp: the running node at --url, or, without it, a
// node started in this process from the config (listening on 127.0.0.1 only, a free
// port), whose admin token it uses.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "troupe/actors/node.hpp"
#include "troupe/api/routes.hpp"
#include "troupe/net/mcp/command_line.hpp"
#include "troupe/net/mcp/stdio_bridge.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/runtime/settings.hpp"

namespace troupe::app {

namespace {

struct mcp_cli {
  std::vector<std::string> items;
  std::vector<std::string> headers;
  bool json = false;
  unsigned timeout_s = 60;
  // serve
  std::string url;
  std::string token;
  std::string token_file;
  std::string config_file;
  std::string data_dir;
};

bool is_url(std::string_view s) {
  return s.starts_with("http://") || s.starts_with("https://");
}

std::optional<net::mcp::server_target> target_of(const mcp_cli& cli,
                                                 std::vector<std::string> items) {
  net::mcp::server_target target;
  target.timeout = std::chrono::seconds(cli.timeout_s);
  for (const auto& h : cli.headers) {
    const auto colon = h.find(':');
    if (colon == std::string::npos) {
      fmt::print(stderr, "troupe mcp: --header must be 'Name: value', not '{}'\n", h);
      return std::nullopt;
    }
    auto value = h.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    target.headers.push_back({h.substr(0, colon), value});
  }
  if (items.empty()) {
    fmt::print(stderr, "troupe mcp: name the server: a URL, or -- and a command\n");
    return std::nullopt;
  }
  if (items.size() == 1 && is_url(items.front())) {
    target.url = items.front();
  } else {
    target.command = std::move(items);
  }
  return target;
}

int tools(const mcp_cli& cli) {
  auto target = target_of(cli, cli.items);
  if (!target) {
    return 2;
  }
  return net::mcp::list_tools_command(*target, cli.json, stdout, stderr);
}

int call(const mcp_cli& cli) {
  // URL TOOL [JSON], or TOOL [JSON] -- COMMAND…
  std::vector<std::string> items = cli.items;
  std::string tool;
  std::string arguments = "{}";
  std::vector<std::string> where;
  if (!items.empty() && is_url(items.front())) {
    if (items.size() < 2 || items.size() > 3) {
      fmt::print(stderr, "troupe mcp call: usage: troupe mcp call URL TOOL [JSON]\n");
      return 2;
    }
    where = {items[0]};
    tool = items[1];
    if (items.size() == 3) {
      arguments = items[2];
    }
  } else {
    if (items.size() < 2) {
      fmt::print(stderr, "troupe mcp call: usage: troupe mcp call TOOL [JSON] -- COMMAND…\n");
      return 2;
    }
    tool = items[0];
    std::size_t next = 1;
    if (items[1].starts_with("{")) {
      arguments = items[1];
      next = 2;
    }
    where.assign(items.begin() + static_cast<std::ptrdiff_t>(next), items.end());
  }
  auto target = target_of(cli, std::move(where));
  if (!target) {
    return 2;
  }
  return net::mcp::call_tool_command(*target, tool, arguments, cli.json, stdout, stderr);
}

int client(const mcp_cli& cli) {
  if (cli.items.empty() || !is_url(cli.items.back())) {
    fmt::print(stderr, "troupe mcp client: the server's URL is the last argument\n");
    return 2;
  }
  const char* scenario = std::getenv("MCP_CONFORMANCE_SCENARIO");
  return net::mcp::conformance_client_command(cli.items.back(), scenario ? scenario : "", stdout,
                                              stderr);
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  return token;
}

int serve(const mcp_cli& cli) {
  net::mcp::stdio_bridge_options bridge;
  bridge.token = cli.token;
  if (!cli.token_file.empty()) {
    bridge.token = read_token_file(cli.token_file);
  }
  if (bridge.token.empty()) {
    if (const char* t = std::getenv("TROUPE_TOKEN")) {
      bridge.token = t;
    }
  }
  if (!cli.url.empty()) {
    bridge.url = cli.url;
    if (bridge.token.empty()) {
      fmt::print(stderr, "troupe mcp serve: give the node's token (--token, --token-file or "
                         "TROUPE_TOKEN)\n");
      return 2;
    }
    return net::mcp::run_stdio_bridge(bridge);
  }
  // A node of its own, reachable from this process only.
  std::map<std::string, std::string> flags{{"listen", "127.0.0.1:0"}};
  if (!cli.data_dir.empty()) {
    flags["data_dir"] = cli.data_dir;
  }
  auto resolved = resolve_settings(command_line_sources(cli.config_file, flags));
  if (!resolved) {
    fmt::print(stderr, "troupe mcp serve: {}\n", resolved.error().message);
    return 2;
  }
  // stdout carries the protocol: every log line goes to stderr.
  log::configure(resolved->log_level, resolved->log_format, stderr);
  const auto data_dir = resolved->data_dir;
  actors::node node(std::move(*resolved), api::frontend());
  auto bound = node.start();
  if (!bound) {
    fmt::print(stderr, "troupe mcp serve: {}\n", bound.error().message);
    return 1;
  }
  if (bridge.token.empty()) {
    bridge.token = read_token_file((data_dir / "admin.token").string());
  }
  if (bridge.token.empty()) {
    fmt::print(stderr,
               "troupe mcp serve: {} holds no admin token; give one with --token, "
               "--token-file or TROUPE_TOKEN\n",
               data_dir.string());
    node.stop();
    node.wait();
    return 2;
  }
  bridge.url = fmt::format("http://{}/mcp", bound->to_string());
  log::info("troupe mcp serve: relaying stdio to {}", bridge.url);
  const int code = net::mcp::run_stdio_bridge(bridge);
  node.stop();
  node.wait();
  return code;
}

} // namespace

void add_mcp_command(CLI::App& cli, command_action& action) {
  auto options = std::make_shared<mcp_cli>();
  auto* mcp = cli.add_subcommand("mcp", "MCP: a client for MCP servers, and troupe as one");
  mcp->require_subcommand(1);
  const auto common = [options](CLI::App* cmd) {
    cmd->add_option("--header", options->headers,
                    "HTTP header sent to a URL server, 'Name: value' (repeatable)");
    cmd->add_option("--timeout", options->timeout_s, "each request's limit in seconds (60)");
    cmd->add_flag("--json", options->json, "print JSON (one object per line)");
  };
  auto* tools_cmd = mcp->add_subcommand("tools", "List a server's tools: URL | -- COMMAND…");
  common(tools_cmd);
  tools_cmd->add_option("server", options->items, "the server: a URL, or -- and a command line");
  // What follows `--` once the positional is filled comes as extras: the command.
  tools_cmd->allow_extras();
  tools_cmd->callback([&action, options, tools_cmd] {
    for (auto& extra : tools_cmd->remaining()) {
      options->items.push_back(std::move(extra));
    }
    action = [options] { return tools(*options); };
  });

  auto* call_cmd =
      mcp->add_subcommand("call", "Call one tool: URL TOOL [JSON] | TOOL [JSON] -- COMMAND…");
  common(call_cmd);
  call_cmd->add_option("arguments", options->items, "URL TOOL [JSON], or TOOL [JSON] -- COMMAND…");
  call_cmd->allow_extras();
  call_cmd->callback([&action, options, call_cmd] {
    for (auto& extra : call_cmd->remaining()) {
      options->items.push_back(std::move(extra));
    }
    action = [options] { return call(*options); };
  });

  auto* client_cmd =
      mcp->add_subcommand("client", "The client the MCP conformance suite drives (scenario in "
                                    "MCP_CONFORMANCE_SCENARIO; the server URL last)");
  client_cmd->add_option("arguments", options->items, "the server's URL (last)");
  client_cmd->allow_extras();
  client_cmd->callback([&action, options, client_cmd] {
    for (auto& extra : client_cmd->remaining()) {
      options->items.push_back(std::move(extra));
    }
    action = [options] { return client(*options); };
  });

  auto* serve_cmd = mcp->add_subcommand(
      "serve", "troupe as an MCP server on stdio (ask_<agent> tools): relays to the node at "
               "--url, or runs one in this process from --config");
  serve_cmd->add_option("--url", options->url, "the MCP endpoint of a running node (…/mcp)");
  serve_cmd->add_option("--token", options->token, "its API token (or env TROUPE_TOKEN)");
  serve_cmd->add_option("--token-file", options->token_file, "a file holding the token");
  serve_cmd->add_option("--config", options->config_file,
                        "without --url: the config of the node to run (env TROUPE_CONFIG)");
  serve_cmd->add_option("--data-dir", options->data_dir, "without --url: its data directory");
  serve_cmd->callback([&action, options] { action = [options] { return serve(*options); }; });
}

} // namespace troupe::app
