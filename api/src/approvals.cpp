// The /api/v1/approvals routes (issue 19): tool calls waiting for a human. A user sees
// and decides the approvals of their own runs, an admin everyone's; anyone else gets 404
// (an approval of another user's run is not shown to exist). A decision is stored once
// (the row changes only while pending: a second decision is 409) and then handed to the
// run that waits, through the approvals facade, which also arbitrates against the
// approval's deadline.

#include "troupe/storage/approvals.hpp"
#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::api {

namespace {

void write_approval(json_writer& w, const storage::approval_record& a) {
  w.begin_object().key("id").value(a.uuid).key("run_id").value(a.run_uuid);
  w.key("agent").value(a.agent).key("tool").value(a.tool).key("call_id").value(a.call_id);
  w.key("arguments").raw(a.arguments.empty() ? "{}" : a.arguments);
  w.key("reason").value(a.reason).key("status").value(a.status);
  w.key("owner_user_id").value(a.owner_user_id);
  if (a.status != "pending") {
    w.key("decided_by");
    if (a.decided_by != 0) {
      w.value(a.decided_by);
    } else {
      w.value(nullptr);
    }
    w.key("decided_at").value(a.decided_at).key("note").value(a.note);
  }
  w.key("created_at").value(a.created_at).key("expires_at").value(a.expires_at).end_object();
}

asio::awaitable<http_response> list_approvals(state_ptr state, request_context& ctx,
                                              api_caller caller) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  const auto owner = caller.is_admin() ? storage::row_id{0} : caller.user_id;
  auto rows = read(state, [owner](auto& c) { return storage::list_pending_approvals(c, owner); });
  if (!rows) {
    co_return error_response(rows.error());
  }
  const auto total = static_cast<std::int64_t>(rows->size());
  std::vector<storage::approval_record> window;
  for (auto i = p.offset; i < total && i < p.offset + p.limit; ++i) {
    window.push_back((*rows)[static_cast<std::size_t>(i)]);
  }
  co_return page_answer(window, total, p, write_approval);
}

asio::awaitable<http_response> decide(state_ptr state, request_context& ctx, api_caller caller) {
  const std::string id(ctx.param("id"));
  auto body = json_object::parse(ctx.request().body);
  if (!body) {
    co_return http_response::error(400, "invalid_argument", body.error().message);
  }
  auto decision = body->text("decision");
  auto note = body->text("note");
  if (!decision || !*decision || (**decision != "approve" && **decision != "deny")) {
    co_return http_response::error(400, "invalid_argument",
                                   "decision: must be \"approve\" or \"deny\"");
  }
  if (!note) {
    co_return http_response::error(400, "invalid_argument", "note: must be a string");
  }
  const bool approve = **decision == "approve";
  const std::string note_text = note->value_or(std::string());
  auto row = read(state, [&id](auto& c) { return storage::find_approval(c, id); });
  if (!row) {
    co_return row.error().code == errc::not_found ? not_found("approval")
                                                  : error_response(row.error());
  }
  if (!caller.is_admin() && row->owner_user_id != caller.user_id) {
    co_return not_found("approval");
  }
  if (row->status != "pending") {
    co_return http_response::error(409, "conflict",
                                   "the approval was decided already (" + row->status + ")");
  }
  auto claim = actors::approvals_facade::claim_result::not_live;
  if (state->approvals) {
    claim = state->approvals->claim(id);
  }
  if (claim == actors::approvals_facade::claim_result::taken) {
    co_return http_response::error(409, "conflict", "the approval was decided already");
  }
  const auto status = approve ? std::string("approved") : std::string("denied");
  const auto by = caller.user_id;
  auto pending = store(state, "decide approval",
                       [id, status, by, note_text](auto& c) -> expected<std::int64_t> {
                         auto changed = storage::decide_approval(c, id, status, by, note_text);
                         if (!changed) {
                           return tl::unexpected(changed.error());
                         }
                         if (!*changed) {
                           return fail(errc::conflict, "the approval was decided already");
                         }
                         return 1;
                       });
  auto written = co_await std::move(pending);
  if (!written) {
    if (claim == actors::approvals_facade::claim_result::claimed) {
      state->approvals->release(id);
    }
    co_return written.error().code == errc::conflict
        ? http_response::error(409, "conflict", written.error().message)
        : error_response(written.error());
  }
  // To the run that waits, or kept for the run a restart resumes.
  if (state->approvals) {
    state->approvals->deliver(id, approve, note_text, by);
  }
  auto stored = read(state, [&id](auto& c) { return storage::find_approval(c, id); });
  if (!stored) {
    co_return error_response(stored.error());
  }
  json_writer w;
  write_approval(w, *stored);
  auto text = std::move(w).str();
  // Whether a live run took the decision at once (false: the run is not live yet, as
  // after a restart; the decision goes to it when it resumes).
  text.insert(text.size() - 1, claim == actors::approvals_facade::claim_result::claimed
                                   ? R"(,"delivered":true)"
                                   : R"(,"delivered":false)");
  co_return http_response::json(200, std::move(text));
}

} // namespace

void add_approval_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/approvals", api_access::user, &list_approvals);
  routes.add(http_method::post, "/api/v1/approvals/{id}", api_access::user, &decide);
}

} // namespace troupe::api
