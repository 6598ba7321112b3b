#include "troupe/runtime/chat.hpp"

#include <algorithm>

namespace troupe {

std::string_view to_string(chat_role r) noexcept {
  switch (r) {
    case chat_role::system:
      return "system";
    case chat_role::user:
      return "user";
    case chat_role::assistant:
      return "assistant";
    case chat_role::tool:
      return "tool";
  }
  return "user";
}

std::string_view to_string(finish_reason r) noexcept {
  switch (r) {
    case finish_reason::stop:
      return "stop";
    case finish_reason::length:
      return "length";
    case finish_reason::tool_calls:
      return "tool_calls";
    case finish_reason::content_filter:
      return "content_filter";
    case finish_reason::other:
      return "other";
  }
  return "other";
}

std::string_view to_string(provider_failure f) noexcept {
  switch (f) {
    case provider_failure::rate_limited:
      return "rate_limited";
    case provider_failure::auth_failed:
      return "auth_failed";
    case provider_failure::not_found:
      return "not_found";
    case provider_failure::timeout:
      return "timeout";
    case provider_failure::server_error:
      return "server_error";
    case provider_failure::malformed_response:
      return "malformed_response";
    case provider_failure::content_filtered:
      return "content_filtered";
    case provider_failure::context_overflow:
      return "context_overflow";
    case provider_failure::truncated:
      return "truncated";
    case provider_failure::connection_lost:
      return "connection_lost";
    case provider_failure::bad_request:
      return "bad_request";
    case provider_failure::cancelled:
      return "cancelled";
  }
  return "server_error";
}

bool is_retryable(provider_failure f) noexcept {
  return f == provider_failure::rate_limited || f == provider_failure::server_error ||
         f == provider_failure::timeout || f == provider_failure::connection_lost;
}

std::optional<provider_failure> failure_for(finish_reason r) noexcept {
  switch (r) {
    case finish_reason::length:
      return provider_failure::truncated;
    case finish_reason::content_filter:
      return provider_failure::content_filtered;
    default:
      return std::nullopt;
  }
}

tool_call& completion_builder::call_at(std::size_t index) {
  const auto it = std::find(indices_.begin(), indices_.end(), index);
  if (it != indices_.end()) {
    return result_.tool_calls[static_cast<std::size_t>(it - indices_.begin())];
  }
  indices_.push_back(index);
  return result_.tool_calls.emplace_back();
}

void completion_builder::apply(const stream_event& e) {
  using kind = stream_event::kind;
  switch (e.type) {
    case kind::text_delta:
      result_.text += e.text;
      break;
    case kind::reasoning_delta:
      result_.reasoning += e.text;
      break;
    case kind::tool_call_start: {
      auto& call = call_at(e.index);
      call.id = e.id;
      call.name = e.name;
      break;
    }
    case kind::tool_call_delta:
      call_at(e.index).arguments += e.text;
      break;
    case kind::tool_call_complete: {
      auto& call = call_at(e.index);
      if (!e.id.empty()) {
        call.id = e.id;
      }
      if (!e.name.empty()) {
        call.name = e.name;
      }
      call.arguments = e.text;
      break;
    }
    case kind::usage:
      result_.usage = e.usage;
      break;
    case kind::finish:
      result_.finish = e.reason;
      break;
  }
}

} // namespace troupe
