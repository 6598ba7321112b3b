#include "troupe/net/mcp/command_line.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "troupe/net/http_client.hpp"
#include "troupe/net/mcp/client.hpp"
#include "troupe/net/mcp/http_transport.hpp"
#include "troupe/net/mcp/stdio_transport.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/version.hpp"

namespace troupe::net::mcp {

namespace {

/// What a one-shot session does once connected; prints and returns the exit code. The
/// bodies below are lambdas with captures that are coroutines: safe here because the
/// closure is held by run_session's frame (its `body` parameter) until it is done.
using session_body = std::function<asio::awaitable<int>(std::shared_ptr<client>)>;

asio::awaitable<int> run_session(std::shared_ptr<client> c, session_body body, std::FILE* err) {
  // Awaitables are named: GCC 12 destroys some temporaries of a co_await twice.
  auto connecting = c->connect();
  auto connected = co_await std::move(connecting);
  if (!connected) {
    fmt::print(err, "troupe mcp: {}\n", connected.error().message);
    co_return 1;
  }
  auto running = body(c);
  const int code = co_await std::move(running);
  auto closing = c->close();
  co_await std::move(closing);
  co_return code;
}

int with_session(const server_target& target, elicitation_policy elicitation, session_body body,
                 std::FILE* err) {
  asio::io_context io;
  auto http = std::make_unique<http_client>(io.get_executor());
  std::shared_ptr<transport> transport;
  const std::string name = target.url.empty() ? "stdio" : "http";
  if (!target.url.empty()) {
    http_options options;
    options.name = name;
    options.url = target.url;
    options.headers = target.headers;
    transport = make_http_transport(*http, std::move(options));
  } else {
    stdio_options options;
    options.name = name;
    options.argv = target.command;
    options.env = target.env;
    transport = make_stdio_transport(io.get_executor(), std::move(options));
  }
  client_options options;
  options.name = name;
  options.identity.name = "troupe";
  options.identity.version = std::string(troupe::version());
  options.elicitation = elicitation;
  options.request_timeout = target.timeout;
  auto c = client::make(io.get_executor(), std::move(transport), std::move(options));
  int code = 1;
  asio::co_spawn(io, run_session(c, std::move(body), err),
                 [&code](std::exception_ptr e, int r) { code = e ? 1 : r; });
  io.run();
  c.reset();
  http.reset();
  return code;
}

void print_tool(std::FILE* out, const tool_info& t, bool json) {
  if (json) {
    json_writer w;
    w.begin_object().key("name").value(t.name);
    if (!t.title.empty()) {
      w.key("title").value(t.title);
    }
    w.key("description").value(t.description).key("inputSchema").raw(t.input_schema);
    w.key("readOnly").value(t.read_only).end_object();
    fmt::print(out, "{}\n", w.str());
    return;
  }
  fmt::print(out, "{}\n", t.name);
  if (!t.description.empty()) {
    fmt::print(out, "    {}\n", t.description);
  }
  fmt::print(out, "    input: {}\n", t.input_schema);
}

} // namespace

int list_tools_command(const server_target& target, bool json, std::FILE* out, std::FILE* err) {
  return with_session(
      target, elicitation_policy::decline,
      [json, out, err](std::shared_ptr<client> c) -> asio::awaitable<int> {
        auto listing = c->list_tools();
        auto tools = co_await std::move(listing);
        if (!tools) {
          fmt::print(err, "troupe mcp: {}\n", tools.error().message);
          co_return 1;
        }
        for (const auto& t : *tools) {
          print_tool(out, t, json);
        }
        co_return 0;
      },
      err);
}

int call_tool_command(const server_target& target, const std::string& tool,
                      const std::string& arguments_json, bool json, std::FILE* out,
                      std::FILE* err) {
  const auto timeout = target.timeout;
  return with_session(
      target, elicitation_policy::decline,
      [tool, arguments_json, json, timeout, out,
       err](std::shared_ptr<client> c) -> asio::awaitable<int> {
        progress_callback on_progress = [err](const progress_update& u) {
          fmt::print(err, "progress {}{}{}\n", u.progress,
                     u.total ? fmt::format("/{}", *u.total) : "",
                     u.message.empty() ? "" : " " + u.message);
        };
        auto calling = c->call_tool(tool, arguments_json, timeout, {}, std::move(on_progress));
        auto result = co_await std::move(calling);
        if (!result) {
          fmt::print(err, "troupe mcp: {}\n", result.error().message);
          co_return 1;
        }
        if (json) {
          json_writer w;
          w.begin_object().key("isError").value(result->is_error).key("text").value(result->text);
          if (!result->structured.empty()) {
            w.key("structuredContent").raw(result->structured);
          }
          w.end_object();
          fmt::print(out, "{}\n", w.str());
        } else {
          fmt::print(out, "{}\n", result->text);
        }
        co_return result->is_error ? 1 : 0;
      },
      err);
}

int conformance_client_command(const std::string& url, const std::string& scenario, std::FILE* out,
                               std::FILE* err) {
  server_target target;
  target.url = url;
  target.timeout = std::chrono::seconds(20);
  fmt::print(out, "scenario: {}\nserver: {}\n", scenario.empty() ? "(none)" : scenario, url);
  return with_session(
      target, elicitation_policy::accept_defaults,
      [out, err](std::shared_ptr<client> c) -> asio::awaitable<int> {
        fmt::print(out, "connected: {} {} (protocol {})\n", c->server().name, c->server().version,
                   c->server().protocol_version);
        auto listing = c->list_tools();
        auto tools = co_await std::move(listing);
        if (!tools) {
          fmt::print(err, "troupe mcp: {}\n", tools.error().message);
          co_return 1;
        }
        fmt::print(out, "tools: {}\n", tools->size());
        int code = 0;
        for (const auto& t : *tools) {
          const auto arguments = example_arguments(t.input_schema);
          fmt::print(out, "call {} {}\n", t.name, arguments);
          auto calling = c->call_tool(t.name, arguments, std::chrono::seconds(20));
          auto result = co_await std::move(calling);
          if (!result) {
            fmt::print(err, "troupe mcp: {}\n", result.error().message);
            code = 1;
            continue;
          }
          fmt::print(out, "  -> {}{}\n", result->is_error ? "(error) " : "", result->text);
        }
        co_return code;
      },
      err);
}

} // namespace troupe::net::mcp
