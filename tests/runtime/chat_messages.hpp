#pragma once

/// \file
/// Builders of the chat messages the prompt tests (assembly, compression) arrange into
/// histories: a user or assistant message, an assistant message calling `read` once per
/// id, and a tool result answering one of those calls.

#include <string>
#include <utility>
#include <vector>

#include "troupe/runtime/chat.hpp"

namespace troupe::test_messages {

inline chat_message user(std::string text) {
  return {chat_role::user, std::move(text), {}, {}, {}};
}
inline chat_message assistant(std::string text) {
  return {chat_role::assistant, std::move(text), {}, {}, {}};
}
inline chat_message calls(std::vector<std::string> ids) {
  chat_message m{chat_role::assistant, "", {}, {}, {}};
  for (auto& id : ids) {
    m.tool_calls.push_back({id, "read", R"({"file_path":"notes.txt"})"});
  }
  return m;
}
inline chat_message result(std::string id, std::string text) {
  return {chat_role::tool, std::move(text), {}, std::move(id), "read"};
}

} // namespace troupe::test_messages
