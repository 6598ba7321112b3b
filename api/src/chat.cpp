// The chat routes of /api/v1: blocking chat, streamed chat and durable runs started with
// POST /runs (their status, events, steps and cancellation are in runs.cpp), and what
// the chat routes share with runs.cpp and openai.cpp.

#include "chat.hpp"

#include <charconv>
#include <filesystem>
#include <set>
#include <variant>

#include <simdjson.h>

#include <fmt/format.h>

#include "json.hpp"
#include "troupe/actors/demo_model.hpp"
#include "troupe/api/files.hpp"
#include "troupe/net/sse.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/run_event.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::api {

namespace {

std::string storage_status(storage::run_status s) {
  return std::string(storage::to_string(s));
}

} // namespace

expected<storage::agent_record> chat_agent(const api_state& state, const api_caller& caller,
                                           const std::string& agent,
                                           std::optional<net::http_response>& answer) {
  expected<storage::agent_record> found = fail(errc::not_found, "no agent");
  if (agent.empty()) {
    if (!caller.agent_id) {
      answer = net::http_response::error(400, "invalid_argument", "agent: is required");
      return fail(errc::invalid_argument, "agent: is required");
    }
    found = state.catalog ? state.catalog->agent(*caller.agent_id)
                          : state.reads->with([&](storage::connection& c) {
                              return storage::find_agent(c, *caller.agent_id);
                            });
  } else if (state.catalog) {
    found = state.catalog->agent_by_name_or_uuid(agent);
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

storage::conversation_record new_conversation(const api_state& state, const api_caller& caller,
                                              const storage::agent_record& agent,
                                              std::string_view first_message, bool ephemeral) {
  storage::conversation_record c;
  c.ephemeral = ephemeral;
  // Homed on this request's shard when the chat service runs on shards.
  c.uuid = state.chat ? state.chat->new_conversation_id() : new_uuid();
  c.owner_user_id = caller.user_id;
  c.agent_id = agent.id;
  auto title = std::string(first_message.substr(0, first_message.find('\n')));
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
  return c;
}

asio::awaitable<expected<actors::run_result>> await_run(const api_state& state,
                                                        net::request_context& ctx,
                                                        const storage::agent_record& agent,
                                                        actors::run_ticket run) {
  // How long a blocking request waits beyond the agent's own deadline.
  constexpr auto grace = std::chrono::seconds(60);
  const auto limit = state.chat->run_timeout(agent) + grace;
  ctx.extend_deadline(limit);
  auto waiting = state.chat->wait(std::move(run), limit);
  co_return co_await std::move(waiting);
}

bool is_demo_agent(const api_state& state, const storage::agent_record& agent) {
  return state.demo && agent.main_model == actors::demo_model_name;
}

net::http_response no_chat() {
  return net::http_response::error(503, "unavailable", "the chat service is not running");
}

std::string run_outcome_json(const api_state& state, const std::string& conversation_id, bool demo,
                             const actors::run_result& r) {
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

namespace {

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
  actors::run_ticket run;
  storage::agent_record agent;
  bool demo = false;
};

/// Parses {agent, message, conversation_id}, resolves the target and submits.
asio::awaitable<expected<started_chat>> start_chat(state_ptr state, request_context& ctx,
                                                   api_caller caller,
                                                   std::optional<http_response>& answer,
                                                   bool awaited) {
  json_body body(ctx.request().body);
  body.only({"agent", "message", "conversation_id", "files", "queue_policy"});
  auto agent_name = body.text("agent", false, 256);
  auto message = body.text("message", true, max_message_bytes);
  auto conversation_id = body.text("conversation_id", false, 128);
  // How this message queues while a run of the conversation is active (the agent's
  // policy when absent).
  std::optional<queue_policy> policy;
  if (auto name = body.text("queue_policy", false, 32); name && !name->empty()) {
    auto parsed = parse_queue_policy(*name);
    if (!parsed) {
      body.invalid("queue_policy", "must be followup, steer, interrupt or collect");
    } else {
      policy = *parsed;
    }
  }
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
  bool created_now = false;
  if (conversation_id) {
    auto found = state->reads->with([&](storage::connection& c) {
      return storage::find_conversation_by_uuid(c, *conversation_id, caller.user_id);
    });
    if (!found) {
      answer = http_response::error(404, "not_found", "no such conversation");
      co_return tl::unexpected(found.error());
    }
    conversation = *found;
    auto owner_agent = state->catalog ? state->catalog->agent(conversation.agent_id)
                                      : state->reads->with([&](storage::connection& c) {
                                          return storage::find_agent(c, conversation.agent_id);
                                        });
    if (!owner_agent) {
      answer = error_response(owner_agent.error());
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
    auto found = chat_agent(*state, caller, agent_name.value_or(""), answer);
    if (!found) {
      co_return tl::unexpected(found.error());
    }
    agent = std::move(*found);
    // Stored with the message and its run, in one commit (see chat_submission::fresh).
    conversation = new_conversation(*state, caller, *agent, *message);
    created_now = true;
  }
  auto attached = attach_files(*state, conversation.uuid, files, answer);
  if (!attached) {
    co_return tl::unexpected(attached.error());
  }
  const bool demo = is_demo_agent(*state, *agent);
  actors::chat_submission submission;
  submission.user_id = caller.user_id;
  submission.conversation = conversation;
  submission.text = std::move(*message) + *attached;
  if (created_now) {
    submission.fresh = actors::chat_submission::fresh_conversation{*agent, {}};
  }
  submission.awaited = awaited;
  submission.policy = policy;
  submission.final_data = [state, id = conversation.uuid, demo](const actors::run_result& r) {
    return run_outcome_json(*state, id, demo, r);
  };
  auto pending = state->chat->submit(std::move(submission));
  auto run = co_await std::move(pending);
  if (!run) {
    answer = submit_refusal(run.error());
    co_return tl::unexpected(run.error());
  }
  co_return started_chat{std::move(*run), std::move(*agent), demo};
}

/// `start_chat`, or the answer that refuses it (no chat service, bad request, …).
asio::awaitable<std::variant<started_chat, http_response>>
begin_chat(state_ptr state, request_context& ctx, api_caller caller, bool awaited = false) {
  if (!state->chat) {
    co_return no_chat();
  }
  std::optional<http_response> answer;
  auto pending = start_chat(state, ctx, caller, answer, awaited);
  auto started = co_await std::move(pending);
  if (!started) {
    co_return answer ? std::move(*answer) : error_response(started.error());
  }
  co_return std::move(*started);
}

asio::awaitable<http_response> chat(state_ptr state, request_context& ctx, api_caller caller) {
  // Answered when the run ends: its journal stays for this wait.
  auto beginning = begin_chat(state, ctx, caller, true);
  auto begun = co_await std::move(beginning);
  if (auto* refused = std::get_if<http_response>(&begun)) {
    co_return std::move(*refused);
  }
  auto* started = &std::get<started_chat>(begun);
  auto waiting = await_run(*state, ctx, started->agent, started->run);
  auto result = co_await std::move(waiting);
  if (!result) {
    co_return http_response::error(
        504, "timeout",
        fmt::format("run {} did not end in time: {}", started->run.run_id, result.error().message));
  }
  co_return http_response::json(
      200, run_outcome_json(*state, started->run.conversation_id, started->demo, *result));
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
  // No translator: the journal's own SSE frames, encoded once for every follower.
  state->chat->follow(started->run, 0, stream, {}, true);
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

} // namespace

void add_chat_routes(route_table& routes) {
  using net::http_method;
  routes.add(http_method::post, "/api/v1/chat", api_access::chat, &chat);
  routes.add(http_method::post, "/api/v1/chat/stream", api_access::chat, &chat_stream);
  routes.add(http_method::post, "/api/v1/runs", api_access::chat, &create_run);
}

} // namespace troupe::api
