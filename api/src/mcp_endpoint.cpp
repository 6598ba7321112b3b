// troupe as an MCP server over Streamable HTTP at `/mcp` (protocol 2025-11-25, 2025-06-18
// and 2025-03-26): its agents are tools `ask_<agent>` (a message in; the run's answer and
// its files' signed links out). Every request carries the API's bearer token (any scope;
// an agent-scoped token sees its own agent only), and a request whose `Origin` is not in
// `api.cors_origins` is refused with 403 (DNS rebinding). `initialize` opens a session
// (`Mcp-Session-Id`, kept in memory, owned by the token's user); later requests name it,
// and an unknown one is 404. A `tools/call` whose client accepts SSE is answered on a
// stream: progress notifications as the run goes (when the call has a progress token),
// then the answer; notifications/cancelled cancels the run. There is no server stream of
// its own (GET is 405); DELETE ends a session.

#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>

#include "chat.hpp"
#include "json.hpp"
#include "state.hpp"
#include "troupe/net/mcp/jsonrpc.hpp"
#include "troupe/net/mcp/protocol.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/version.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace mcp = net::mcp;

/// The open sessions of `/mcp`.
struct mcp_sessions {
  struct session {
    std::string version;
    storage::row_id user_id = 0;
    std::chrono::steady_clock::time_point last_used;
    /// Calls running now, by JSON-RPC id: their conversation and run, to cancel them.
    std::map<std::string, std::pair<std::string, std::string>> calls;
    /// Ids of calls the client cancelled (their answers are not sent).
    std::set<std::string> cancelled;
  };
  std::mutex mutex;
  std::unordered_map<std::string, session> by_id;
};

namespace {

// Sessions kept at most, and how long an unused one lives.
constexpr std::size_t max_sessions = 10'000;
constexpr auto session_idle = std::chrono::hours(1);
constexpr std::string_view tool_prefix = "ask_";
constexpr std::size_t max_tool_name = 64;

http_response rpc_answer(unsigned status, std::string body, std::string_view session = {}) {
  auto r = http_response::json(status, std::move(body));
  if (!session.empty()) {
    r.headers.push_back({"Mcp-Session-Id", std::string(session)});
  }
  return r;
}

http_response rpc_error(unsigned status, std::string_view id, int code, std::string_view text) {
  return rpc_answer(status, mcp::write_error(id, code, text));
}

/// 122 random bits from the kernel (crypto.hpp): a session id nobody can guess.
std::string new_session_id() {
  return new_uuid();
}

/// `ask_<agent>`: characters a tool name cannot hold become '_'.
std::string tool_name(std::string_view agent) {
  std::string out(tool_prefix);
  for (const char c : agent) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out.size() > max_tool_name) {
    out.resize(max_tool_name);
  }
  return out;
}

/// The agents `caller` may ask.
expected<std::vector<storage::agent_record>> agents_of(const api_state& state,
                                                       const api_caller& caller) {
  if (caller.agent_id) {
    auto one = state.reads->with(
        [&](storage::connection& c) { return storage::find_agent(c, *caller.agent_id); });
    if (!one) {
      return tl::unexpected(one.error());
    }
    return std::vector<storage::agent_record>{std::move(*one)};
  }
  storage::page p;
  p.limit = 1000;
  return state.reads->with([&](storage::connection& c) { return storage::list_agents(c, p); });
}

/// 403 when the request's Origin is present and not allowed (DNS rebinding protection).
std::optional<http_response> refuse_origin(const api_state& state, const net::http_request& r) {
  const auto origin = r.header("Origin");
  if (origin.empty()) {
    return std::nullopt;
  }
  for (const auto& allowed : state.config.cors_origins) {
    if (allowed == "*" || allowed == origin) {
      return std::nullopt;
    }
  }
  return rpc_error(403, {}, -32000,
                   fmt::format("Forbidden: origin '{}' is not allowed (api.cors_origins)", origin));
}

/// "http://host:port" of the request, for absolute file links.
std::string base_url(const net::http_request& r) {
  const auto host = r.header("Host");
  const auto proto = r.header("X-Forwarded-Proto");
  return fmt::format("{}://{}", proto == "https" ? "https" : "http",
                     host.empty() ? std::string_view("localhost") : host);
}

/// The result of an `ask_` call from the run's outcome (run_outcome_json): the answer as
/// text, each file as a resource link, everything again as structured content.
std::string ask_result(std::string_view outcome, std::string_view base) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(outcome);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) {
    return R"({"content":[{"type":"text","text":"the run's outcome could not be read"}],"isError":true})";
  }
  const auto text = [&](simdjson::dom::element e, std::string_view key) {
    std::string_view s;
    return e[key].get_string().get(s) == simdjson::SUCCESS ? s : std::string_view{};
  };
  const auto status = text(root, "status");
  const bool ok = status == "succeeded";
  json_writer w;
  w.begin_object().key("content").begin_array();
  w.begin_object().key("type").value("text");
  if (ok) {
    w.key("text").value(text(root, "content"));
  } else {
    const auto error = text(root, "error");
    w.key("text").value(fmt::format("the run {}: {}", status,
                                    error.empty() ? std::string_view("no answer") : error));
  }
  w.end_object();
  simdjson::dom::array files;
  const bool has_files = root["files"].get_array().get(files) == simdjson::SUCCESS;
  if (has_files) {
    for (auto f : files) {
      const auto url = text(f, "download_url");
      if (url.empty()) {
        continue;
      }
      w.begin_object().key("type").value("resource_link");
      w.key("uri").value(fmt::format("{}{}", base, url)).key("name").value(text(f, "name"));
      w.key("mimeType").value(text(f, "mime_type"));
      std::uint64_t size = 0;
      if (f["size_bytes"].get_uint64().get(size) == simdjson::SUCCESS) {
        w.key("size").value(size);
      }
      w.end_object();
    }
  }
  w.end_array();
  w.key("structuredContent").begin_object();
  w.key("status").value(status).key("answer").value(text(root, "content"));
  if (!ok) {
    w.key("error").value(text(root, "error"));
  }
  w.key("run_id").value(text(root, "run_id"));
  w.key("conversation_id").value(text(root, "conversation_id"));
  w.key("files").begin_array();
  if (has_files) {
    for (auto f : files) {
      w.begin_object().key("name").value(text(f, "name"));
      const auto url = text(f, "download_url");
      if (!url.empty()) {
        w.key("url").value(fmt::format("{}{}", base, url));
      }
      w.key("mime_type").value(text(f, "mime_type"));
      std::uint64_t size = 0;
      if (f["size_bytes"].get_uint64().get(size) == simdjson::SUCCESS) {
        w.key("size_bytes").value(size);
      }
      w.end_object();
    }
  }
  w.end_array().end_object();
  w.key("isError").value(!ok).end_object();
  return std::move(w).str();
}

std::string tools_list(const std::vector<storage::agent_record>& agents) {
  json_writer w;
  w.begin_object().key("tools").begin_array();
  for (const auto& a : agents) {
    w.begin_object().key("name").value(tool_name(a.name));
    w.key("title").value(fmt::format("Ask {}", a.name));
    w.key("description")
        .value(fmt::format("Sends a message to troupe's agent '{}', which works on it (with its "
                           "own tools) and answers. The result is the agent's answer, links to "
                           "the files it made, and the conversation id to continue with.",
                           a.name));
    // One line: answers may travel as one SSE data line.
    w.key("inputSchema")
        .raw(R"js({"type":"object","properties":{)js"
             R"js("message":{"type":"string","description":"What to ask the agent"},)js"
             R"js("conversation_id":{"type":"string","description":"Continue this )js"
             R"js(conversation (the conversation_id of an earlier answer)"}},)js"
             R"js("required":["message"]})js");
    w.end_object();
  }
  w.end_array().end_object();
  return std::move(w).str();
}

std::string progress_note(std::string_view token, std::uint64_t progress, std::string_view text) {
  json_writer w;
  w.begin_object().key("progressToken").raw(token).key("progress").value(progress);
  w.key("message").value(text).end_object();
  return "event: message\ndata: " +
         mcp::write_notification("notifications/progress", std::move(w).str()) + "\n\n";
}

/// Turns a run's journal into the SSE events of one `tools/call`: progress
/// notifications (with a token), then the answer.
class call_translator {
public:
  call_translator(std::string id, std::string token, std::string base,
                  std::shared_ptr<mcp_sessions> sessions, std::string session)
      : id_(std::move(id)), token_(std::move(token)), base_(std::move(base)),
        sessions_(std::move(sessions)), session_(std::move(session)) {}

  std::string operator()(const actors::journal_entry& e) {
    if (e.event() == "done") {
      bool cancelled = false;
      {
        const std::lock_guard lock(sessions_->mutex);
        const auto it = sessions_->by_id.find(session_);
        if (it != sessions_->by_id.end()) {
          it->second.calls.erase(id_);
          cancelled = it->second.cancelled.erase(id_) > 0;
        }
      }
      if (cancelled) {
        return {}; // the client cancelled it: no answer (the spec's rule)
      }
      return "event: message\ndata: " + mcp::write_result(id_, ask_result(e.data(), base_)) +
             "\n\n";
    }
    // The journal files run.started under "run" and action.* under "step" (run_journal's
    // journal_event_name); model deltas ("message") are not progress.
    if (token_.empty() || (e.event() != "run" && e.event() != "step")) {
      return {};
    }
    simdjson::dom::element root;
    const simdjson::padded_string padded(e.data());
    std::string_view type;
    if (parser_.parse(padded).get(root) != simdjson::SUCCESS ||
        root["type"].get_string().get(type) != simdjson::SUCCESS) {
      return {};
    }
    std::string_view tool;
    std::ignore = root["data"]["tool"].get_string().get(tool);
    if (type == "run.started") {
      return progress_note(token_, ++progress_, "the agent started");
    }
    if (type == "action.started") {
      return progress_note(token_, ++progress_, fmt::format("calling {}", tool));
    }
    if (type == "action.finished") {
      return progress_note(token_, ++progress_, fmt::format("{} finished", tool));
    }
    return {};
  }

private:
  std::string id_;
  std::string token_;
  std::string base_;
  std::shared_ptr<mcp_sessions> sessions_;
  std::string session_;
  std::uint64_t progress_ = 0;
  simdjson::dom::parser parser_;
};

asio::awaitable<http_response> call_agent(state_ptr state, request_context& ctx, api_caller caller,
                                          std::string session, mcp::jsonrpc_message m) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(m.params.empty() ? "{}" : m.params);
  simdjson::dom::element params;
  std::string_view name;
  if (parser.parse(padded).get(params) != simdjson::SUCCESS ||
      params["name"].get_string().get(name) != simdjson::SUCCESS) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::invalid_params, "params.name is required");
  }
  auto agents = agents_of(*state, caller);
  if (!agents) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::internal_error, agents.error().message);
  }
  const auto agent_it = std::find_if(agents->begin(), agents->end(),
                                     [&](const auto& a) { return tool_name(a.name) == name; });
  if (agent_it == agents->end()) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::invalid_params,
                        fmt::format("Unknown tool: {}", name));
  }
  std::string_view message;
  std::string_view continued;
  std::ignore = params["arguments"]["conversation_id"].get_string().get(continued);
  if (params["arguments"]["message"].get_string().get(message) != simdjson::SUCCESS ||
      message.empty()) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::invalid_params,
                        "arguments.message: is required (a non-empty string)");
  }
  if (message.size() > max_message_bytes) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::invalid_params,
                        fmt::format("arguments.message: is over {} bytes", max_message_bytes));
  }
  std::string token;
  simdjson::dom::element token_element;
  if (params["_meta"]["progressToken"].get(token_element) == simdjson::SUCCESS) {
    token = simdjson::minify(token_element);
  }
  std::optional<http_response> refused;
  auto agent = chat_agent(*state, caller, agent_it->name, refused);
  if (!agent) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::invalid_params, agent.error().message);
  }
  expected<storage::conversation_record> conversation;
  bool created_now = false;
  if (!continued.empty()) {
    conversation = state->reads->with([&](storage::connection& c) {
      return storage::find_conversation_by_uuid(c, continued, caller.user_id);
    });
    if (!conversation || conversation->agent_id != agent->id) {
      co_return rpc_error(200, m.id, mcp::jsonrpc_code::invalid_params,
                          fmt::format("arguments.conversation_id: no conversation '{}' of yours "
                                      "with agent '{}'",
                                      continued, agent->name));
    }
  } else {
    conversation = new_conversation(*state, caller, *agent, message);
    created_now = true;
  }
  const bool streamed =
      ctx.request().header("Accept").find("text/event-stream") != std::string_view::npos;
  const bool demo = is_demo_agent(*state, *agent);
  actors::chat_submission submission;
  submission.user_id = caller.user_id;
  submission.conversation = *conversation;
  submission.text = std::string(message);
  submission.awaited = !streamed;
  if (created_now) {
    submission.fresh = actors::chat_submission::fresh_conversation{*agent, {}};
  }
  submission.final_data = [state, id = conversation->uuid, demo](const actors::run_result& r) {
    return run_outcome_json(*state, id, demo, r);
  };
  auto submitting = state->chat->submit(std::move(submission));
  auto run = co_await std::move(submitting);
  if (!run) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::internal_error, run.error().message);
  }
  {
    const std::lock_guard lock(state->mcp_session_table->mutex);
    const auto it = state->mcp_session_table->by_id.find(session);
    if (it != state->mcp_session_table->by_id.end()) {
      it->second.calls[m.id] = {run->conversation_id, run->run_id};
    }
  }
  const auto base = base_url(ctx.request());
  if (streamed) {
    auto stream = ctx.begin_sse({{"Mcp-Session-Id", session}});
    auto translator =
        std::make_shared<call_translator>(m.id, token, base, state->mcp_session_table, session);
    // A client that leaves does not cancel the run (the spec's rule: only
    // notifications/cancelled does).
    state->chat->follow(
        *run, 0, stream, [translator](const actors::journal_entry& e) { return (*translator)(e); },
        false);
    co_return http_response{};
  }
  auto waiting = await_run(*state, ctx, *agent, *run);
  auto result = co_await std::move(waiting);
  bool cancelled = false;
  {
    const std::lock_guard lock(state->mcp_session_table->mutex);
    const auto it = state->mcp_session_table->by_id.find(session);
    if (it != state->mcp_session_table->by_id.end()) {
      it->second.calls.erase(m.id);
      cancelled = it->second.cancelled.erase(m.id) > 0;
    }
  }
  if (!result) {
    co_return rpc_error(200, m.id, mcp::jsonrpc_code::internal_error, result.error().message);
  }
  if (cancelled) {
    co_return http_response{202, "application/json", {{"Mcp-Session-Id", session}}, ""};
  }
  co_return rpc_answer(
      200,
      mcp::write_result(
          m.id, ask_result(run_outcome_json(*state, run->conversation_id, demo, *result), base)),
      session);
}

asio::awaitable<http_response> post_mcp(state_ptr state, request_context& ctx, api_caller caller) {
  if (auto refused = refuse_origin(*state, ctx.request())) {
    co_return std::move(*refused);
  }
  auto parsed = mcp::parse_jsonrpc(ctx.request().body);
  if (!parsed) {
    co_return rpc_error(400, {},
                        parsed.error().code == errc::parse_error
                            ? mcp::jsonrpc_code::parse_error
                            : mcp::jsonrpc_code::invalid_request,
                        parsed.error().message);
  }
  if (parsed->size() != 1) {
    co_return rpc_error(400, {}, mcp::jsonrpc_code::invalid_request,
                        "batches are not accepted (one JSON-RPC message per request)");
  }
  auto m = std::move(parsed->front());
  auto& sessions = *state->mcp_session_table;
  const auto now = std::chrono::steady_clock::now();
  if (m.is_request() && m.method == "initialize") {
    simdjson::dom::parser parser;
    const simdjson::padded_string padded(m.params.empty() ? "{}" : m.params);
    simdjson::dom::element params;
    std::string_view asked;
    if (parser.parse(padded).get(params) == simdjson::SUCCESS) {
      std::ignore = params["protocolVersion"].get_string().get(asked);
    }
    const std::string version(
        mcp::supported_protocol_version(asked) ? asked : mcp::latest_protocol_version);
    const auto id = new_session_id();
    {
      const std::lock_guard lock(sessions.mutex);
      std::erase_if(sessions.by_id,
                    [&](const auto& s) { return now - s.second.last_used > session_idle; });
      if (sessions.by_id.size() >= max_sessions) {
        co_return rpc_error(503, m.id, -32000, "too many MCP sessions; try again later");
      }
      sessions.by_id[id] = {version, caller.user_id, now, {}, {}};
    }
    json_writer w;
    w.begin_object().key("protocolVersion").value(version);
    w.key("capabilities").raw(R"({"tools":{"listChanged":false}})");
    w.key("serverInfo").begin_object().key("name").value("troupe");
    w.key("version").value(troupe::version()).end_object();
    w.key("instructions")
        .value("Each tool ask_<agent> hands a message to one of troupe's agents and returns its "
               "answer and links to the files it made.");
    w.end_object();
    co_return rpc_answer(200, mcp::write_result(m.id, std::move(w).str()), id);
  }
  const std::string session(ctx.request().header("Mcp-Session-Id"));
  if (session.empty()) {
    co_return rpc_error(400, m.id, -32000,
                        "Bad Request: Mcp-Session-Id is required (send initialize first)");
  }
  {
    const std::lock_guard lock(sessions.mutex);
    const auto it = sessions.by_id.find(session);
    if (it == sessions.by_id.end() || it->second.user_id != caller.user_id) {
      co_return rpc_error(404, m.id, -32001, "Session not found");
    }
    const auto version = ctx.request().header("MCP-Protocol-Version");
    if (!version.empty() && version != it->second.version) {
      co_return rpc_error(400, m.id, -32000,
                          fmt::format("Bad Request: MCP-Protocol-Version {} is not the session's "
                                      "({})",
                                      version, it->second.version));
    }
    it->second.last_used = now;
  }
  if (!m.is_request()) {
    if (m.method == "notifications/cancelled") {
      simdjson::dom::parser parser;
      const simdjson::padded_string padded(m.params.empty() ? "{}" : m.params);
      simdjson::dom::element params;
      simdjson::dom::element request_id;
      std::pair<std::string, std::string> run;
      if (parser.parse(padded).get(params) == simdjson::SUCCESS &&
          params["requestId"].get(request_id) == simdjson::SUCCESS) {
        const auto key = simdjson::minify(request_id);
        const std::lock_guard lock(sessions.mutex);
        auto& s = sessions.by_id[session];
        if (const auto it = s.calls.find(key); it != s.calls.end()) {
          run = it->second;
          s.cancelled.insert(key);
        }
      }
      if (!run.second.empty() && state->chat) {
        auto cancelling = state->chat->cancel(run.first, run.second);
        (void)co_await std::move(cancelling);
      }
    }
    co_return http_response{202, "application/json", {{"Mcp-Session-Id", session}}, ""};
  }
  if (m.method == "ping") {
    co_return rpc_answer(200, mcp::write_result(m.id, "{}"), session);
  }
  if (m.method == "tools/list") {
    auto agents = agents_of(*state, caller);
    if (!agents) {
      co_return rpc_error(200, m.id, mcp::jsonrpc_code::internal_error, agents.error().message);
    }
    co_return rpc_answer(200, mcp::write_result(m.id, tools_list(*agents)), session);
  }
  if (m.method == "tools/call") {
    if (!state->chat) {
      co_return rpc_error(503, m.id, mcp::jsonrpc_code::internal_error,
                          "the chat service is not running");
    }
    auto calling = call_agent(state, ctx, caller, session, std::move(m));
    co_return co_await std::move(calling);
  }
  co_return rpc_error(200, m.id, mcp::jsonrpc_code::method_not_found,
                      fmt::format("Method not found: {}", m.method));
}

asio::awaitable<http_response> delete_mcp(state_ptr state, request_context& ctx,
                                          api_caller caller) {
  if (auto refused = refuse_origin(*state, ctx.request())) {
    co_return std::move(*refused);
  }
  const std::string session(ctx.request().header("Mcp-Session-Id"));
  const std::lock_guard lock(state->mcp_session_table->mutex);
  const auto it = state->mcp_session_table->by_id.find(session);
  if (it == state->mcp_session_table->by_id.end() || it->second.user_id != caller.user_id) {
    co_return rpc_error(404, {}, -32001, "Session not found");
  }
  state->mcp_session_table->by_id.erase(it);
  co_return http_response::text(200, "");
}

asio::awaitable<http_response> get_mcp_stream(state_ptr state, request_context& ctx) {
  if (auto refused = refuse_origin(*state, ctx.request())) {
    co_return std::move(*refused);
  }
  // No stream of the server's own: it sends nothing outside the answers to requests.
  auto r = http_response::text(405, "troupe's MCP endpoint offers no server stream");
  r.headers.push_back({"Allow", "POST, DELETE"});
  co_return r;
}

} // namespace

void add_mcp_endpoint(route_table& routes) {
  using net::http_method;
  routes.state()->mcp_session_table = std::make_shared<mcp_sessions>();
  routes.add(http_method::post, "/mcp", api_access::chat, &post_mcp);
  routes.add(http_method::del, "/mcp", api_access::chat, &delete_mcp);
  routes.add(http_method::get, "/mcp", api_access::chat, &get_mcp_stream);
}

} // namespace troupe::api
