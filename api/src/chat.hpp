#pragma once

// Private to api/: what the native chat and run routes (chat.cpp, runs.cpp) and the
// OpenAI-compatible endpoint (openai.cpp) share — resolving an agent for a caller,
// creating a conversation, waiting for a run, and the JSON of a run's outcome.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "state.hpp"
#include "troupe/actors/chat_facade.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/chat.hpp"

namespace troupe::api {

/// The agent named by `agent` (name or uuid) that `caller` may chat with; on failure the
/// HTTP answer (404 unknown, 403 for an agent-scoped token naming another agent).
/// An empty `agent` with an agent-scoped token means that token's agent.
expected<storage::agent_record> chat_agent(const api_state& state, const api_caller& caller,
                                           const std::string& agent,
                                           std::optional<net::http_response>& answer);

/// A new conversation of `caller` with `agent`, titled after `first_message`, not yet
/// stored (id 0): submitted with `chat_submission::fresh`, its row is written with its
/// first message and run, in one commit. `ephemeral`: deleted once idle for
/// `api.ephemeral_retention_ms` (lifecycle.hpp).
storage::conversation_record new_conversation(const api_state& state, const api_caller& caller,
                                              const storage::agent_record& agent,
                                              std::string_view first_message,
                                              bool ephemeral = false);

/// The largest user message a chat route takes.
inline constexpr std::size_t max_message_bytes = 256 * 1024;

/// Waits for the end of `run`: the request's deadline is extended to the agent's
/// timeout plus a grace, and so is the wait.
boost::asio::awaitable<expected<actors::run_result>> await_run(const api_state& state,
                                                               net::request_context& ctx,
                                                               const storage::agent_record& agent,
                                                               actors::run_ticket run);

/// Whether answers of `agent` come from the scripted demo model.
bool is_demo_agent(const api_state& state, const storage::agent_record& agent);

/// The JSON of a run's outcome: run and conversation ids, status, content, error, usage,
/// model, rounds, steps summary, files with signed download links, and the demo notice.
std::string run_outcome_json(const api_state& state, const std::string& conversation_id, bool demo,
                             const actors::run_result& r);

/// 503: no chat service.
net::http_response no_chat();

} // namespace troupe::api
