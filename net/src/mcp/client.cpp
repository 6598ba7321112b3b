#include "troupe/net/mcp/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::mcp {

namespace {

using std::chrono::steady_clock;

// Pages of tools/list read at most (a server that never ends its cursor chain).
constexpr int max_tool_pages = 1000;
// How long past a request's latest end its HTTP transfer may run (the client's timer ends
// it first).
constexpr auto transport_grace = std::chrono::seconds(2);

std::string_view text_field(simdjson::dom::element e, std::string_view key) {
  std::string_view s;
  if (e[key].get_string().get(s) != simdjson::SUCCESS) {
    return {};
  }
  return s;
}

errc code_of(std::int64_t jsonrpc_error) {
  switch (jsonrpc_error) {
    case jsonrpc_code::method_not_found:
      return errc::not_found;
    case jsonrpc_code::invalid_params:
    case jsonrpc_code::invalid_request:
      return errc::invalid_argument;
    default:
      return errc::unavailable;
  }
}

} // namespace

struct client::pending {
  explicit pending(asio::any_io_executor executor) : timer(std::move(executor)) {}
  asio::steady_timer timer;
  std::string method;
  std::optional<expected<std::string>> outcome;
  progress_callback on_progress;
  std::chrono::milliseconds timeout{0};
  steady_clock::time_point deadline;
  steady_clock::time_point hard_deadline;
};

std::shared_ptr<client> client::make(asio::any_io_executor executor,
                                     std::shared_ptr<transport> transport, client_options options) {
  return std::make_shared<client>(std::move(executor), std::move(transport), std::move(options));
}

client::client(asio::any_io_executor executor, std::shared_ptr<transport> transport,
               client_options options)
    : executor_(std::move(executor)), transport_(std::move(transport)),
      options_(std::move(options)), log_(log::context{{"mcp_server", options_.name}}) {
  options_.identity.elicitation = options_.elicitation != elicitation_policy::decline;
}

asio::awaitable<expected<server_identity>> client::connect() {
  auto self = shared_from_this();
  // Awaitables are named, never temporaries of a co_await full-expression: GCC 12
  // destroys some of those twice (here and below).
  auto starting = transport_->start(weak_from_this());
  auto started = co_await std::move(starting);
  if (!started) {
    co_return tl::unexpected(started.error());
  }
  open_ = true;
  auto initializing = initialize();
  auto ready = co_await std::move(initializing);
  if (!ready) {
    // A server that does not complete the handshake is not kept running.
    auto closing = close();
    co_await std::move(closing);
    co_return tl::unexpected(ready.error());
  }
  co_return server_;
}

asio::awaitable<expected<void>> client::initialize() {
  auto params = write_initialize_params(options_.identity);
  auto requesting = request(
      "initialize", [params](const std::string&) { return params; }, options_.request_timeout, {},
      {}, false);
  auto result = co_await std::move(requesting);
  if (!result) {
    co_return tl::unexpected(result.error());
  }
  auto identity = parse_initialize_result(*result);
  if (!identity) {
    co_return fail(identity.error().code,
                   fmt::format("MCP server '{}': {}", options_.name, identity.error().message));
  }
  server_ = std::move(*identity);
  transport_->set_protocol_version(server_.protocol_version);
  auto sending = transport_->send(write_notification("notifications/initialized"), {},
                                  steady_clock::now() + options_.request_timeout);
  auto sent = co_await std::move(sending);
  if (!sent) {
    co_return tl::unexpected(sent.error());
  }
  log_.info("MCP server '{}' ({} {}) speaks protocol {} over {}", options_.name, server_.name,
            server_.version, server_.protocol_version, transport_->describe());
  // The server's own stream carries its notifications between requests, and the requests
  // it makes outside a call's answer (an SDK server's elicitation/create goes there
  // unless tied to a request): it is opened when either can come.
  if (options_.open_event_stream &&
      (server_.tools_list_changed || options_.elicitation != elicitation_policy::decline)) {
    transport_->open_event_stream();
  }
  co_return expected<void>{};
}

asio::awaitable<expected<void>> client::renew_session() {
  using namespace asio::experimental::awaitable_operators;
  if (renewing_) {
    // Another request is renewing it: wait for that.
    auto event = renewing_;
    asio::steady_timer limit(executor_, options_.request_timeout);
    co_await (event->async_wait(asio::as_tuple(asio::use_awaitable)) ||
              limit.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (renewing_ == event) {
      co_return fail(
          errc::timeout,
          fmt::format("MCP server '{}': a new session was not ready in time", options_.name));
    }
    if (renew_failure_) {
      co_return tl::unexpected(*renew_failure_);
    }
    co_return expected<void>{};
  }
  log_.info("MCP server '{}' forgot the session: starting a new one", options_.name);
  auto event = std::make_shared<asio::steady_timer>(executor_, steady_clock::time_point::max());
  renewing_ = event;
  renew_failure_.reset();
  transport_->reset_session();
  auto initializing = initialize();
  auto done = co_await std::move(initializing);
  if (!done) {
    renew_failure_ = done.error();
  }
  renewing_.reset();
  event->cancel();
  if (done && options_.on_tools_changed) {
    options_.on_tools_changed();
  }
  co_return done;
}

asio::awaitable<expected<std::string>> client::request(std::string method, params_writer params,
                                                       std::chrono::milliseconds timeout,
                                                       std::chrono::milliseconds hard_limit,
                                                       progress_callback on_progress,
                                                       bool may_renew) {
  // Cancellation is read by hand below: the call must still clean up after it.
  co_await asio::this_coro::throw_if_cancelled(false);
  auto self = shared_from_this();
  if (!open_) {
    co_return fail(errc::unavailable,
                   fmt::format("MCP server '{}' is not connected", options_.name));
  }
  const auto id = id_json(next_id_++);
  auto p = std::make_shared<pending>(executor_);
  p->method = method;
  p->on_progress = std::move(on_progress);
  p->timeout = timeout;
  const auto start = steady_clock::now();
  p->deadline = start + timeout;
  p->hard_deadline = start + std::max(hard_limit, timeout);
  pending_[id] = p;
  // The transport's own deadline is a backstop past the latest the call may last (its
  // hard limit, which progress may reach): the timer below decides when it ends, so that
  // it is a timeout and the server is told.
  auto sending = transport_->send(write_request(id, method, params(id)), id,
                                  p->hard_deadline + transport_grace);
  auto sent = co_await std::move(sending);
  if (!sent) {
    pending_.erase(id);
    if ((co_await asio::this_coro::cancellation_state).cancelled() !=
        asio::cancellation_type::none) {
      // Cancelled while the request was being sent: the server may have it already.
      if (method != "initialize" && open_) {
        json_writer w;
        w.begin_object().key("requestId").raw(id);
        w.key("reason").value("the caller cancelled the request").end_object();
        send_detached(write_notification("notifications/cancelled", std::move(w).str()));
      }
      co_return fail(errc::cancelled,
                     fmt::format("MCP server '{}': {} was cancelled", options_.name, method));
    }
    if (sent.error().code == errc::not_found && may_renew) {
      auto renewing = renew_session();
      auto renewed = co_await std::move(renewing);
      if (!renewed) {
        co_return tl::unexpected(renewed.error());
      }
      auto again = request(std::move(method), std::move(params), timeout, hard_limit,
                           std::move(p->on_progress), false);
      co_return co_await std::move(again);
    }
    co_return tl::unexpected(sent.error());
  }
  while (!p->outcome) {
    p->timer.expires_at(p->deadline);
    co_await p->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (p->outcome) {
      break;
    }
    const auto cancelled =
        (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
    const bool expired = steady_clock::now() >= p->deadline;
    if (!cancelled && !expired) {
      continue; // progress moved the deadline
    }
    pending_.erase(id);
    transport_->abandon(id);
    const auto reason = cancelled ? std::string("the caller cancelled the request")
                                  : fmt::format("no answer within {} ms", timeout.count());
    if (method != "initialize" && open_) {
      json_writer w;
      w.begin_object().key("requestId").raw(id).key("reason").value(reason).end_object();
      send_detached(write_notification("notifications/cancelled", std::move(w).str()));
    }
    if (cancelled) {
      co_return fail(errc::cancelled,
                     fmt::format("MCP server '{}': {} was cancelled", options_.name, method));
    }
    co_return fail(errc::timeout, fmt::format("MCP server '{}' did not answer {} within {} ms",
                                              options_.name, method, timeout.count()));
  }
  pending_.erase(id);
  co_return std::move(*p->outcome);
}

asio::awaitable<expected<std::vector<tool_info>>> client::list_tools() {
  auto self = shared_from_this();
  std::vector<tool_info> tools;
  std::string cursor;
  for (int page = 0; page < max_tool_pages; ++page) {
    auto params = write_list_tools_params(cursor);
    auto requesting = request(
        "tools/list", [params](const std::string&) { return params; }, options_.request_timeout, {},
        {}, true);
    auto result = co_await std::move(requesting);
    if (!result) {
      co_return tl::unexpected(result.error());
    }
    auto parsed = parse_tools_list_result(*result);
    if (!parsed) {
      co_return fail(parsed.error().code,
                     fmt::format("MCP server '{}': {}", options_.name, parsed.error().message));
    }
    for (auto& t : parsed->tools) {
      tools.push_back(std::move(t));
    }
    if (parsed->next_cursor.empty()) {
      co_return tools;
    }
    if (parsed->next_cursor == cursor) {
      co_return fail(
          errc::invalid_argument,
          fmt::format("MCP server '{}': tools/list gave the same cursor twice", options_.name));
    }
    cursor = std::move(parsed->next_cursor);
  }
  co_return fail(errc::limit_exceeded, fmt::format("MCP server '{}': tools/list has over {} pages",
                                                   options_.name, max_tool_pages));
}

asio::awaitable<expected<call_outcome>>
client::call_tool(std::string name, std::string arguments_json, std::chrono::milliseconds timeout,
                  std::chrono::milliseconds hard_limit, progress_callback on_progress) {
  auto self = shared_from_this();
  // The request's own id is its progress token: unique while it runs.
  auto params = [name, arguments_json](const std::string& id) {
    return write_call_tool_params(name, arguments_json, id);
  };
  auto requesting =
      request("tools/call", std::move(params), timeout, hard_limit, std::move(on_progress), true);
  auto result = co_await std::move(requesting);
  if (!result) {
    co_return tl::unexpected(result.error());
  }
  auto outcome = parse_call_result(*result);
  if (!outcome) {
    co_return fail(outcome.error().code,
                   fmt::format("MCP server '{}': {}", options_.name, outcome.error().message));
  }
  co_return std::move(*outcome);
}

asio::awaitable<expected<void>> client::ping() {
  auto self = shared_from_this();
  auto requesting = request(
      "ping", [](const std::string&) { return std::string("{}"); }, options_.request_timeout, {},
      {}, true);
  auto result = co_await std::move(requesting);
  if (!result) {
    co_return tl::unexpected(result.error());
  }
  co_return expected<void>{};
}

asio::awaitable<void> client::close() {
  auto self = shared_from_this();
  if (closing_) {
    co_return;
  }
  closing_ = true;
  open_ = false;
  fail_all(
      error{errc::cancelled, fmt::format("the client of MCP server '{}' closed", options_.name)});
  auto closing = transport_->close();
  co_await std::move(closing);
}

void client::on_message(jsonrpc_message message) {
  switch (message.kind) {
    case message_kind::response:
    case message_kind::error_response: {
      const auto it = pending_.find(message.id);
      if (it == pending_.end()) {
        log_.debug("MCP server '{}' answered request {}, which nobody waits for", options_.name,
                   message.id);
        return;
      }
      auto& p = *it->second;
      if (message.kind == message_kind::response) {
        p.outcome = std::move(message.result);
      } else {
        p.outcome =
            fail(code_of(message.error_code),
                 fmt::format("MCP server '{}': {} failed: {} (JSON-RPC error {})", options_.name,
                             p.method, message.error_message, message.error_code));
      }
      p.timer.cancel();
      return;
    }
    case message_kind::request:
      answer(message);
      return;
    case message_kind::notification:
      break;
  }
  if (message.method == "notifications/progress") {
    simdjson::dom::parser parser;
    const simdjson::padded_string padded(message.params);
    simdjson::dom::element params;
    simdjson::dom::element token;
    if (parser.parse(padded).get(params) != simdjson::SUCCESS ||
        params["progressToken"].get(token) != simdjson::SUCCESS) {
      return;
    }
    const auto it = pending_.find(simdjson::minify(token));
    if (it == pending_.end()) {
      return;
    }
    auto& p = *it->second;
    progress_update update;
    double value = 0;
    if (params["progress"].get_double().get(value) == simdjson::SUCCESS) {
      update.progress = value;
    }
    if (params["total"].get_double().get(value) == simdjson::SUCCESS) {
      update.total = value;
    }
    update.message = std::string(text_field(params, "message"));
    // Progress shows the call is alive: its deadline starts again, up to the hard limit.
    const auto moved = std::min(steady_clock::now() + p.timeout, p.hard_deadline);
    if (moved > p.deadline) {
      p.deadline = moved;
      p.timer.cancel();
    }
    if (p.on_progress) {
      p.on_progress(update);
    }
    return;
  }
  if (message.method == "notifications/tools/list_changed") {
    if (options_.on_tools_changed) {
      options_.on_tools_changed();
    }
    return;
  }
  if (message.method == "notifications/message") {
    log_.info("MCP server '{}' log: {}", options_.name, message.params.substr(0, 2000));
  }
  // Other notifications (resources, prompts, cancellation of its own requests) do not
  // concern a client that only calls tools.
}

void client::answer(const jsonrpc_message& request) {
  if (request.method == "ping") {
    send_detached(write_result(request.id, "{}"));
    return;
  }
  if (request.method == "elicitation/create") {
    const auto result = answer_elicitation(request.params, options_.elicitation);
    log_.info("MCP server '{}' asked for input (elicitation); answered {}", options_.name, result);
    send_detached(write_result(request.id, result));
    return;
  }
  send_detached(write_error(request.id, jsonrpc_code::method_not_found,
                            fmt::format("troupe's MCP client does not serve {}", request.method)));
}

void client::send_detached(std::string message) {
  auto self = shared_from_this();
  asio::co_spawn(
      executor_,
      [](std::shared_ptr<client> c, std::string m) -> asio::awaitable<void> {
        auto sending = c->transport_->send(std::move(m), {},
                                           steady_clock::now() + c->options_.request_timeout);
        auto sent = co_await std::move(sending);
        if (!sent) {
          c->log_.debug("MCP server '{}': sending a message failed: {}", c->options_.name,
                        sent.error().message);
        }
      }(self, std::move(message)),
      asio::detached);
}

void client::on_request_lost(const std::string& id_json, error why) {
  const auto it = pending_.find(id_json);
  if (it == pending_.end()) {
    return;
  }
  it->second->outcome = tl::unexpected(std::move(why));
  it->second->timer.cancel();
}

void client::on_closed(error why) {
  open_ = false;
  fail_all(why);
  if (!closing_ && !closed_reported_) {
    closed_reported_ = true;
    if (options_.on_closed) {
      options_.on_closed(why);
    }
  }
}

void client::fail_all(const error& why) {
  for (auto& [id, p] : pending_) {
    if (!p->outcome) {
      p->outcome = tl::unexpected(why);
      p->timer.cancel();
    }
  }
}

} // namespace troupe::net::mcp
