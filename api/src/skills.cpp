// The /api/v1/skills routes (issue 19): the node's skills as last loaded from the
// `[skills]` folders, with each one's availability and whether it is a tool, and every
// SKILL.md that could not be loaded with its file, line and problem. Read with user
// tokens; the folders are changed on disk (the node reloads them by itself).

#include "json.hpp"
#include "state.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::api {

namespace {

void write_skill(json_writer& w, const actors::skill_info& s, bool with_body) {
  w.begin_object().key("name").value(s.name).key("description").value(s.description);
  w.key("version").value(s.version).key("triggers").begin_array();
  for (const auto& t : s.triggers) {
    w.value(t);
  }
  w.end_array();
  w.key("file").value(s.file).key("dir").value(s.dir);
  w.key("status").value(s.available ? "available" : "unavailable");
  w.key("available").value(s.available);
  if (!s.available) {
    w.key("reason").value(s.reason);
  }
  w.key("tool").value(s.tool);
  if (!s.run_script.empty()) {
    w.key("script").value(s.run_script);
  }
  if (!s.input_schema.empty()) {
    w.key("input_schema").raw(s.input_schema);
  }
  w.key("requires_bins").begin_array();
  for (const auto& b : s.required_bins) {
    w.value(b);
  }
  w.end_array();
  if (!s.approval.empty()) {
    w.key("approval").value(s.approval);
  }
  if (with_body) {
    w.key("body").value(s.body);
  }
  w.end_object();
}

void write_problem(json_writer& w, const actors::skill_problem_info& p) {
  w.begin_object().key("file").value(p.file).key("line").value(p.line);
  w.key("message").value(p.message).end_object();
}

asio::awaitable<http_response> list_skills(state_ptr state, request_context&) {
  if (!state->skills) {
    co_return http_response::error(503, "unavailable", "this node loads no skills");
  }
  const auto view = state->skills->current();
  json_writer w;
  w.begin_object().key("generation").value(view.generation).key("dirs").begin_array();
  for (const auto& d : view.dirs) {
    w.value(d);
  }
  w.end_array().key("data").begin_array();
  for (const auto& s : view.skills) {
    write_skill(w, s, false);
  }
  w.end_array().key("problems").begin_array();
  for (const auto& p : view.problems) {
    write_problem(w, p);
  }
  w.end_array().end_object();
  co_return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> get_skill(state_ptr state, request_context& ctx) {
  if (!state->skills) {
    co_return http_response::error(503, "unavailable", "this node loads no skills");
  }
  const std::string name(ctx.param("name"));
  const auto view = state->skills->current();
  for (const auto& s : view.skills) {
    if (s.name == name) {
      json_writer w;
      write_skill(w, s, true);
      co_return http_response::json(200, std::move(w).str());
    }
  }
  co_return not_found("skill");
}

} // namespace

void add_skill_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/skills", api_access::user, &list_skills);
  routes.add(http_method::get, "/api/v1/skills/{name}", api_access::user, &get_skill);
}

} // namespace troupe::api
