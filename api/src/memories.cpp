// The /api/v1/memories routes: a user reviews their durable memory (list, read, write,
// approve or dismiss, forget, revisions, evidence); an admin does so for any user with
// `?user=`. Another user's item is 404. Changes go through the user's memory writer
// (memory_facade), reads through the read pool.

#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/memory_rules.hpp"
#include "troupe/storage/memory.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

/// An item's public id (its uuid) from its row, empty when there is none.
std::string uuid_of(const state_ptr& state, std::optional<storage::row_id> id) {
  if (!id) {
    return {};
  }
  auto item = read(state, [&](auto& c) { return storage::find_memory(c, *id); });
  return item ? item->uuid : std::string();
}

void write_memory(json_writer& w, const storage::memory_item_record& m,
                  const std::string& superseded_by) {
  w.begin_object();
  w.key("id").value(m.uuid);
  w.key("user_id").value(m.user_id);
  w.key("agent_id");
  if (m.agent_id) {
    w.value(*m.agent_id);
  } else {
    w.value(nullptr);
  }
  w.key("scope").value(m.scope);
  w.key("kind").value(m.kind);
  w.key("key").value(m.memory_key);
  w.key("content").value(m.content);
  w.key("summary").value(m.summary);
  w.key("importance").value(m.importance);
  w.key("confidence").value(m.confidence);
  w.key("sensitivity").value(m.sensitivity);
  w.key("status").value(m.status);
  w.key("pinned").value(m.pinned);
  w.key("expires_at");
  if (m.expires_at) {
    w.value(*m.expires_at);
  } else {
    w.value(nullptr);
  }
  w.key("superseded_by");
  if (superseded_by.empty()) {
    w.value(nullptr);
  } else {
    w.value(superseded_by);
  }
  w.key("created_at").value(m.created_at);
  w.key("updated_at").value(m.updated_at);
  w.end_object();
}

/// `{"outcome": …, "memory": {…}, "previous": {…}}` for a change.
http_response change_answer(const state_ptr& state, unsigned status,
                            const storage::memory_write_result& r) {
  json_writer w;
  w.begin_object();
  w.key("outcome").value(storage::to_string(r.outcome));
  w.key("memory");
  write_memory(w, r.item, uuid_of(state, r.item.superseded_by));
  if (r.previous) {
    w.key("previous");
    write_memory(w, *r.previous, uuid_of(state, r.previous->superseded_by));
  }
  w.end_object();
  return http_response::json(status, std::move(w).str());
}

/// 422 with the refusal's reason beside the usual code and message.
http_response refused_answer(const memory::refusal& r) {
  json_writer w;
  w.begin_object().key("error").begin_object();
  w.key("code").value("memory_refused");
  w.key("message").value(fmt::format("the memory was refused: {}", r.message));
  w.key("reason").value(memory::to_string(r.reason));
  w.end_object().end_object();
  return http_response::json(422, std::move(w).str());
}

/// Whose memory the request is about: the caller's own, or `?user=` (an id or a name)
/// for an admin. Sets `bad` when the request may not ask for it.
std::optional<storage::row_id> target_user(const state_ptr& state, request_context& ctx,
                                           const api_caller& caller,
                                           std::optional<http_response>& bad) {
  const auto asked = ctx.request().query_param("user");
  if (asked.empty()) {
    return caller.user_id;
  }
  std::optional<storage::row_id> id = parse_id(asked);
  if (!id) {
    auto by_name = read(state, [&](auto& c) { return storage::find_user_by_name(c, asked); });
    if (by_name) {
      id = by_name->id;
    }
  }
  if (id && *id == caller.user_id) {
    return id;
  }
  if (!caller.is_admin()) {
    bad = http_response::error(403, "forbidden", "only an admin may see another user's memory");
    return std::nullopt;
  }
  if (!id || !read(state, [&](auto& c) { return storage::find_user(c, *id); })) {
    bad = not_found("user");
    return std::nullopt;
  }
  return id;
}

/// An agent named by uuid, name or row id.
std::optional<storage::row_id> agent_row(const state_ptr& state, const std::string& text) {
  if (auto id = parse_id(text)) {
    if (read(state, [&](auto& c) { return storage::find_agent(c, *id); })) {
      return id;
    }
  }
  if (auto a = read(state, [&](auto& c) { return storage::find_agent_by_uuid(c, text); })) {
    return a->id;
  }
  if (auto a = read(state, [&](auto& c) { return storage::find_agent_by_name(c, text); })) {
    return a->id;
  }
  return std::nullopt;
}

/// The item of path parameter `id` the caller may see (an admin: anyone's).
std::optional<storage::memory_item_record>
visible_item(const state_ptr& state, request_context& ctx, const api_caller& caller) {
  const std::string uuid(ctx.param("id"));
  const auto owner = caller.is_admin() ? 0 : caller.user_id;
  auto item = read(state, [&](auto& c) { return storage::find_memory_by_uuid(c, uuid, owner); });
  if (!item) {
    return std::nullopt;
  }
  return *item;
}

std::string actor_of(const api_caller& caller) {
  return fmt::format("{}:{}", caller.is_admin() ? "admin" : "user", caller.user_id);
}

/// Sends a change through the memory writer (or, with no memory service, the store).
asio::awaitable<expected<storage::memory_write_result>>
apply_change(state_ptr state, storage::row_id owner, storage::memory_change change) {
  if (state->memory) {
    auto writing = state->memory->write(owner, std::move(change));
    co_return co_await std::move(writing);
  }
  auto result = std::make_shared<storage::memory_write_result>();
  auto writing = state->store->write(storage::memory_change_op(std::move(change), result));
  auto done = co_await std::move(writing);
  if (!done) {
    co_return tl::unexpected(done.error());
  }
  co_return std::move(*result);
}

std::optional<bool> boolean(json_body& body, std::string_view field) {
  auto e = body.element(field);
  if (!e) {
    return std::nullopt;
  }
  bool v = false;
  if (e->get_bool().get(v) != simdjson::SUCCESS) {
    body.invalid(field, "must be true or false");
    return std::nullopt;
  }
  return v;
}

std::optional<double> number(json_body& body, std::string_view field) {
  auto e = body.element(field);
  if (!e) {
    return std::nullopt;
  }
  double v = 0;
  if (e->get_double().get(v) != simdjson::SUCCESS || !std::isfinite(v)) {
    body.invalid(field, "must be a number");
    return std::nullopt;
  }
  return v;
}

asio::awaitable<http_response> list_memories(state_ptr state, request_context& ctx,
                                             api_caller caller) {
  std::optional<http_response> bad;
  auto user = target_user(state, ctx, caller, bad);
  if (!user) {
    co_return *bad;
  }
  storage::page p;
  if (auto wrong = read_page(ctx.request(), p)) {
    co_return *wrong;
  }
  const auto& request = ctx.request();
  storage::memory_filter f;
  f.user_id = *user;
  f.scope = request.query_param("scope");
  f.kind = request.query_param("kind");
  f.status = request.query_param("status");
  f.query = request.query_param("q");
  if (!f.scope.empty() && !memory::is_scope(f.scope)) {
    co_return http_response::error(400, "invalid_argument",
                                   "scope: must be \"user\" or \"agent_user\"");
  }
  if (!f.kind.empty() && !memory::is_kind(f.kind)) {
    co_return http_response::error(400, "invalid_argument", "kind: unknown kind");
  }
  if (!f.status.empty() && !memory::is_status(f.status)) {
    co_return http_response::error(400, "invalid_argument", "status: unknown status");
  }
  if (const auto agent = request.query_param("agent"); !agent.empty()) {
    f.agent_id = agent_row(state, agent);
    if (!f.agent_id) {
      co_return not_found("agent");
    }
  }
  // The page, its total and the public ids of the items that replaced its superseded
  // ones, read together off the shard (by value: the job may outlive this frame).
  struct memory_page {
    counted_rows<storage::memory_item_record> page;
    std::map<storage::row_id, std::string> successors;
  };
  auto reading = read_off_shard(state, [f, p](auto& c) -> expected<memory_page> {
    memory_page out;
    auto page = read_counted(
        c, [&](auto& conn) { return storage::list_memories(conn, f, p); },
        [&](auto& conn) { return storage::count_memories(conn, f); });
    if (!page) {
      return tl::unexpected(page.error());
    }
    for (const auto& m : page->rows) {
      if (m.superseded_by && !out.successors.contains(*m.superseded_by)) {
        auto next = storage::find_memory(c, *m.superseded_by);
        out.successors[*m.superseded_by] = next ? next->uuid : std::string();
      }
    }
    out.page = std::move(*page);
    return out;
  });
  auto listed = co_await std::move(reading);
  if (!listed) {
    co_return error_response(listed.error());
  }
  auto& successors = listed->successors;
  co_return page_answer(listed->page.rows, listed->page.total, p,
                        [&](json_writer& w, const storage::memory_item_record& m) {
                          write_memory(
                              w, m, m.superseded_by ? successors[*m.superseded_by] : std::string());
                        });
}

/// Reads a memory's fields from `body` into `p` (problems are kept in `body`); an import
/// item may also name its `id`.
void read_proposal(const state_ptr& state, json_body& body, storage::memory_proposal& p,
                   bool import) {
  if (import) {
    body.only({"id", "scope", "kind", "key", "content", "summary", "importance", "confidence",
               "sensitivity", "pinned", "expires_at", "agent", "status"});
  } else {
    body.only({"scope", "kind", "key", "content", "summary", "importance", "confidence",
               "sensitivity", "pinned", "expires_at", "agent", "status"});
  }
  p.uuid = new_uuid();
  p.active = true;
  if (auto v = body.text("id", false, 64)) {
    if (v->empty()) {
      body.invalid("id", "must not be empty");
    }
    p.uuid = *v;
  }
  if (auto v = body.text("scope")) {
    p.scope = *v;
  }
  if (auto v = body.text("kind")) {
    p.kind = *v;
  }
  if (auto v = body.text("key", true, memory::max_key_bytes)) {
    p.key = *v;
  }
  if (auto v = body.text("content", true, memory::max_content_bytes)) {
    p.content = *v;
  }
  if (auto v = body.text("summary", false, memory::max_summary_bytes)) {
    p.summary = *v;
  }
  if (auto v = body.integer("importance")) {
    p.importance = v->value_or(p.importance);
  }
  if (auto v = number(body, "confidence")) {
    p.confidence = *v;
  }
  if (auto v = body.text("sensitivity")) {
    p.sensitivity = *v;
  }
  if (auto v = boolean(body, "pinned")) {
    p.pinned = *v;
  }
  if (auto v = body.integer("expires_at", true)) {
    p.expires_at = *v;
  }
  if (auto v = body.text("status")) {
    if (*v != "active" && *v != "candidate") {
      body.invalid("status", "must be \"active\" or \"candidate\"");
    }
    p.active = *v == "active";
  }
  if (auto v = body.text("agent")) {
    p.agent_id = agent_row(state, *v);
    if (!p.agent_id) {
      body.invalid("agent", "no such agent");
    }
  }
}

asio::awaitable<http_response> create_memory(state_ptr state, request_context& ctx,
                                             api_caller caller) {
  std::optional<http_response> bad;
  auto user = target_user(state, ctx, caller, bad);
  if (!user) {
    co_return *bad;
  }
  json_body body(ctx.request().body);
  storage::memory_proposal p;
  read_proposal(state, body, p, false);
  p.user_id = *user;
  p.actor = actor_of(caller);
  p.source = "api";
  if (!body.ok()) {
    co_return body.error_response();
  }
  if (auto valid = storage::validate_proposal(p); !valid) {
    co_return http_response::error(400, "invalid_argument", valid.error().message);
  }
  storage::memory_change change;
  change.proposal = std::move(p);
  auto writing = apply_change(state, *user, std::move(change));
  auto done = co_await std::move(writing);
  if (!done) {
    co_return error_response(done.error());
  }
  if (done->refusal) {
    co_return refused_answer(*done->refusal);
  }
  const bool created = done->outcome == storage::memory_outcome::created ||
                       done->outcome == storage::memory_outcome::superseded;
  co_return change_answer(state, created ? 201 : 200, *done);
}

/// The most items one import may carry.
constexpr std::size_t max_import_items = 200;

/// `POST /api/v1/memories/import`: `{"items":[…]}`, each item as the body of a POST (and
/// an optional `id` to keep), for the caller or `?user=`. Every item is checked first (a
/// malformed one: 400, nothing written); then each is written in order through the
/// user's memory writer under the usual rules, its first revision `imported`, and the
/// answer lists what each did.
asio::awaitable<http_response> import_memories(state_ptr state, request_context& ctx,
                                               api_caller caller) {
  std::optional<http_response> bad;
  auto user = target_user(state, ctx, caller, bad);
  if (!user) {
    co_return *bad;
  }
  json_body body(ctx.request().body);
  body.only({"items"});
  simdjson::dom::array items;
  if (auto e = body.element("items"); !e) {
    body.invalid("items", "is required");
  } else if (e->get_array().get(items) != simdjson::SUCCESS) {
    body.invalid("items", "must be an array of memories");
  } else if (items.size() == 0 || items.size() > max_import_items) {
    body.invalid("items", fmt::format("must hold 1 to {} memories", max_import_items));
  }
  if (!body.ok()) {
    co_return body.error_response();
  }
  std::vector<storage::memory_proposal> proposals;
  std::size_t index = 0;
  for (auto item : items) {
    json_body one(simdjson::to_string(item));
    storage::memory_proposal p;
    read_proposal(state, one, p, true);
    p.user_id = *user;
    p.actor = actor_of(caller);
    p.source = "import";
    p.imported = true;
    const auto where = fmt::format("items[{}]", index);
    if (!one.ok()) {
      co_return http_response::error(400, "invalid_argument",
                                     fmt::format("{}.{}", where, one.problem()));
    }
    if (auto valid = storage::validate_proposal(p); !valid) {
      co_return http_response::error(400, "invalid_argument",
                                     fmt::format("{}.{}", where, valid.error().message));
    }
    proposals.push_back(std::move(p));
    ++index;
  }
  json_writer w;
  w.begin_object().key("results").begin_array();
  std::size_t written = 0;
  for (std::size_t i = 0; i < proposals.size(); ++i) {
    storage::memory_change change;
    change.proposal = std::move(proposals[i]);
    auto writing = apply_change(state, *user, std::move(change));
    auto done = co_await std::move(writing);
    w.begin_object().key("index").value(i);
    if (!done) {
      w.key("outcome").value("failed");
      w.key("error").begin_object().key("code").value(to_string(done.error().code));
      w.key("message").value(done.error().message).end_object();
    } else if (done->refusal) {
      w.key("outcome").value("refused");
      w.key("reason").value(memory::to_string(done->refusal->reason));
      w.key("message").value(done->refusal->message);
    } else {
      w.key("outcome").value(storage::to_string(done->outcome));
      w.key("memory");
      write_memory(w, done->item, uuid_of(state, done->item.superseded_by));
      if (done->outcome == storage::memory_outcome::created ||
          done->outcome == storage::memory_outcome::superseded) {
        ++written;
      }
    }
    w.end_object();
  }
  w.end_array();
  w.key("count").value(proposals.size()).key("imported").value(written).end_object();
  co_return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> get_memory(state_ptr state, request_context& ctx,
                                          api_caller caller) {
  auto item = visible_item(state, ctx, caller);
  if (!item) {
    co_return not_found("memory");
  }
  const auto successor = uuid_of(state, item->superseded_by);
  co_return one_answer(200, *item, [&](json_writer& w, const storage::memory_item_record& m) {
    write_memory(w, m, successor);
  });
}

asio::awaitable<http_response> patch_memory(state_ptr state, request_context& ctx,
                                            api_caller caller) {
  auto item = visible_item(state, ctx, caller);
  if (!item) {
    co_return not_found("memory");
  }
  json_body body(ctx.request().body);
  body.only({"content", "summary", "status", "pinned", "expires_at"});
  storage::memory_patch patch;
  patch.id = item->id;
  patch.user_id = item->user_id;
  patch.actor = actor_of(caller);
  if (auto v = body.text("content", false, memory::max_content_bytes)) {
    patch.content = *v;
  }
  if (auto v = body.text("summary", false, memory::max_summary_bytes)) {
    patch.summary = *v;
  }
  if (auto v = body.text("status")) {
    if (*v != "active" && *v != "dismissed") {
      body.invalid("status", "must be \"active\" (approve) or \"dismissed\"");
    }
    patch.status = *v;
  }
  if (auto v = boolean(body, "pinned")) {
    patch.pinned = *v;
  }
  if (auto v = body.integer("expires_at", true)) {
    patch.expires_at = *v;
  }
  if (!body.ok()) {
    co_return body.error_response();
  }
  storage::memory_change change;
  change.what = storage::memory_change::action::review;
  change.patch = std::move(patch);
  auto writing = apply_change(state, item->user_id, std::move(change));
  auto done = co_await std::move(writing);
  if (!done) {
    co_return error_response(done.error());
  }
  if (done->refusal) {
    co_return refused_answer(*done->refusal);
  }
  co_return change_answer(state, 200, *done);
}

asio::awaitable<http_response> delete_memory(state_ptr state, request_context& ctx,
                                             api_caller caller) {
  auto item = visible_item(state, ctx, caller);
  if (!item) {
    co_return not_found("memory");
  }
  storage::memory_change change;
  change.what = storage::memory_change::action::forget;
  change.patch.id = item->id;
  change.patch.user_id = item->user_id;
  change.patch.actor = actor_of(caller);
  auto writing = apply_change(state, item->user_id, std::move(change));
  auto done = co_await std::move(writing);
  if (!done) {
    co_return error_response(done.error());
  }
  co_return http_response{204, "application/json", {}, {}};
}

asio::awaitable<http_response> memory_revisions(state_ptr state, request_context& ctx,
                                                api_caller caller) {
  auto item = visible_item(state, ctx, caller);
  if (!item) {
    co_return not_found("memory");
  }
  storage::page p;
  if (auto wrong = read_page(ctx.request(), p)) {
    co_return *wrong;
  }
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_memory_revisions(c, item->id, p); },
      [=](auto& c) { return storage::count_memory_revisions(c, item->id); },
      [](json_writer& w, const storage::memory_revision_record& r) {
        w.begin_object();
        w.key("id").value(r.id);
        w.key("action").value(r.action);
        w.key("content").value(r.content);
        w.key("summary").value(r.summary);
        w.key("status").value(r.status);
        w.key("actor").value(r.actor);
        w.key("created_at").value(r.created_at);
        w.end_object();
      });
  auto answer = co_await std::move(answering);
  co_return answer;
}

/// An evidence row with the public ids of the conversation and run it points at (null
/// when it points at none, or at one that is gone).
struct evidence_row {
  storage::memory_evidence_record record;
  std::optional<std::string> conversation;
  std::optional<std::string> run;
};

/// A page of an item's evidence with its total, each row's conversation and run looked up
/// on the same connection (one job off the shard for the whole page).
expected<counted_rows<evidence_row>>
read_evidence_page(storage::connection& c, storage::row_id memory, const storage::page& p) {
  auto page = read_counted(
      c, [&](auto& conn) { return storage::list_memory_evidence(conn, memory, p); },
      [&](auto& conn) { return storage::count_memory_evidence(conn, memory); });
  if (!page) {
    return tl::unexpected(page.error());
  }
  counted_rows<evidence_row> out;
  out.total = page->total;
  out.rows.reserve(page->rows.size());
  for (auto& e : page->rows) {
    evidence_row row{std::move(e), std::nullopt, std::nullopt};
    if (row.record.conversation_id) {
      if (auto conversation = storage::find_conversation(c, *row.record.conversation_id)) {
        row.conversation = std::move(conversation->uuid);
      }
    }
    if (row.record.run_id) {
      if (auto run = storage::find_run(c, *row.record.run_id)) {
        row.run = std::move(run->uuid);
      }
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

asio::awaitable<http_response> memory_evidence(state_ptr state, request_context& ctx,
                                               api_caller caller) {
  auto item = visible_item(state, ctx, caller);
  if (!item) {
    co_return not_found("memory");
  }
  storage::page p;
  if (auto wrong = read_page(ctx.request(), p)) {
    co_return *wrong;
  }
  auto reading = read_off_shard(
      state, [memory = item->id, p](auto& c) { return read_evidence_page(c, memory, p); });
  auto read = co_await std::move(reading);
  if (!read) {
    co_return error_response(read.error());
  }
  const auto nullable = [](json_writer& w, const auto& value) {
    if (value) {
      w.value(*value);
    } else {
      w.value(nullptr);
    }
  };
  co_return page_answer(read->rows, read->total, p, [&](json_writer& w, const evidence_row& row) {
    const auto& e = row.record;
    w.begin_object();
    w.key("id").value(e.id);
    w.key("relation").value(e.relation);
    w.key("conversation_id");
    nullable(w, row.conversation);
    w.key("message_id");
    nullable(w, e.message_id);
    w.key("run_id");
    nullable(w, row.run);
    w.key("source").value(e.source);
    w.key("created_at").value(e.created_at);
    w.end_object();
  });
}

} // namespace

void add_memory_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/memories", api_access::user, &list_memories);
  routes.add(http_method::post, "/api/v1/memories", api_access::user, &create_memory);
  routes.add(http_method::post, "/api/v1/memories/import", api_access::user, &import_memories);
  routes.add(http_method::get, "/api/v1/memories/{id}", api_access::user, &get_memory);
  routes.add(http_method::patch, "/api/v1/memories/{id}", api_access::user, &patch_memory);
  routes.add(http_method::del, "/api/v1/memories/{id}", api_access::user, &delete_memory);
  routes.add(http_method::get, "/api/v1/memories/{id}/revisions", api_access::user,
             &memory_revisions);
  routes.add(http_method::get, "/api/v1/memories/{id}/evidence", api_access::user,
             &memory_evidence);
}

} // namespace troupe::api
