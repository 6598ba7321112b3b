// The run routes of /api/v1: a run's status, its events (live from its journal, or
// replayed from the database, under the same ids, once the journal is gone), its steps
// and its cancellation.

#include <charconv>

#include <fmt/format.h>

#include "chat.hpp"
#include "json.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

/// The caller's run: its row, its conversation, and its live journal when there is one.
struct found_run {
  std::optional<storage::run_record> row;
  std::string conversation_id;
  std::optional<actors::found_live_run> live;
};

std::optional<found_run> own_run(const state_ptr& state, const api_caller& caller,
                                 const std::string& run_id) {
  found_run out;
  if (state->chat) {
    out.live = state->chat->find_run(run_id);
  }
  auto row = state->reads->with(
      [&](storage::connection& c) { return storage::find_run_by_uuid(c, run_id); });
  if (row) {
    auto conversation = state->reads->with([&](storage::connection& c) {
      return storage::find_conversation(c, row->conversation_id);
    });
    if (!conversation || conversation->owner_user_id != caller.user_id ||
        (caller.agent_id && *caller.agent_id != conversation->agent_id)) {
      return std::nullopt;
    }
    out.row = *row;
    out.conversation_id = conversation->uuid;
    return out;
  }
  if (!out.live || out.live->owner_user != caller.user_id) {
    return std::nullopt;
  }
  // Queued: no row yet.
  auto conversation = state->reads->with([&](storage::connection& c) {
    return storage::find_conversation_by_uuid(c, out.live->ticket.conversation_id, caller.user_id);
  });
  if (!conversation || (caller.agent_id && *caller.agent_id != conversation->agent_id)) {
    return std::nullopt;
  }
  out.conversation_id = conversation->uuid;
  return out;
}

void write_run_row(json_writer& w, const storage::run_record& r) {
  w.key("model").value(r.model);
  w.key("created_at").value(r.created_at);
  if (r.started_at) {
    w.key("started_at").value(*r.started_at);
  }
  if (r.finished_at) {
    w.key("finished_at").value(*r.finished_at);
  }
  if (!r.error.empty()) {
    w.key("error").value(r.error);
  }
}

asio::awaitable<http_response> get_run(state_ptr state, request_context& ctx, api_caller caller) {
  const std::string run_id(ctx.param("id"));
  auto run = own_run(state, caller, run_id);
  if (!run) {
    co_return http_response::error(404, "not_found", "no such run");
  }
  json_writer w;
  w.begin_object().key("run_id").value(run_id);
  w.key("conversation_id").value(run->conversation_id);
  std::string status = run->row ? std::string(storage::to_string(run->row->status)) : "queued";
  std::optional<actors::run_status_view> view;
  if (run->live) {
    auto asking = state->chat->status(run->live->ticket, std::chrono::seconds(5));
    auto answered = co_await std::move(asking);
    if (answered) {
      view = std::move(*answered);
    }
  }
  if (view && view->result) {
    status = std::string(storage::to_string(view->result->status));
  }
  w.key("status").value(status);
  if (run->row) {
    write_run_row(w, *run->row);
  }
  if (view) {
    w.key("last_event_id").value(view->last_seq);
    if (view->result) {
      w.key("result").raw(run_outcome_json(*state, run->conversation_id, false, *view->result));
    }
  }
  w.end_object();
  co_return http_response::json(200, std::move(w).str());
}

/// `GET /api/v1/runs`: the caller's runs, newest first (paged); `status=active` keeps the
/// queued and running ones, `conversation_id` one conversation's.
asio::awaitable<http_response> list_runs(state_ptr state, request_context& ctx, api_caller caller) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  storage::user_run_filter f;
  f.owner_user_id = caller.user_id;
  const auto status = ctx.request().query_param("status");
  if (!status.empty() && status != "active") {
    co_return http_response::error(400, "invalid_argument",
                                   "status: must be active (queued or running runs)");
  }
  f.active_only = status == "active";
  if (const auto conversation = ctx.request().query_param("conversation_id");
      !conversation.empty()) {
    auto found = read(state, [&](auto& c) {
      return storage::find_conversation_by_uuid(c, conversation, caller.user_id);
    });
    if (!found) {
      co_return found.error().code == errc::not_found ? not_found("conversation")
                                                      : error_response(found.error());
    }
    f.conversation_id = found->id;
  }
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_user_runs(c, f, p); },
      [=](auto& c) { return storage::count_user_runs(c, f); },
      [](json_writer& w, const storage::user_run& r) {
        w.begin_object().key("run_id").value(r.run.uuid);
        w.key("conversation_id").value(r.conversation_uuid);
        w.key("status").value(storage::to_string(r.run.status));
        write_run_row(w, r.run);
        w.end_object();
      });
  auto answer = co_await std::move(answering);
  co_return answer;
}

asio::awaitable<http_response> run_steps(state_ptr state, request_context& ctx, api_caller caller) {
  const std::string run_id(ctx.param("id"));
  auto run = own_run(state, caller, run_id);
  if (!run) {
    co_return http_response::error(404, "not_found", "no such run");
  }
  std::vector<storage::execution_step_record> steps;
  if (run->row) {
    auto listed = state->reads->with(
        [&](storage::connection& c) { return storage::list_steps(c, run->row->id); });
    if (!listed) {
      co_return error_response(listed.error());
    }
    steps = std::move(*listed);
  }
  json_writer w;
  w.begin_object().key("data").begin_array();
  for (const auto& s : steps) {
    w.begin_object().key("seq").value(s.seq).key("kind").value(s.kind);
    w.key("name").value(s.name).key("status").value(s.status);
    w.key("input").raw(s.input_json.empty() ? std::string_view("null") : s.input_json);
    w.key("output").raw(s.output_json.empty() ? std::string_view("null") : s.output_json);
    w.key("created_at").value(s.created_at).end_object();
  }
  w.end_array().key("total").value(static_cast<std::int64_t>(steps.size())).end_object();
  co_return http_response::json(200, std::move(w).str());
}

std::uint64_t after_seq(const net::http_request& request) {
  std::string text(request.header("Last-Event-ID"));
  if (text.empty()) {
    text = request.query_param("after");
  }
  std::uint64_t v = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  return ec == std::errc{} && ptr == end ? v : 0;
}

asio::awaitable<http_response> run_events(state_ptr state, request_context& ctx,
                                          api_caller caller) {
  const std::string run_id(ctx.param("id"));
  auto run = own_run(state, caller, run_id);
  if (!run) {
    co_return http_response::error(404, "not_found", "no such run");
  }
  const auto after = after_seq(ctx.request());
  auto stream = ctx.begin_sse({{"X-Troupe-Run-Id", run_id}});
  if (run->live) {
    // A follower never cancels: the run is durable. No translator: the journal's own SSE
    // frames, encoded once for every follower.
    state->chat->follow(run->live->ticket, after, stream, {}, false);
    co_return http_response{};
  }
  if (!run->row || !state->chat) {
    stream.finish();
    co_return http_response{};
  }
  // The journal left memory (retention, the byte cap, a restart): a ticket without one
  // replays what storage keeps, under the same ids.
  state->chat->follow(actors::run_ticket{run_id, run->conversation_id, nullptr}, after, stream, {},
                      false);
  co_return http_response{};
}

asio::awaitable<http_response> cancel_run(state_ptr state, request_context& ctx,
                                          api_caller caller) {
  const std::string run_id(ctx.param("id"));
  auto run = own_run(state, caller, run_id);
  if (!run) {
    co_return http_response::error(404, "not_found", "no such run");
  }
  if (run->row && (run->row->status == storage::run_status::succeeded ||
                   run->row->status == storage::run_status::failed ||
                   run->row->status == storage::run_status::cancelled ||
                   run->row->status == storage::run_status::interrupted)) {
    co_return http_response::error(409, "conflict", "the run has already ended");
  }
  if (!state->chat) {
    co_return no_chat();
  }
  auto asking = state->chat->cancel(run->conversation_id, run_id);
  auto cancelled = co_await std::move(asking);
  if (!cancelled) {
    co_return error_response(cancelled.error());
  }
  if (!*cancelled) {
    co_return http_response::error(409, "conflict", "the run is not active");
  }
  json_writer w;
  w.begin_object().key("run_id").value(run_id).key("status").value("cancelling").end_object();
  co_return http_response::json(202, std::move(w).str());
}

} // namespace

void add_run_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/runs", api_access::user, &list_runs);
  routes.add(http_method::get, "/api/v1/runs/{id}", api_access::chat, &get_run);
  routes.add(http_method::del, "/api/v1/runs/{id}", api_access::chat, &cancel_run);
  routes.add(http_method::get, "/api/v1/runs/{id}/events", api_access::chat, &run_events);
  routes.add(http_method::get, "/api/v1/runs/{id}/steps", api_access::chat, &run_steps);
}

} // namespace troupe::api
