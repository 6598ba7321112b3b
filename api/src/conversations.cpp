// The /api/v1 conversations routes (the caller's own): list, read, messages (with each
// run's steps on request) and delete.

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "json.hpp"
#include "lifecycle.hpp"
#include "state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/runtime/prompt/token_estimate.hpp"
#include "troupe/storage/context_summaries.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/search.hpp"

namespace troupe::api {

namespace {

/// A conversation's fields, into the object `w` has open.
void write_conversation_fields(json_writer& w, const storage::conversation_record& c) {
  w.key("id").value(c.uuid);
  w.key("agent_id").value(c.agent_id);
  w.key("title").value(c.title);
  w.key("archived").value(c.archived);
  w.key("created_at").value(c.created_at);
  w.key("updated_at").value(c.updated_at);
}

void write_conversation(json_writer& w, const storage::conversation_record& c) {
  w.begin_object();
  write_conversation_fields(w, c);
  w.end_object();
}

/// What a message list shows of each run: its public id and, when asked, its steps.
struct run_view {
  std::string uuid;
  std::vector<storage::execution_step_record> steps;
  /// The id of the run's final answer (its last assistant message without tool calls).
  std::int64_t final_message = 0;
};

void write_message(json_writer& w, const storage::message_record& m,
                   const std::map<storage::row_id, run_view>* runs = nullptr,
                   bool with_steps = false) {
  w.begin_object();
  w.key("id").value(m.id);
  w.key("role").value(m.role);
  w.key("content").value(m.content);
  if (!m.tool_calls_json.empty()) {
    w.key("tool_calls").raw(m.tool_calls_json);
  }
  if (!m.tool_call_id.empty()) {
    w.key("tool_call_id").value(m.tool_call_id);
  }
  const run_view* run = nullptr;
  if (m.run_id && runs) {
    if (auto it = runs->find(*m.run_id); it != runs->end()) {
      run = &it->second;
    }
  }
  if (run) {
    w.key("run_id").value(run->uuid);
  }
  w.key("prompt_tokens").value(m.prompt_tokens);
  w.key("completion_tokens").value(m.completion_tokens);
  w.key("created_at").value(m.created_at);
  if (with_steps && run && run->final_message == m.id) {
    // The run's steps ride on its final answer.
    w.key("steps").begin_array();
    for (const auto& st : run->steps) {
      w.begin_object().key("seq").value(st.seq).key("kind").value(st.kind);
      w.key("name").value(st.name).key("status").value(st.status);
      w.key("input").raw(st.input_json.empty() ? std::string_view("null") : st.input_json);
      w.key("output").raw(st.output_json.empty() ? std::string_view("null") : st.output_json);
      w.key("created_at").value(st.created_at);
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
}

std::optional<storage::conversation_record>
own_conversation(const state_ptr& state, request_context& ctx, const api_caller& caller) {
  const std::string uuid(ctx.param("id"));
  auto c = read(state, [&](auto& conn) {
    return storage::find_conversation_by_uuid(conn, uuid, caller.user_id);
  });
  if (!c) {
    return std::nullopt;
  }
  return *c;
}

/// `?q=words`: session search over the caller's messages; each conversation with a match
/// once, best match first, with that match (`message_id`, `role`, `snippet` with the
/// matched words in [ ], `created_at`). At most the 100 best messages are looked at.
asio::awaitable<http_response> search_conversations(state_ptr state, api_caller caller,
                                                    std::string text, storage::page p) {
  storage::search_query q;
  q.owner_user_id = caller.user_id;
  q.text = std::move(text);
  q.limit = 100;
  expected<std::vector<storage::search_hit>> hits;
  if (state->memory) {
    auto searching = state->memory->search_messages(q);
    hits = co_await std::move(searching);
  } else {
    auto searching = read_off_shard(state, [q](auto& c) { return storage::search_messages(c, q); });
    hits = co_await std::move(searching);
  }
  if (!hits) {
    co_return error_response(hits.error());
  }
  std::vector<const storage::search_hit*> best;
  std::set<storage::row_id> seen;
  for (const auto& h : *hits) {
    if (seen.insert(h.conversation_id).second) {
      best.push_back(&h);
    }
  }
  const auto total = static_cast<std::int64_t>(best.size());
  // The page's conversations, read together off the shard (by value: the job may outlive
  // this frame); one deleted since the search is left out.
  std::vector<const storage::search_hit*> shown;
  std::vector<storage::row_id> ids;
  for (auto i = static_cast<std::size_t>(std::min(p.offset, total));
       i < best.size() && static_cast<std::int64_t>(i) < p.offset + p.limit; ++i) {
    shown.push_back(best[i]);
    ids.push_back(best[i]->conversation_id);
  }
  using found = std::optional<storage::conversation_record>;
  auto finding = read_off_shard(state, [ids](auto& conn) -> expected<std::vector<found>> {
    std::vector<found> rows;
    for (const auto id : ids) {
      auto c = storage::find_conversation(conn, id);
      rows.push_back(c ? found(std::move(*c)) : std::nullopt);
    }
    return rows;
  });
  auto page = co_await std::move(finding);
  if (!page) {
    co_return error_response(page.error());
  }
  json_writer w;
  w.begin_object().key("data").begin_array();
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const auto& c = (*page)[i];
    if (!c) {
      continue;
    }
    const auto* h = shown[i];
    w.begin_object();
    write_conversation_fields(w, *c);
    w.key("match").begin_object().key("message_id").value(h->message_id);
    w.key("role").value(h->role).key("snippet").value(h->snippet);
    w.key("created_at").value(h->created_at).end_object();
    w.end_object();
  }
  w.end_array().key("total").value(total).key("limit").value(p.limit);
  w.key("offset").value(p.offset).key("query").value(q.text).end_object();
  co_return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> list_conversations(state_ptr state, request_context& ctx,
                                                  api_caller caller) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  if (auto text = ctx.request().query_param("q"); !text.empty()) {
    if (text.size() > 1024) {
      co_return http_response::error(400, "invalid_argument", "q: at most 1024 bytes");
    }
    auto searching = search_conversations(state, caller, std::move(text), p);
    auto answer = co_await std::move(searching);
    co_return answer;
  }
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_conversations_page(c, caller.user_id, p); },
      [=](auto& c) { return storage::count_conversations(c, caller.user_id); }, write_conversation);
  auto answer = co_await std::move(answering);
  co_return answer;
}

asio::awaitable<http_response> get_conversation(state_ptr state, request_context& ctx,
                                                api_caller caller) {
  auto c = own_conversation(state, ctx, caller);
  if (!c) {
    co_return not_found("conversation");
  }
  co_return one_answer(200, *c, write_conversation);
}

asio::awaitable<http_response> conversation_messages(state_ptr state, request_context& ctx,
                                                     api_caller caller) {
  auto conv = own_conversation(state, ctx, caller);
  if (!conv) {
    co_return not_found("conversation");
  }
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  // `?steps=true`: each run's steps on its final answer.
  const bool with_steps = ctx.request().query_param("steps") == "true";
  // The page, its total and each of its runs, read together off the shard (by value: the
  // job may outlive this frame).
  struct message_page {
    counted_rows<storage::message_record> page;
    std::map<storage::row_id, run_view> runs;
  };
  auto reading = read_off_shard(
      state, [conversation = conv->id, p, with_steps](auto& c) -> expected<message_page> {
        message_page out;
        auto page = read_counted(
            c, [&](auto& conn) { return storage::list_messages_page(conn, conversation, p); },
            [&](auto& conn) { return storage::count_messages(conn, conversation); });
        if (!page) {
          return tl::unexpected(page.error());
        }
        for (const auto& m : page->rows) {
          if (!m.run_id) {
            continue;
          }
          auto [it, added] = out.runs.try_emplace(*m.run_id);
          if (!added) {
            continue;
          }
          auto run = storage::find_run(c, *m.run_id);
          it->second.uuid = run ? run->uuid : std::string();
          if (with_steps) {
            // The final answer may be past this page; then no message here carries the steps.
            it->second.final_message = storage::final_answer_id(c, *m.run_id).value_or(0);
            if (auto steps = storage::list_steps(c, *m.run_id)) {
              it->second.steps = std::move(*steps);
            }
          }
        }
        out.page = std::move(*page);
        return out;
      });
  auto loaded = co_await std::move(reading);
  if (!loaded) {
    co_return error_response(loaded.error());
  }
  auto& runs = loaded->runs;
  auto& window = loaded->page;
  co_return page_answer(window.rows, window.total, p,
                        [&](json_writer& w, const storage::message_record& m) {
                          write_message(w, m, &runs, with_steps);
                        });
}

/// What the conversation's next prompt would carry (issue 16): the summary it starts
/// from, the messages kept, and the estimate of each part. Asked of the live
/// conversation when it is in memory (what its next run starts from), else rebuilt from
/// the database as it would load. Only the prompt is compressed: `/messages` lists every
/// message.
asio::awaitable<http_response> conversation_context(state_ptr state, request_context& ctx,
                                                    api_caller caller) {
  auto conv = own_conversation(state, ctx, caller);
  if (!conv) {
    co_return not_found("conversation");
  }
  actors::prompt_context_view view;
  if (state->chat) {
    auto asking = state->chat->context(conv->uuid);
    auto asked = co_await std::move(asking);
    if (!asked) {
      co_return error_response(asked.error());
    }
    view = std::move(*asked);
  } else {
    // No chat service (a node that runs no agents): the stored history alone.
    auto queued = read(state, [&](auto& c) { return storage::queued_run_ids(c, conv->id); });
    if (!queued) {
      co_return error_response(queued.error());
    }
    auto history = read(state, [&](auto& c) {
      return storage::load_prompt_history(c, conv->id, state->history_messages,
                                          state->history_max_tokens, *queued);
    });
    if (!history) {
      co_return error_response(history.error());
    }
    view.source = "stored";
    view.messages = std::move(history->messages);
    view.history_tokens = history->estimated_tokens;
    view.estimated_tokens = history->estimated_tokens;
  }
  const bool summarised = std::any_of(view.messages.begin(), view.messages.end(),
                                      [](const chat_message& m) { return prompt::is_summary(m); });
  std::optional<storage::context_summary_record> summary;
  if (summarised) {
    auto latest =
        read(state, [&](auto& c) { return storage::latest_context_summary(c, conv->id); });
    if (!latest) {
      co_return error_response(latest.error());
    }
    summary = std::move(*latest);
  }
  json_writer w;
  w.begin_object().key("conversation_id").value(conv->uuid);
  w.key("source").value(view.source).key("run_active").value(view.run_active);
  w.key("summary");
  if (summary) {
    const auto& s = *summary;
    w.begin_object().key("text").value(s.summary);
    w.key("tokens").value(prompt::estimate_tokens(s.summary));
    w.key("messages_covered").value(s.covered_messages);
    w.key("first_message_id").value(s.first_message_id);
    w.key("last_message_id").value(s.last_message_id);
    w.key("tokens_before").value(s.tokens_before).key("tokens_after").value(s.tokens_after);
    w.key("model").value(s.model);
    w.key("created_at").value(s.created_at).end_object();
  } else {
    w.value(nullptr);
  }
  w.key("messages").begin_array();
  for (const auto& m : view.messages) {
    w.begin_object().key("role").value(to_string(m.role)).key("content").value(m.content);
    w.key("summary").value(prompt::is_summary(m)).end_object();
  }
  w.end_array();
  w.key("history_tokens").value(view.history_tokens);
  w.key("system_tokens").value(view.system_tokens);
  w.key("tool_tokens").value(view.tool_tokens);
  w.key("estimated_tokens").value(view.estimated_tokens);
  w.key("memory_max_chars").value(view.memory_max_chars);
  w.key("context_window").value(view.context_window);
  w.key("compression_trigger_tokens").value(view.compression_trigger_tokens);
  w.key("history_max_tokens").value(state->history_max_tokens);
  w.end_object();
  co_return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> delete_conversation(state_ptr state, request_context& ctx,
                                                   api_caller caller) {
  auto conv = own_conversation(state, ctx, caller);
  if (!conv) {
    co_return not_found("conversation");
  }
  auto active = read(state, [&](auto& c) { return storage::has_active_run(c, conv->id); });
  if (!active) {
    co_return error_response(active.error());
  }
  if (*active) {
    co_return http_response::error(409, "conflict",
                                   "a run of this conversation is active; cancel it first");
  }
  // The rows, then the workspace and the files' bytes.
  auto discarding = discard_conversation(state, *conv);
  auto done = co_await std::move(discarding);
  if (!done) {
    co_return error_response(done.error());
  }
  co_return http_response{204, "application/json", {}, {}};
}

} // namespace

void add_conversation_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::get, "/api/v1/conversations", api_access::user, &list_conversations);
  routes.add(http_method::get, "/api/v1/conversations/{id}", api_access::user, &get_conversation);
  routes.add(http_method::get, "/api/v1/conversations/{id}/messages", api_access::user,
             &conversation_messages);
  routes.add(http_method::get, "/api/v1/conversations/{id}/context", api_access::user,
             &conversation_context);
  routes.add(http_method::del, "/api/v1/conversations/{id}", api_access::user,
             &delete_conversation);
}

} // namespace troupe::api
