#include "support/fake_mcp_server.hpp"

#include <condition_variable>
#include <tuple>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/net/mcp/jsonrpc.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

namespace mcp = net::mcp;
using net::http_response;
using net::request_context;

struct fake_mcp_server::state {
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::vector<mcp_request_record> requests;
  // Session id -> agreed version.
  std::map<std::string, std::string> sessions;
  int next_session = 1;
  std::string forced_version;
  std::chrono::milliseconds cut_retry{200};
  std::chrono::steady_clock::time_point cut_closed;
  // The answer of a "cut" call, served on the GET that resumes it.
  std::string cut_answer;
  // Notifications answered 200 with a JSON body instead of 202.
  bool notification_body = false;
  // The streams of "hang" calls, kept open (a stream whose last handle goes is ended).
  std::vector<net::response_stream> hanging;

  void record(mcp_request_record r) {
    {
      const std::lock_guard lock(mutex);
      requests.push_back(std::move(r));
    }
    changed.notify_all();
  }
};

namespace {

using state_ptr = std::shared_ptr<fake_mcp_server::state>;

std::string sse_event(std::string_view data, std::string_view id = {}) {
  std::string out;
  if (!id.empty()) {
    out += fmt::format("id: {}\n", id);
  }
  return out + fmt::format("event: message\ndata: {}\n\n", data);
}

http_response rpc_error(unsigned status, std::string_view id, int code, std::string_view text) {
  return http_response::json(status, mcp::write_error(id, code, text));
}

std::string text_result(std::string_view words) {
  json_writer w;
  w.begin_object().key("content").begin_array().begin_object();
  w.key("type").value("text").key("text").value(words).end_object().end_array().end_object();
  return std::move(w).str();
}

std::string tools_page(std::string_view cursor) {
  static const std::vector<std::string> names = {"echo", "progress", "cut", "cut_no_id", "hang"};
  std::size_t start = 0;
  if (cursor.starts_with("page-")) {
    start = static_cast<std::size_t>(std::stoul(std::string(cursor.substr(5))));
  }
  json_writer w;
  w.begin_object().key("tools").begin_array();
  for (std::size_t k = start; k < names.size() && k < start + 2; ++k) {
    w.begin_object().key("name").value(names[k]).key("description").value("fake " + names[k]);
    w.key("inputSchema").raw(R"({"type":"object","properties":{"message":{"type":"string"}}})");
    w.end_object();
  }
  w.end_array();
  if (start + 2 < names.size()) {
    w.key("nextCursor").value(fmt::format("page-{}", start + 2));
  }
  w.end_object();
  return std::move(w).str();
}

asio::awaitable<http_response> handle_post(state_ptr st, request_context& ctx) {
  const auto& request = ctx.request();
  mcp_request_record record;
  record.method = request.method;
  record.body = request.body;
  record.headers = request.headers;
  record.at = std::chrono::steady_clock::now();
  auto parsed = mcp::parse_jsonrpc(request.body);
  if (parsed && parsed->size() == 1) {
    record.rpc_method = parsed->front().method;
  }
  st->record(record);
  if (!parsed || parsed->size() != 1) {
    co_return rpc_error(400, {}, mcp::jsonrpc_code::parse_error, "Parse error");
  }
  const auto message = parsed->front();
  const auto accept = request.header("Accept");
  if (accept.find("application/json") == std::string_view::npos ||
      accept.find("text/event-stream") == std::string_view::npos) {
    co_return rpc_error(406, message.id, -32000,
                        "Not Acceptable: Client must accept both application/json and "
                        "text/event-stream");
  }
  const std::string session(request.header("Mcp-Session-Id"));
  if (message.method == "initialize") {
    std::string version;
    {
      simdjson::dom::parser p;
      const simdjson::padded_string padded(message.params);
      std::string_view asked;
      simdjson::dom::element root;
      if (p.parse(padded).get(root) == simdjson::SUCCESS &&
          root["protocolVersion"].get_string().get(asked) == simdjson::SUCCESS) {
        version = std::string(asked);
      }
    }
    std::string id;
    {
      const std::lock_guard lock(st->mutex);
      if (!st->forced_version.empty()) {
        version = st->forced_version;
      }
      id = fmt::format("session-{}", st->next_session++);
      st->sessions[id] = version;
    }
    json_writer w;
    w.begin_object().key("protocolVersion").value(version);
    w.key("capabilities").raw(R"({"tools":{}})");
    w.key("serverInfo").raw(R"({"name":"fake-http","version":"2.0.0"})").end_object();
    auto answer = http_response::json(200, mcp::write_result(message.id, std::move(w).str()));
    answer.headers.push_back({"Mcp-Session-Id", id});
    co_return answer;
  }
  std::string agreed;
  {
    const std::lock_guard lock(st->mutex);
    if (session.empty()) {
      co_return rpc_error(400, message.id, -32000,
                          "Bad Request: Mcp-Session-Id header is required");
    }
    const auto it = st->sessions.find(session);
    if (it == st->sessions.end()) {
      co_return rpc_error(404, message.id, -32001, "Session not found");
    }
    agreed = it->second;
  }
  if (request.header("MCP-Protocol-Version") != agreed) {
    co_return rpc_error(400, message.id, -32000,
                        fmt::format("Bad Request: MCP-Protocol-Version must be {}", agreed));
  }
  if (!message.is_request()) {
    const std::lock_guard lock(st->mutex);
    if (st->notification_body) {
      // As the conformance suite's initialize scenario answers: no id, an empty result.
      co_return http_response::json(200, R"({"jsonrpc":"2.0","result":{}})");
    }
    co_return http_response{202, "", {}, ""};
  }
  if (message.method == "tools/list") {
    simdjson::dom::parser p;
    const simdjson::padded_string padded(message.params.empty() ? "{}" : message.params);
    simdjson::dom::element root;
    std::string_view cursor;
    if (p.parse(padded).get(root) == simdjson::SUCCESS) {
      std::ignore = root["cursor"].get_string().get(cursor);
    }
    co_return http_response::json(200, mcp::write_result(message.id, tools_page(cursor)));
  }
  if (message.method == "ping") {
    co_return http_response::json(200, mcp::write_result(message.id, "{}"));
  }
  if (message.method != "tools/call") {
    co_return rpc_error(200, message.id, mcp::jsonrpc_code::method_not_found, "Method not found");
  }
  simdjson::dom::parser p;
  const simdjson::padded_string padded(message.params);
  simdjson::dom::element params;
  std::string_view tool;
  std::string_view text;
  simdjson::dom::element token;
  if (p.parse(padded).get(params) != simdjson::SUCCESS ||
      params["name"].get_string().get(tool) != simdjson::SUCCESS) {
    co_return rpc_error(200, message.id, mcp::jsonrpc_code::invalid_params, "name is required");
  }
  std::ignore = params["arguments"]["message"].get_string().get(text);
  const bool has_token = params["_meta"]["progressToken"].get(token) == simdjson::SUCCESS;
  const std::vector<net::http_header> headers = {{"Mcp-Session-Id", session}};
  if (tool == "echo") {
    co_return http_response::json(
        200, mcp::write_result(message.id, text_result(fmt::format("Echo: {}", text))));
  }
  if (tool == "progress") {
    auto stream = ctx.begin_stream(200, "text/event-stream", headers);
    for (int step = 1; has_token && step <= 3; ++step) {
      json_writer w;
      w.begin_object().key("progressToken").raw(simdjson::minify(token));
      w.key("progress").value(step).key("total").value(3).end_object();
      stream.try_write(
          sse_event(mcp::write_notification("notifications/progress", std::move(w).str())));
    }
    stream.try_write(sse_event(mcp::write_result(message.id, text_result("progressed"))));
    stream.finish();
    co_return http_response{};
  }
  if (tool == "cut") {
    std::chrono::milliseconds retry;
    {
      const std::lock_guard lock(st->mutex);
      retry = st->cut_retry;
      st->cut_answer = mcp::write_result(message.id, text_result("resumed answer"));
    }
    auto stream = ctx.begin_stream(200, "text/event-stream", headers);
    stream.try_write(fmt::format("id: cut-1\nretry: {}\ndata: \n\n", retry.count()));
    {
      const std::lock_guard lock(st->mutex);
      st->cut_closed = std::chrono::steady_clock::now();
    }
    stream.finish();
    co_return http_response{};
  }
  if (tool == "cut_no_id") {
    auto stream = ctx.begin_stream(200, "text/event-stream", headers);
    stream.try_write(": nothing to see\n\n");
    stream.finish();
    co_return http_response{};
  }
  if (tool == "hang") {
    auto stream = ctx.begin_stream(200, "text/event-stream", headers);
    stream.try_write(": working\n\n");
    const std::lock_guard lock(st->mutex);
    st->hanging.push_back(std::move(stream)); // never finished: the client gives up
    co_return http_response{};
  }
  co_return rpc_error(200, message.id, mcp::jsonrpc_code::invalid_params, "Unknown tool");
}

asio::awaitable<http_response> handle_get(state_ptr st, request_context& ctx) {
  const auto& request = ctx.request();
  mcp_request_record record;
  record.method = request.method;
  record.rpc_method = "GET";
  record.headers = request.headers;
  record.at = std::chrono::steady_clock::now();
  st->record(record);
  const auto last = request.header("Last-Event-ID");
  std::string answer;
  {
    const std::lock_guard lock(st->mutex);
    if (last != "cut-1" || st->cut_answer.empty()) {
      co_return http_response::text(405, "Method Not Allowed");
    }
    answer = std::move(st->cut_answer);
    st->cut_answer.clear();
  }
  auto stream =
      ctx.begin_stream(200, "text/event-stream",
                       {{"Mcp-Session-Id", std::string(request.header("Mcp-Session-Id"))}});
  stream.try_write(sse_event(answer, "cut-2"));
  stream.finish();
  co_return http_response{};
}

asio::awaitable<http_response> handle_delete(state_ptr st, request_context& ctx) {
  mcp_request_record record;
  record.method = ctx.request().method;
  record.rpc_method = "DELETE";
  record.headers = ctx.request().headers;
  record.at = std::chrono::steady_clock::now();
  st->record(record);
  {
    const std::lock_guard lock(st->mutex);
    st->sessions.erase(std::string(ctx.request().header("Mcp-Session-Id")));
  }
  co_return http_response::text(200, "");
}

} // namespace

std::string_view mcp_request_record::header(std::string_view name) const noexcept {
  for (const auto& h : headers) {
    if (net::iequals(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

fake_mcp_server::fake_mcp_server() : state_(std::make_shared<state>()) {
  net::router routes;
  auto st = state_;
  routes.add(net::http_method::post, "/mcp",
             [st](request_context& ctx) { return handle_post(st, ctx); });
  routes.add(net::http_method::get, "/mcp",
             [st](request_context& ctx) { return handle_get(st, ctx); });
  routes.add(net::http_method::del, "/mcp",
             [st](request_context& ctx) { return handle_delete(st, ctx); });
  server_ = std::make_unique<loopback_server>(std::move(routes), "fake-mcp");
}

fake_mcp_server::~fake_mcp_server() {
  std::vector<net::response_stream> hanging;
  {
    const std::lock_guard lock(state_->mutex);
    hanging.swap(state_->hanging);
  }
  for (const auto& stream : hanging) {
    stream.finish();
  }
}

std::string fake_mcp_server::url() const {
  return server_->origin() + "/mcp";
}

std::vector<mcp_request_record> fake_mcp_server::requests() const {
  const std::lock_guard lock(state_->mutex);
  return state_->requests;
}

std::vector<mcp_request_record> fake_mcp_server::requests_of(std::string_view what) const {
  const std::lock_guard lock(state_->mutex);
  std::vector<mcp_request_record> out;
  for (const auto& r : state_->requests) {
    if (r.rpc_method == what) {
      out.push_back(r);
    }
  }
  return out;
}

bool fake_mcp_server::wait_for(std::string_view what, std::size_t n,
                               std::chrono::milliseconds deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->changed.wait_for(lock, deadline, [&] {
    std::size_t seen = 0;
    for (const auto& r : state_->requests) {
      seen += r.rpc_method == what ? 1 : 0;
    }
    return seen >= n;
  });
}

void fake_mcp_server::forget_sessions() {
  const std::lock_guard lock(state_->mutex);
  state_->sessions.clear();
}

void fake_mcp_server::set_answer_version(std::string version) {
  const std::lock_guard lock(state_->mutex);
  state_->forced_version = std::move(version);
}

void fake_mcp_server::answer_notifications_with_body() {
  const std::lock_guard lock(state_->mutex);
  state_->notification_body = true;
}

void fake_mcp_server::set_cut_retry(std::chrono::milliseconds retry) {
  const std::lock_guard lock(state_->mutex);
  state_->cut_retry = retry;
}

std::chrono::steady_clock::time_point fake_mcp_server::cut_closed_at() const {
  const std::lock_guard lock(state_->mutex);
  return state_->cut_closed;
}

} // namespace troupe::test
