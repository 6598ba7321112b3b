// The OpenAI-compatible endpoint: `GET /v1/models` lists the agents a token may use and
// `POST /v1/chat/completions` runs one (model = agent name), its tools server-side,
// streamed or whole. Each request is a new conversation whose history is the request's
// earlier messages, as OpenAI clients resend the whole conversation every time; such a
// conversation is ephemeral (deleted once idle for api.ephemeral_retention_ms, lifecycle.hpp).
// A request with `X-Troupe-Conversation: <id>` continues that conversation of the caller
// instead (its last user message is the new message; the conversation keeps its own
// history and its lifecycle).

#include <memory>
#include <set>

#include <fmt/format.h>
#include <simdjson.h>

#include "chat.hpp"
#include "json.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/run_event.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

http_response openai_error(unsigned status, std::string_view type, std::string_view message,
                           std::string_view param = {}) {
  json_writer w;
  w.begin_object().key("error").begin_object();
  w.key("message").value(message).key("type").value(type);
  if (param.empty()) {
    w.key("param").value(nullptr);
  } else {
    w.key("param").value(param);
  }
  w.key("code").value(type).end_object().end_object();
  return http_response::json(status, std::move(w).str());
}

asio::awaitable<http_response> list_models(state_ptr state, api_caller caller) {
  std::vector<storage::agent_record> agents;
  if (caller.agent_id) {
    auto one = state->reads->with(
        [&](storage::connection& c) { return storage::find_agent(c, *caller.agent_id); });
    if (one) {
      agents.push_back(std::move(*one));
    }
  } else {
    storage::page p;
    p.limit = 1000;
    auto all =
        state->reads->with([&](storage::connection& c) { return storage::list_agents(c, p); });
    if (!all) {
      co_return error_response(all.error());
    }
    agents = std::move(*all);
  }
  json_writer w;
  w.begin_object().key("object").value("list").key("data").begin_array();
  for (const auto& a : agents) {
    w.begin_object().key("id").value(a.name).key("object").value("model");
    w.key("created").value(a.created_at / 1000).key("owned_by").value("troupe").end_object();
  }
  w.end_array().end_object();
  co_return http_response::json(200, std::move(w).str());
}

/// The text of a message's `content`: a string, null, or an array of parts whose text
/// parts are joined.
expected<std::string> content_text(const json_object& message) {
  const auto content = message.element("content");
  if (!content || content->is_null()) {
    return std::string();
  }
  if (content->is_string()) {
    auto text = message.text("content");
    return text ? expected<std::string>(text->value_or(std::string()))
                : expected<std::string>(tl::unexpected(text.error()));
  }
  auto parts = message.objects("content");
  if (!parts) {
    return message.problem("content", "must be a string or an array of parts");
  }
  std::string out;
  for (const auto& part : *parts) {
    auto type = part.text("type");
    auto text = part.text("text");
    if (!type || !text) {
      return tl::unexpected(!type ? type.error() : text.error());
    }
    if (*type == "text" && *text) {
      if (!out.empty()) {
        out += "\n";
      }
      out += **text;
    }
  }
  return out;
}

/// A parsed completion request.
struct completion_input {
  std::string model;
  std::string objective;
  std::vector<chat_message> history;
  bool stream = false;
  bool include_usage = false;
};

std::optional<http_response> parse_completion(std::string_view body, completion_input& in) {
  auto invalid = [](const error& e, std::string param) {
    return openai_error(400, "invalid_request_error", e.message, std::move(param));
  };
  auto root = json_object::parse(body);
  if (!root) {
    return openai_error(400, "invalid_request_error", root.error().message);
  }
  auto model = root->required_text("model", true);
  if (!model) {
    return openai_error(400, "invalid_request_error", model.error().message + " (an agent name)",
                        "model");
  }
  in.model = std::move(*model);
  auto stream = root->boolean("stream");
  if (!stream) {
    return invalid(stream.error(), "stream");
  }
  in.stream = stream->value_or(false);
  auto options = root->object("stream_options");
  if (!options) {
    return invalid(options.error(), "stream_options");
  }
  if (*options) {
    auto usage = (*options)->boolean("include_usage");
    if (!usage) {
      return invalid(usage.error(), "stream_options");
    }
    in.include_usage = usage->value_or(false);
  }
  auto messages = root->objects("messages");
  if (!messages) {
    return invalid(messages.error(), "messages");
  }
  if (messages->empty()) {
    return openai_error(400, "invalid_request_error", "messages: must be a non-empty array",
                        "messages");
  }
  std::string system_text;
  std::vector<chat_message> all;
  for (const auto& m : *messages) {
    auto role = m.required_text("role");
    if (!role) {
      return invalid(role.error(), "messages");
    }
    auto text = content_text(m);
    if (!text) {
      return invalid(text.error(), "messages");
    }
    if (*role == "system" || *role == "developer") {
      if (!system_text.empty()) {
        system_text += "\n";
      }
      system_text += *text;
    } else if (*role == "user") {
      all.push_back(chat_message{chat_role::user, std::move(*text), {}, {}, {}});
    } else if (*role == "assistant") {
      if (!text->empty()) {
        all.push_back(chat_message{chat_role::assistant, std::move(*text), {}, {}, {}});
      }
    }
    // Tool messages of the caller's own tools are not troupe's: its agent runs its tools
    // server-side.
  }
  if (all.empty() || all.back().role != chat_role::user || all.back().content.empty()) {
    return openai_error(400, "invalid_request_error",
                        "messages: the last message must be a non-empty user message", "messages");
  }
  in.objective = std::move(all.back().content);
  all.pop_back();
  if (in.objective.size() > max_message_bytes) {
    return openai_error(
        400, "invalid_request_error",
        fmt::format("messages: the last message is over {} bytes", max_message_bytes), "messages");
  }
  if (!system_text.empty()) {
    in.objective =
        fmt::format("Instructions from the caller:\n{}\n\n{}", system_text, in.objective);
  }
  in.history = std::move(all);
  return std::nullopt;
}

void write_usage(json_writer& w, const token_usage& u) {
  w.key("usage").begin_object();
  w.key("prompt_tokens").value(u.prompt_tokens);
  w.key("completion_tokens").value(u.completion_tokens);
  w.key("total_tokens").value(u.prompt_tokens + u.completion_tokens);
  w.end_object();
}

/// The SSE chunks of one streamed completion, made from the run's journal. Candidate
/// text is relayed as it arrives; a correction is marked (a blank line and a `troupe`
/// field) and the accepted answer follows; text the stream has not shown yet (a
/// `finish` answer, file links) is sent before the end.
class chunk_translator {
public:
  chunk_translator(std::string id, std::string model, bool include_usage)
      : id_(std::move(id)), model_(std::move(model)), include_usage_(include_usage),
        created_(unix_seconds_now()) {}

  std::string operator()(const actors::journal_entry& e) {
    if (e.event() == "message") {
      return message(e.data());
    }
    if (e.event() == "done") {
      return done(e.data());
    }
    return {};
  }

private:
  std::string chunk(std::string_view content, bool correction = false) {
    json_writer w;
    begin(w);
    w.key("choices").begin_array().begin_object().key("index").value(0);
    w.key("delta").begin_object();
    if (!role_sent_) {
      w.key("role").value("assistant");
      role_sent_ = true;
    }
    w.key("content").value(content).end_object();
    w.key("logprobs").value(nullptr).key("finish_reason").value(nullptr).end_object().end_array();
    if (correction) {
      w.key("troupe").begin_object().key("correction").value(true).end_object();
    }
    w.end_object();
    return "data: " + std::move(w).str() + "\n\n";
  }

  void begin(json_writer& w) {
    w.begin_object().key("id").value(id_).key("object").value("chat.completion.chunk");
    w.key("created").value(created_).key("model").value(model_);
  }

  std::string message(std::string_view data) {
    simdjson::dom::element root;
    simdjson::padded_string padded(data);
    if (parser_.parse(padded).get(root) != simdjson::SUCCESS) {
      return {};
    }
    std::string_view type;
    if (root["type"].get_string().get(type) != simdjson::SUCCESS) {
      return {};
    }
    if (type == "model.correction") {
      corrected_ = true;
      streamed_.clear();
      return {};
    }
    std::string_view text;
    if (type != "model.delta" || root["data"]["text"].get_string().get(text) != simdjson::SUCCESS) {
      return {};
    }
    const bool mark = corrected_;
    corrected_ = false;
    streamed_ += text;
    if (mark) {
      return chunk("\n\n", true) + chunk(text);
    }
    return chunk(text);
  }

  std::string done(std::string_view data) {
    simdjson::dom::element root;
    simdjson::padded_string padded(data);
    if (parser_.parse(padded).get(root) != simdjson::SUCCESS) {
      return "data: [DONE]\n\n";
    }
    std::string_view status;
    std::string_view content;
    if (root["status"].get_string().get(status) != simdjson::SUCCESS) {
      status = "failed";
    }
    if (root["content"].get_string().get(content) != simdjson::SUCCESS) {
      content = {};
    }
    std::string out;
    if (status != "succeeded") {
      std::string_view error = "the run did not succeed";
      if (root["error"].get_string().get(error) != simdjson::SUCCESS) {
        error = "the run did not succeed";
      }
      json_writer w;
      w.begin_object().key("error").begin_object().key("message").value(error);
      w.key("type").value("run_failed").key("code").value(status).end_object().end_object();
      out += "data: " + std::move(w).str() + "\n\n";
      out += "data: [DONE]\n\n";
      return out;
    }
    if (content.starts_with(streamed_)) {
      const auto rest = content.substr(streamed_.size());
      if (!rest.empty() || !role_sent_) {
        out += chunk(rest);
      }
    } else {
      out += chunk("\n\n", true);
      out += chunk(content);
    }
    {
      json_writer w;
      begin(w);
      w.key("choices").begin_array().begin_object().key("index").value(0);
      w.key("delta").begin_object().end_object();
      w.key("logprobs").value(nullptr).key("finish_reason").value("stop").end_object();
      w.end_array().end_object();
      out += "data: " + std::move(w).str() + "\n\n";
    }
    if (include_usage_) {
      token_usage u;
      std::uint64_t v = 0;
      if (root["usage"]["prompt_tokens"].get_uint64().get(v) == simdjson::SUCCESS) {
        u.prompt_tokens = v;
      }
      if (root["usage"]["completion_tokens"].get_uint64().get(v) == simdjson::SUCCESS) {
        u.completion_tokens = v;
      }
      json_writer w;
      begin(w);
      w.key("choices").begin_array().end_array();
      write_usage(w, u);
      w.end_object();
      out += "data: " + std::move(w).str() + "\n\n";
    }
    out += "data: [DONE]\n\n";
    return out;
  }

  std::string id_;
  std::string model_;
  bool include_usage_ = false;
  std::int64_t created_ = 0;
  bool role_sent_ = false;
  bool corrected_ = false;
  std::string streamed_;
  simdjson::dom::parser parser_;
};

/// The request header naming a conversation to continue (its id, as X-Troupe-Conversation-Id
/// answers it).
constexpr std::string_view continue_header = "X-Troupe-Conversation";

std::string_view trim_header(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) {
    v.remove_prefix(1);
  }
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) {
    v.remove_suffix(1);
  }
  return v;
}

asio::awaitable<http_response> completions(state_ptr state, request_context& ctx,
                                           api_caller caller) {
  if (!state->chat) {
    co_return openai_error(503, "unavailable", "the chat service is not running");
  }
  completion_input in;
  if (auto bad = parse_completion(ctx.request().body, in)) {
    co_return std::move(*bad);
  }
  std::optional<http_response> answer;
  auto agent = chat_agent(*state, caller, in.model, answer);
  if (!agent) {
    if (answer && answer->status == 404) {
      co_return openai_error(404, "model_not_found",
                             fmt::format("the model '{}' does not exist (models are troupe "
                                         "agent names; see GET /v1/models)",
                                         in.model),
                             "model");
    }
    co_return answer ? std::move(*answer) : error_response(agent.error());
  }
  // A request that names a conversation continues it (its own history, not the request's
  // earlier messages); any other gets a new, ephemeral one.
  const std::string continued(trim_header(ctx.request().header(continue_header)));
  expected<storage::conversation_record> conversation;
  bool created_now = false;
  if (!continued.empty()) {
    conversation = state->reads->with([&](storage::connection& c) {
      return storage::find_conversation_by_uuid(c, continued, caller.user_id);
    });
    if (!conversation) {
      if (conversation.error().code == errc::not_found) {
        co_return openai_error(
            404, "conversation_not_found",
            fmt::format("{}: no conversation '{}' of yours", continue_header, continued));
      }
      co_return error_response(conversation.error());
    }
    if (conversation->agent_id != agent->id) {
      co_return openai_error(400, "invalid_request_error",
                             fmt::format("{}: conversation '{}' is not one of model '{}'",
                                         continue_header, continued, agent->name),
                             "model");
    }
  } else {
    // Stored with its history, the message and its run, in one commit.
    conversation = new_conversation(*state, caller, *agent, in.objective, true);
    created_now = true;
  }
  const bool demo = is_demo_agent(*state, *agent);
  actors::chat_submission submission;
  submission.user_id = caller.user_id;
  submission.conversation = *conversation;
  submission.text = in.objective;
  // A whole (not streamed) answer waits for the run: its journal stays for that wait.
  submission.awaited = !in.stream;
  if (created_now) {
    submission.fresh = actors::chat_submission::fresh_conversation{*agent, std::move(in.history)};
  }
  submission.final_data = [state, id = conversation->uuid, demo](const actors::run_result& r) {
    return run_outcome_json(*state, id, demo, r);
  };
  auto submitting = state->chat->submit(std::move(submission));
  auto run = co_await std::move(submitting);
  if (!run) {
    if (run.error().code == errc::limit_exceeded) {
      // The continued conversation has `actors.max_pending` messages waiting (OpenAI's
      // own type for a 429, so its clients back off and retry).
      auto refused = openai_error(429, "rate_limit_exceeded", run.error().message);
      refused.headers.push_back({"Retry-After", "1"});
      co_return refused;
    }
    co_return submit_refusal(run.error());
  }
  const auto completion_id = "chatcmpl-" + run->run_id;
  if (in.stream) {
    auto stream = ctx.begin_sse(
        {{"X-Troupe-Run-Id", run->run_id}, {"X-Troupe-Conversation-Id", run->conversation_id}});
    auto translator =
        std::make_shared<chunk_translator>(completion_id, agent->name, in.include_usage);
    state->chat->follow(
        *run, 0, stream, [translator](const actors::journal_entry& e) { return (*translator)(e); },
        true);
    co_return http_response{};
  }
  auto waiting = await_run(*state, ctx, *agent, *run);
  auto result = co_await std::move(waiting);
  if (!result) {
    co_return openai_error(504, "timeout", result.error().message);
  }
  if (result->status != storage::run_status::succeeded) {
    // 422, not 5xx: SDKs retry 5xx, and a retry would run the agent again.
    co_return openai_error(422, "run_failed",
                           fmt::format("run {} {}: {}", run->run_id,
                                       storage::to_string(result->status), result->error));
  }
  json_writer w;
  w.begin_object().key("id").value(completion_id).key("object").value("chat.completion");
  w.key("created").value(unix_seconds_now()).key("model").value(agent->name);
  w.key("choices").begin_array().begin_object().key("index").value(0);
  w.key("message").begin_object().key("role").value("assistant");
  w.key("content").value(result->text).key("refusal").value(nullptr).end_object();
  w.key("logprobs").value(nullptr).key("finish_reason").value("stop").end_object().end_array();
  write_usage(w, result->usage);
  w.key("troupe").raw(run_outcome_json(*state, run->conversation_id, demo, *result));
  w.end_object();
  co_return http_response::json(200, std::move(w).str());
}

} // namespace

void add_openai_routes(route_table& routes) {
  using net::http_method;
  const auto& state = routes.state();
  routes.add(
      http_method::get, "/v1/models", api_access::chat,
      [state](request_context&, const api_caller& caller) { return list_models(state, caller); });
  routes.add(http_method::post, "/v1/chat/completions", api_access::chat, &completions);
}

} // namespace troupe::api
