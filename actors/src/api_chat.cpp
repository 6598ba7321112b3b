// The chat routes of /api/v1: blocking chat, streamed chat, durable runs with replayable
// events, run status, steps and cancellation.

#include "api_chat.hpp"

#include <charconv>
#include <filesystem>
#include <set>
#include <variant>

#include <simdjson.h>

#include <fmt/format.h>

#include "api_json.hpp"
#include "troupe/actors/bridge.hpp"
#include "troupe/actors/demo_model.hpp"
#include "troupe/net/sse.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/run_event.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

namespace detail {

namespace {

namespace asio = boost::asio;
using closed_atom = caf::atom_constant<caf::atom("closed")>;

constexpr auto write_timeout = std::chrono::seconds(10);

struct sink_state {
  net::response_stream stream;
  std::function<std::string(const journal_entry&)> translate;
  conversation_actor cancel_target;
  std::string run_id;
};

/// A journal follower that also hears from its stream that the client left.
using stream_sink_actor = journal_sink_actor::extend<caf::reacts_to<closed_atom>>;

// Writes a journal to one HTTP stream. Quits when the journal ends (after ending the
// stream), when the client leaves, or when the client falls too far behind (it may
// come back with Last-Event-ID).
stream_sink_actor::behavior_type stream_sink(stream_sink_actor::stateful_pointer<sink_state> self,
                                             sink_state init) {
  self->state = std::move(init);
  return {
      [self](entry_atom, const journal_entry& e) {
        auto& st = self->state;
        auto bytes = st.translate(e);
        if (!bytes.empty()) {
          const auto written = st.stream.try_write(std::move(bytes));
          if (written == net::stream_write_result::full) {
            st.stream.finish();
            self->quit();
            return;
          }
          if (written == net::stream_write_result::closed) {
            self->send(self, closed_atom::value);
            return;
          }
        }
        if (e.last) {
          st.cancel_target = conversation_actor{};
          st.stream.finish();
          self->quit();
        }
      },
      [self](closed_atom) {
        auto& st = self->state;
        if (st.cancel_target) {
          // Anonymous: the conversation's yes or no needs no reader.
          caf::anon_send(st.cancel_target, cancel_atom::value, st.run_id);
        }
        self->quit();
      },
  };
}

std::string storage_status(storage::run_status s) {
  return std::string(storage::to_string(s));
}

} // namespace

void stream_journal(caf::actor_system& system, run_journal_actor journal, std::uint64_t after_seq,
                    net::response_stream stream,
                    std::function<std::string(const journal_entry&)> translate,
                    conversation_actor cancel_target, std::string run_id) {
  sink_state init{stream, std::move(translate), std::move(cancel_target), std::move(run_id)};
  auto sink = system.spawn(stream_sink, std::move(init));
  stream.on_disconnect([weak = caf::actor_cast<caf::weak_actor_ptr>(sink)] {
    if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
      caf::anon_send(caf::actor_cast<stream_sink_actor>(strong), closed_atom::value);
    }
  });
  caf::anon_send(journal, follow_atom::value, journal_sink_actor{sink}, after_seq);
}

expected<storage::agent_record> chat_agent(const api_state& state, const api_caller& caller,
                                           const std::string& agent,
                                           std::optional<net::http_response>& answer) {
  expected<storage::agent_record> found = fail(errc::not_found, "no agent");
  if (agent.empty()) {
    if (!caller.agent_id) {
      answer = net::http_response::error(400, "invalid_argument", "agent: is required");
      return fail(errc::invalid_argument, "agent: is required");
    }
    found = state.reads->with(
        [&](storage::connection& c) { return storage::find_agent(c, *caller.agent_id); });
  } else {
    found = state.reads->with(
        [&](storage::connection& c) { return storage::find_agent_by_name(c, agent); });
    if (!found) {
      found = state.reads->with(
          [&](storage::connection& c) { return storage::find_agent_by_uuid(c, agent); });
    }
  }
  if (!found) {
    answer = net::http_response::error(404, "not_found", fmt::format("no agent '{}'", agent));
    return found;
  }
  if (caller.agent_id && *caller.agent_id != found->id) {
    answer =
        net::http_response::error(403, "forbidden", "this token may only chat with its own agent");
    return fail(errc::permission_denied, "token scoped to another agent");
  }
  return found;
}

asio::awaitable<expected<storage::conversation_record>>
new_conversation(std::shared_ptr<api_state> state, api_caller caller, storage::agent_record agent,
                 std::string first_message, std::vector<chat_message> history) {
  storage::conversation_record c;
  c.uuid = new_uuid();
  c.owner_user_id = caller.user_id;
  c.agent_id = agent.id;
  auto title = first_message.substr(0, first_message.find('\n'));
  if (title.size() > 80) {
    title.resize(80);
    // Do not cut a UTF-8 sequence in half.
    while (!title.empty() && (static_cast<unsigned char>(title.back()) & 0xC0) == 0x80) {
      title.pop_back();
    }
    if (!title.empty() && (static_cast<unsigned char>(title.back()) & 0x80) != 0) {
      title.pop_back();
    }
  }
  c.title = title;
  c.created_at = storage::now_millis();
  auto pending = write(
      *state->system, state->writer,
      storage::make_write("create conversation",
                          [c, history](storage::connection& conn) -> expected<storage::row_id> {
                            auto id = storage::insert_conversation(conn, c);
                            if (!id) {
                              return id;
                            }
                            for (const auto& m : history) {
                              storage::message_record r;
                              r.conversation_id = *id;
                              r.role = std::string(to_string(m.role));
                              r.content = m.content;
                              if (auto added = storage::insert_message(conn, r); !added) {
                                return tl::unexpected(added.error());
                              }
                            }
                            return id;
                          }),
      write_timeout);
  auto id = co_await std::move(pending);
  if (!id) {
    co_return tl::unexpected(id.error());
  }
  c.id = *id;
  co_return c;
}

asio::awaitable<expected<run_result>> await_run(const api_state& state, net::request_context& ctx,
                                                const storage::agent_record& agent,
                                                run_journal_actor journal) {
  // How long a blocking request waits beyond the agent's own deadline.
  constexpr auto grace = std::chrono::seconds(60);
  const auto timeout = agent_from_record(agent, "").value_or(agent_settings{}).timeout;
  const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(timeout + grace);
  ctx.extend_deadline(limit);
  auto waiting = ask<run_result>(*state.system, std::move(journal), limit, wait_atom::value);
  co_return co_await std::move(waiting);
}

bool is_demo_agent(const api_state& state, const storage::agent_record& agent) {
  return state.demo && agent.main_model == demo_model_name;
}

std::string run_outcome_json(const api_state& state, const std::string& conversation_id, bool demo,
                             const run_result& r) {
  const auto expires =
      unix_seconds_now() +
      std::chrono::duration_cast<std::chrono::seconds>(state.config.signed_link_ttl).count();
  json_writer w;
  w.begin_object();
  w.key("run_id").value(r.run_id);
  w.key("conversation_id").value(conversation_id);
  w.key("status").value(storage_status(r.status));
  w.key("content").value(r.text);
  if (!r.error.empty()) {
    w.key("error").value(r.error);
  }
  w.key("model").value(r.model);
  w.key("rounds").value(r.rounds);
  w.key("llm_calls").value(r.llm_calls);
  w.key("usage").begin_object();
  w.key("prompt_tokens").value(r.usage.prompt_tokens);
  w.key("completion_tokens").value(r.usage.completion_tokens);
  w.key("total_tokens").value(r.usage.prompt_tokens + r.usage.completion_tokens);
  w.end_object();
  w.key("steps").begin_array();
  for (const auto& s : r.steps) {
    w.begin_object().key("kind").value(s.kind).key("name").value(s.name);
    w.key("status").value(s.status).end_object();
  }
  w.end_array();
  w.key("files").begin_array();
  for (const auto& a : r.artifacts) {
    w.begin_object();
    w.key("name").value(a.name.empty() ? a.path : a.name);
    w.key("path").value(a.path);
    w.key("mime_type").value(a.mime);
    w.key("size_bytes").value(a.size);
    if (!a.file_id.empty()) {
      w.key("id").value(a.file_id);
      w.key("download_url").value(signed_file_link(state.link_secret, a.file_id, expires));
      w.key("download_expires_at").value(expires);
    }
    w.end_object();
  }
  w.end_array();
  w.key("demo").value(demo);
  if (demo) {
    w.key("notice").value(
        "This answer comes from troupe's SCRIPTED DEMO model (a mock), not an LLM. Set "
        "OPENAI_API_KEY or declare [[providers]] and [[agents]] in the config to use a real "
        "model.");
  }
  w.end_object();
  return std::move(w).str();
}

} // namespace detail

namespace {

namespace asio = boost::asio;
using detail::json_body;
using net::http_response;
using net::request_context;
using state_ptr = std::shared_ptr<api_state>;

http_response no_chat() {
  return http_response::error(503, "unavailable", "the chat service is not running");
}

constexpr std::size_t max_attachments = 20;

/// Copies the caller's `files` (found before anything was created) into the
/// conversation's workspace (`<data-dir>/workspaces/<conversation id>/<name>`, never
/// overwriting) and returns the note the message gets, naming where they are; on an I/O
/// failure, the HTTP answer instead.
expected<std::string> attach_files(const api_state& state, const std::string& conversation_id,
                                   const std::vector<storage::file_record>& files,
                                   std::optional<http_response>& answer) {
  if (files.empty()) {
    return std::string();
  }
  const auto workspace = state.data_dir / "workspaces" / conversation_id;
  std::error_code ec;
  std::filesystem::create_directories(workspace, ec);
  if (ec) {
    answer = http_response::error(500, "io_error", "cannot create the conversation's workspace");
    return fail(errc::io_error, ec.message());
  }
  std::vector<std::string> placed;
  for (const auto& f : files) {
    // Names were cleaned at upload (a last path segment); keep them out of dot-files.
    std::string name = f.name.empty() || f.name.front() == '.' ? "file_" + f.uuid : f.name;
    auto target = workspace / name;
    for (int n = 2; std::filesystem::exists(target, ec); ++n) {
      const auto stem = std::filesystem::path(name).stem().string();
      const auto ext = std::filesystem::path(name).extension().string();
      target = workspace / fmt::format("{}-{}{}", stem, n, ext);
    }
    std::filesystem::copy_file(state.data_dir / f.storage_path, target, ec);
    if (!ec) {
      // Readable by the sandbox's uid (the store keeps its copy 0600). The workspaces
      // directory is 0711: nobody else can list it to find the file.
      std::filesystem::permissions(
          target,
          std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
              std::filesystem::perms::group_read | std::filesystem::perms::others_read,
          ec);
    }
    if (ec) {
      answer = http_response::error(
          500, "io_error", fmt::format("files: cannot copy '{}' into the workspace", f.uuid));
      return fail(errc::io_error, ec.message());
    }
    placed.push_back(target.filename().string());
  }
  std::string note = "\n\n[Attached files, in the working directory:";
  for (const auto& p : placed) {
    note += " " + p;
  }
  return note + "]";
}

/// A submitted message with what its answer needs.
struct started_chat {
  submitted_run run;
  storage::agent_record agent;
  bool demo = false;
};

/// Parses {agent, message, conversation_id}, resolves the target and submits.
asio::awaitable<expected<started_chat>> start_chat(state_ptr state, request_context& ctx,
                                                   api_caller caller,
                                                   std::optional<http_response>& answer) {
  json_body body(ctx.request().body);
  body.only({"agent", "message", "conversation_id", "files"});
  auto agent_name = body.text("agent", false, 256);
  auto message = body.text("message", true, detail::max_message_bytes);
  auto conversation_id = body.text("conversation_id", false, 128);
  std::vector<std::string> file_ids;
  if (auto files = body.element("files")) {
    simdjson::dom::array list;
    if (files->get_array().get(list) != simdjson::SUCCESS || list.size() > max_attachments) {
      body.invalid("files",
                   fmt::format("must be an array of at most {} file ids", max_attachments));
    } else {
      for (auto item : list) {
        std::string_view id;
        if (item.get_string().get(id) != simdjson::SUCCESS || id.empty() || id.size() > 128) {
          body.invalid("files", "must hold file ids (strings)");
          break;
        }
        file_ids.emplace_back(id);
      }
    }
  }
  if (!body.ok()) {
    answer = body.error_response();
    co_return fail(errc::invalid_argument, "bad body");
  }
  // Unknown files are refused before anything is created.
  std::vector<storage::file_record> files;
  for (const auto& id : file_ids) {
    auto f = state->reads->with(
        [&](storage::connection& c) { return storage::find_file(c, id, caller.user_id); });
    if (!f) {
      answer = http_response::error(404, "not_found", fmt::format("files: no file '{}'", id));
      co_return tl::unexpected(f.error());
    }
    files.push_back(std::move(*f));
  }
  storage::conversation_record conversation;
  std::optional<storage::agent_record> agent;
  if (conversation_id) {
    auto found = state->reads->with([&](storage::connection& c) {
      return storage::find_conversation_by_uuid(c, *conversation_id, caller.user_id);
    });
    if (!found) {
      answer = http_response::error(404, "not_found", "no such conversation");
      co_return tl::unexpected(found.error());
    }
    conversation = *found;
    auto owner_agent = state->reads->with(
        [&](storage::connection& c) { return storage::find_agent(c, conversation.agent_id); });
    if (!owner_agent) {
      answer = detail::error_response(owner_agent.error());
      co_return tl::unexpected(owner_agent.error());
    }
    if (caller.agent_id && *caller.agent_id != owner_agent->id) {
      answer = http_response::error(404, "not_found", "no such conversation");
      co_return fail(errc::not_found, "conversation of another agent");
    }
    if (agent_name && !agent_name->empty() && *agent_name != owner_agent->name &&
        *agent_name != owner_agent->uuid) {
      answer = http_response::error(
          400, "invalid_argument",
          fmt::format("agent: the conversation belongs to agent '{}'", owner_agent->name));
      co_return fail(errc::invalid_argument, "agent mismatch");
    }
    agent = std::move(*owner_agent);
  } else {
    auto found = detail::chat_agent(*state, caller, agent_name.value_or(""), answer);
    if (!found) {
      co_return tl::unexpected(found.error());
    }
    agent = std::move(*found);
    auto pending = detail::new_conversation(state, caller, *agent, *message, {});
    auto created = co_await std::move(pending);
    if (!created) {
      answer = detail::error_response(created.error());
      co_return tl::unexpected(created.error());
    }
    conversation = std::move(*created);
  }
  auto attached = attach_files(*state, conversation.uuid, files, answer);
  if (!attached) {
    co_return tl::unexpected(attached.error());
  }
  const bool demo = detail::is_demo_agent(*state, *agent);
  chat_submission submission;
  submission.user_id = caller.user_id;
  submission.conversation = conversation;
  submission.text = std::move(*message) + *attached;
  submission.final_data = [state, id = conversation.uuid, demo](const run_result& r) {
    return detail::run_outcome_json(*state, id, demo, r);
  };
  auto pending = state->chat->submit(std::move(submission));
  auto run = co_await std::move(pending);
  if (!run) {
    answer = detail::error_response(run.error());
    co_return tl::unexpected(run.error());
  }
  co_return started_chat{std::move(*run), std::move(*agent), demo};
}

/// `start_chat`, or the answer that refuses it (no chat service, bad request, …).
asio::awaitable<std::variant<started_chat, http_response>>
begin_chat(state_ptr state, request_context& ctx, api_caller caller) {
  if (!state->chat) {
    co_return no_chat();
  }
  std::optional<http_response> answer;
  auto pending = start_chat(state, ctx, caller, answer);
  auto started = co_await std::move(pending);
  if (!started) {
    co_return answer ? std::move(*answer) : detail::error_response(started.error());
  }
  co_return std::move(*started);
}

asio::awaitable<http_response> chat(state_ptr state, request_context& ctx, api_caller caller) {
  auto beginning = begin_chat(state, ctx, caller);
  auto begun = co_await std::move(beginning);
  if (auto* refused = std::get_if<http_response>(&begun)) {
    co_return std::move(*refused);
  }
  auto* started = &std::get<started_chat>(begun);
  auto waiting = detail::await_run(*state, ctx, started->agent, started->run.journal);
  auto result = co_await std::move(waiting);
  if (!result) {
    co_return http_response::error(
        504, "timeout",
        fmt::format("run {} did not end in time: {}", started->run.run_id, result.error().message));
  }
  co_return http_response::json(
      200, detail::run_outcome_json(*state, started->run.conversation_id, started->demo, *result));
}

std::string native_sse(const journal_entry& e) {
  if (e.data.empty()) {
    return {};
  }
  net::sse_event out;
  out.event = e.event;
  out.id = std::to_string(e.seq);
  out.data = e.data;
  return net::format_sse_event(out);
}

asio::awaitable<http_response> chat_stream(state_ptr state, request_context& ctx,
                                           api_caller caller) {
  auto beginning = begin_chat(state, ctx, caller);
  auto begun = co_await std::move(beginning);
  if (auto* refused = std::get_if<http_response>(&begun)) {
    co_return std::move(*refused);
  }
  auto* started = &std::get<started_chat>(begun);
  auto stream = ctx.begin_sse({{"X-Troupe-Run-Id", started->run.run_id},
                               {"X-Troupe-Conversation-Id", started->run.conversation_id}});
  // A client that leaves /chat/stream cancels its run (a durable run is POST /runs).
  detail::stream_journal(*state->system, started->run.journal, 0, stream, native_sse,
                         started->run.conversation, started->run.run_id);
  co_return http_response{};
}

asio::awaitable<http_response> create_run(state_ptr state, request_context& ctx,
                                          api_caller caller) {
  auto beginning = begin_chat(state, ctx, caller);
  auto begun = co_await std::move(beginning);
  if (auto* refused = std::get_if<http_response>(&begun)) {
    co_return std::move(*refused);
  }
  auto* started = &std::get<started_chat>(begun);
  json_writer w;
  w.begin_object().key("run_id").value(started->run.run_id);
  w.key("conversation_id").value(started->run.conversation_id);
  w.key("status").value("queued");
  w.key("events_url").value(fmt::format("/api/v1/runs/{}/events", started->run.run_id));
  w.key("demo").value(started->demo).end_object();
  co_return http_response::json(202, std::move(w).str());
}

/// The caller's run: its row, its conversation, and its live journal when there is one.
struct found_run {
  std::optional<storage::run_record> row;
  std::string conversation_id;
  std::optional<run_directory::entry> live;
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
    return storage::find_conversation_by_uuid(c, out.live->conversation_id, caller.user_id);
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
  std::optional<run_status_view> view;
  if (run->live) {
    auto asking = ask<run_status_view>(*state->system, run->live->journal, std::chrono::seconds(5),
                                       get_atom::value);
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
      w.key("result").raw(
          detail::run_outcome_json(*state, run->conversation_id, false, *view->result));
    }
  }
  w.end_object();
  co_return http_response::json(200, std::move(w).str());
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
      co_return detail::error_response(listed.error());
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

/// Replay of a run whose journal is gone (finished before the retention ran out, or
/// before a restart): what SQLite keeps — the status, the steps, the final answer.
std::string stored_replay(const state_ptr& state, const found_run& run, std::uint64_t after) {
  std::vector<std::pair<std::string, std::string>> entries;
  const auto& row = *run.row;
  {
    json_writer w;
    w.begin_object().key("run_id").value(row.uuid).key("type").value("run.status");
    w.key("status").value(storage::to_string(row.status)).end_object();
    entries.emplace_back("run", std::move(w).str());
  }
  auto steps =
      state->reads->with([&](storage::connection& c) { return storage::list_steps(c, row.id); });
  if (steps) {
    for (const auto& s : *steps) {
      json_writer w;
      w.begin_object().key("run_id").value(row.uuid).key("seq").value(s.seq);
      w.key("kind").value(s.kind).key("name").value(s.name).key("status").value(s.status);
      w.end_object();
      entries.emplace_back(s.kind == "harness" ? "harness" : "step", std::move(w).str());
    }
  }
  std::string content;
  auto messages = state->reads->with(
      [&](storage::connection& c) { return storage::list_messages(c, row.conversation_id); });
  if (messages) {
    for (const auto& m : *messages) {
      if (m.run_id && *m.run_id == row.id && m.role == "assistant" && m.tool_calls_json.empty()) {
        content = m.content;
      }
    }
  }
  {
    json_writer w;
    w.begin_object().key("run_id").value(row.uuid);
    w.key("conversation_id").value(run.conversation_id);
    w.key("status").value(storage::to_string(row.status)).key("content").value(content);
    if (!row.error.empty()) {
      w.key("error").value(row.error);
    }
    w.key("replayed_from").value("database").end_object();
    entries.emplace_back("done", std::move(w).str());
  }
  entries.emplace_back("", "[DONE]");
  std::string out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i + 1 <= after) {
      continue;
    }
    net::sse_event e;
    e.event = entries[i].first;
    e.id = std::to_string(i + 1);
    e.data = entries[i].second;
    net::append_sse_event(out, e);
  }
  return out;
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
    // A follower never cancels: the run is durable.
    detail::stream_journal(*state->system, run->live->journal, after, stream, native_sse,
                           conversation_actor{}, run_id);
    co_return http_response{};
  }
  if (!run->row) {
    stream.finish();
    co_return http_response{};
  }
  stream.try_write(stored_replay(state, *run, after));
  stream.finish();
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
    co_return detail::error_response(cancelled.error());
  }
  if (!*cancelled) {
    co_return http_response::error(409, "conflict", "the run is not active");
  }
  json_writer w;
  w.begin_object().key("run_id").value(run_id).key("status").value("cancelling").end_object();
  co_return http_response::json(202, std::move(w).str());
}

} // namespace

void add_chat_routes(net::router& routes, std::shared_ptr<api_state> state,
                     std::set<std::string>& preflighted) {
  using net::http_method;
  auto add = [&](http_method method, std::string_view pattern, api_handler handler) {
    routes.add(method, pattern, guard(state, api_access::chat, std::move(handler)));
    if (preflighted.emplace(pattern).second) {
      add_preflight(routes, state, pattern);
    }
  };
  add(http_method::post, "/api/v1/chat",
      [state](request_context& ctx, const api_caller& caller) { return chat(state, ctx, caller); });
  add(http_method::post, "/api/v1/chat/stream",
      [state](request_context& ctx, const api_caller& caller) {
        return chat_stream(state, ctx, caller);
      });
  add(http_method::post, "/api/v1/runs", [state](request_context& ctx, const api_caller& caller) {
    return create_run(state, ctx, caller);
  });
  add(http_method::get, "/api/v1/runs/{id}",
      [state](request_context& ctx, const api_caller& caller) {
        return get_run(state, ctx, caller);
      });
  add(http_method::del, "/api/v1/runs/{id}",
      [state](request_context& ctx, const api_caller& caller) {
        return cancel_run(state, ctx, caller);
      });
  add(http_method::get, "/api/v1/runs/{id}/events",
      [state](request_context& ctx, const api_caller& caller) {
        return run_events(state, ctx, caller);
      });
  add(http_method::get, "/api/v1/runs/{id}/steps",
      [state](request_context& ctx, const api_caller& caller) {
        return run_steps(state, ctx, caller);
      });
}

} // namespace troupe::actors
