#include "troupe/net/wire_encode.hpp"

#include "troupe/net/provider_wire.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "wire_names.hpp"

namespace troupe::net {

namespace oa = wire_names::openai;
namespace an = wire_names::anthropic;

namespace {

/// Usage counts as OpenAI writes them; a missing total is the sum of the other two.
void write_openai_usage(json_writer& w, const token_usage& u) {
  w.key(oa::usage).begin_object();
  w.key(oa::prompt_tokens).value(u.prompt_tokens);
  w.key(oa::completion_tokens).value(u.completion_tokens);
  w.key(oa::total_tokens)
      .value(u.total_tokens != 0 ? u.total_tokens : u.prompt_tokens + u.completion_tokens);
  w.end_object();
}

void write_openai_identity(json_writer& w, const openai_answer_identity& identity,
                           std::string_view object) {
  w.key(oa::id).value(identity.id);
  w.key(oa::object).value(object);
  w.key(oa::created).value(identity.created);
  w.key(oa::model).value(identity.model);
}

bool has_choice(const openai_chunk& c) {
  return c.role || c.content || c.reasoning || !c.tool_calls.empty() || c.finish;
}

} // namespace

std::string sse_data_event(std::string_view data) {
  std::string e;
  e.reserve(data.size() + 8);
  e.append("data: ").append(data).append("\n\n");
  return e;
}

std::string sse_named_event(std::string_view name, std::string_view data) {
  std::string e;
  e.reserve(name.size() + data.size() + 16);
  e.append("event: ").append(name).append("\ndata: ").append(data).append("\n\n");
  return e;
}

// --- OpenAI --------------------------------------------------------------------------------

std::string encode_openai_chunk(const openai_answer_identity& identity, const openai_chunk& chunk) {
  json_writer w;
  w.begin_object();
  write_openai_identity(w, identity, oa::chunk_object);
  w.key(oa::choices).begin_array();
  if (has_choice(chunk)) {
    w.begin_object().key(oa::index).value(0);
    w.key(oa::delta).begin_object();
    if (chunk.role) {
      w.key(oa::role).value(oa::assistant_role);
    }
    if (chunk.content) {
      w.key(oa::content).value(*chunk.content);
    }
    if (chunk.reasoning) {
      w.key(oa::reasoning_content).value(*chunk.reasoning);
    }
    if (!chunk.tool_calls.empty()) {
      w.key(oa::tool_calls).begin_array();
      for (const auto& f : chunk.tool_calls) {
        w.begin_object().key(oa::index).value(f.index);
        if (!f.id.empty()) {
          w.key(oa::id).value(f.id).key(oa::type).value(oa::function_type);
        }
        w.key(oa::function).begin_object();
        if (!f.name.empty()) {
          w.key(oa::name).value(f.name);
        }
        w.key(oa::arguments).value(f.arguments);
        w.end_object().end_object();
      }
      w.end_array();
    }
    w.end_object();
    w.key(oa::logprobs).value(nullptr);
    w.key(oa::finish_reason);
    if (chunk.finish) {
      w.value(openai_finish_word(*chunk.finish));
    } else {
      w.value(nullptr);
    }
    w.end_object();
  }
  w.end_array();
  if (chunk.usage) {
    write_openai_usage(w, *chunk.usage);
  }
  for (const auto& [key, json] : chunk.extensions) {
    w.key(key).raw(json);
  }
  w.end_object();
  return std::move(w).str();
}

std::string openai_chunk_event(const openai_answer_identity& identity, const openai_chunk& chunk) {
  return sse_data_event(encode_openai_chunk(identity, chunk));
}

std::string openai_done_event() {
  return sse_data_event(oa::done_payload);
}

std::string encode_openai_completion(const openai_answer_identity& identity,
                                     const completion& answer) {
  json_writer w;
  w.begin_object();
  write_openai_identity(w, identity, oa::completion_object);
  w.key(oa::choices).begin_array().begin_object();
  w.key(oa::index).value(0);
  w.key(oa::message).begin_object();
  w.key(oa::role).value(oa::assistant_role);
  w.key(oa::content);
  if (answer.text.empty()) {
    w.value(nullptr);
  } else {
    w.value(answer.text);
  }
  if (!answer.reasoning.empty()) {
    w.key(oa::reasoning_content).value(answer.reasoning);
  }
  if (!answer.tool_calls.empty()) {
    w.key(oa::tool_calls).begin_array();
    for (const auto& c : answer.tool_calls) {
      w.begin_object().key(oa::id).value(c.id).key(oa::type).value(oa::function_type);
      w.key(oa::function).begin_object().key(oa::name).value(c.name);
      w.key(oa::arguments).value(c.arguments.empty() ? std::string_view("{}") : c.arguments);
      w.end_object().end_object();
    }
    w.end_array();
  }
  w.end_object();
  w.key(oa::logprobs).value(nullptr);
  w.key(oa::finish_reason).value(openai_finish_word(answer.finish.value_or(finish_reason::stop)));
  w.end_object().end_array();
  if (answer.usage) {
    write_openai_usage(w, *answer.usage);
  }
  w.end_object();
  return std::move(w).str();
}

std::string encode_openai_error(std::string_view type, std::string_view message,
                                std::string_view code) {
  json_writer w;
  w.begin_object().key(oa::error).begin_object();
  w.key("message").value(message).key(oa::type).value(type);
  w.key(oa::code).value(code.empty() ? type : code);
  w.end_object().end_object();
  return std::move(w).str();
}

std::string encode_model_list(const std::vector<std::string>& ids, std::string_view owned_by) {
  json_writer w;
  w.begin_object().key(oa::object).value(oa::list_object).key(oa::data).begin_array();
  for (const auto& id : ids) {
    w.begin_object().key(oa::id).value(id).key(oa::object).value(oa::model_object);
    w.key(oa::owned_by).value(owned_by).end_object();
  }
  w.end_array().end_object();
  return std::move(w).str();
}

// --- Anthropic -----------------------------------------------------------------------------

namespace {

/// `{"type":<type>,"index":<index>,` … the opening every block event shares.
json_writer block_event(std::string_view type, std::size_t index) {
  json_writer w;
  w.begin_object().key(an::type).value(type).key(an::index).value(index);
  return w;
}

std::string finish_event(std::string_view type, json_writer w) {
  w.end_object();
  return sse_named_event(type, std::move(w).str());
}

std::string block_delta_event(std::size_t index, std::string_view delta_type,
                              std::string_view field, std::string_view text) {
  auto w = block_event(an::content_block_delta, index);
  w.key(an::delta).begin_object().key(an::type).value(delta_type).key(field).value(text);
  w.end_object();
  return finish_event(an::content_block_delta, std::move(w));
}

void write_anthropic_usage(json_writer& w, const token_usage& u) {
  w.key(an::usage).begin_object();
  w.key(an::input_tokens).value(u.prompt_tokens);
  w.key(an::output_tokens).value(u.completion_tokens);
  w.end_object();
}

void write_error_object(json_writer& w, std::string_view type, std::string_view message) {
  w.key(an::type).value(an::error_event);
  w.key(an::error).begin_object().key(an::type).value(type).key("message").value(message);
  w.end_object();
}

} // namespace

std::string anthropic_message_start_event(const anthropic_message_identity& identity,
                                          const token_usage& usage) {
  json_writer w;
  w.begin_object().key(an::type).value(an::message_start);
  w.key(an::message).begin_object();
  w.key(an::id).value(identity.id).key(an::type).value(an::message_type);
  w.key(an::role).value(an::assistant_role);
  w.key(an::content).begin_array().end_array();
  w.key(an::model).value(identity.model);
  w.key(an::stop_reason).value(nullptr).key(an::stop_sequence).value(nullptr);
  write_anthropic_usage(w, usage);
  w.end_object();
  return finish_event(an::message_start, std::move(w));
}

std::string anthropic_text_block_start_event(std::size_t index) {
  auto w = block_event(an::content_block_start, index);
  w.key(an::content_block).begin_object();
  w.key(an::type).value(an::text_block).key(an::text).value("").end_object();
  return finish_event(an::content_block_start, std::move(w));
}

std::string anthropic_thinking_block_start_event(std::size_t index) {
  auto w = block_event(an::content_block_start, index);
  w.key(an::content_block).begin_object();
  w.key(an::type).value(an::thinking_block).key(an::thinking).value("").end_object();
  return finish_event(an::content_block_start, std::move(w));
}

std::string anthropic_tool_use_block_start_event(std::size_t index, std::string_view id,
                                                 std::string_view name) {
  auto w = block_event(an::content_block_start, index);
  w.key(an::content_block).begin_object().key(an::type).value(an::tool_use_block);
  w.key(an::id).value(id).key(an::name).value(name);
  w.key(an::input).begin_object().end_object().end_object();
  return finish_event(an::content_block_start, std::move(w));
}

std::string anthropic_text_delta_event(std::size_t index, std::string_view text) {
  return block_delta_event(index, an::text_delta, an::text, text);
}

std::string anthropic_thinking_delta_event(std::size_t index, std::string_view text) {
  return block_delta_event(index, an::thinking_delta, an::thinking, text);
}

std::string anthropic_input_json_delta_event(std::size_t index, std::string_view partial_json) {
  return block_delta_event(index, an::input_json_delta, an::partial_json, partial_json);
}

std::string anthropic_block_stop_event(std::size_t index) {
  return finish_event(an::content_block_stop, block_event(an::content_block_stop, index));
}

std::string anthropic_message_delta_event(finish_reason stop, std::uint64_t output_tokens) {
  json_writer w;
  w.begin_object().key(an::type).value(an::message_delta);
  w.key(an::delta).begin_object();
  w.key(an::stop_reason).value(anthropic_stop_word(stop));
  w.key(an::stop_sequence).value(nullptr).end_object();
  w.key(an::usage).begin_object().key(an::output_tokens).value(output_tokens).end_object();
  return finish_event(an::message_delta, std::move(w));
}

std::string anthropic_message_stop_event() {
  json_writer w;
  w.begin_object().key(an::type).value(an::message_stop);
  return finish_event(an::message_stop, std::move(w));
}

std::string anthropic_error_event(std::string_view type, std::string_view message) {
  json_writer w;
  w.begin_object();
  write_error_object(w, type, message);
  return finish_event(an::error_event, std::move(w));
}

std::string encode_anthropic_message(const anthropic_message_identity& identity,
                                     const completion& answer) {
  json_writer w;
  w.begin_object();
  w.key(an::id).value(identity.id);
  w.key(an::type).value(an::message_type);
  w.key(an::role).value(an::assistant_role);
  w.key(an::model).value(identity.model);
  w.key(an::content).begin_array();
  if (!answer.reasoning.empty()) {
    w.begin_object().key(an::type).value(an::thinking_block);
    w.key(an::thinking).value(answer.reasoning).end_object();
  }
  if (!answer.text.empty()) {
    w.begin_object().key(an::type).value(an::text_block).key(an::text).value(answer.text);
    w.end_object();
  }
  for (const auto& c : answer.tool_calls) {
    w.begin_object().key(an::type).value(an::tool_use_block).key(an::id).value(c.id);
    w.key(an::name).value(c.name);
    w.key(an::input).raw(c.arguments.empty() ? std::string_view("{}") : c.arguments);
    w.end_object();
  }
  w.end_array();
  w.key(an::stop_reason).value(anthropic_stop_word(answer.finish.value_or(finish_reason::stop)));
  w.key(an::stop_sequence).value(nullptr);
  write_anthropic_usage(w, answer.usage.value_or(token_usage{}));
  w.end_object();
  return std::move(w).str();
}

std::string encode_anthropic_error(std::string_view type, std::string_view message) {
  json_writer w;
  w.begin_object();
  write_error_object(w, type, message);
  w.end_object();
  return std::move(w).str();
}

} // namespace troupe::net
