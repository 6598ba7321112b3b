#pragma once

// Private to the API: what the native chat routes (api_chat.cpp) and the
// OpenAI-compatible endpoint (api_openai.cpp) share — resolving an agent and a
// conversation for a caller, submitting a message, and streaming a run's journal.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "troupe/actors/api_routes.hpp"
#include "troupe/actors/chat_service.hpp"
#include "troupe/actors/run_journal.hpp"
#include "troupe/net/http_server.hpp"

namespace troupe::actors::detail {

/// The agent and conversation a message goes to.
struct chat_target {
  storage::agent_record agent;
  storage::conversation_record conversation;
};

/// The agent named by `agent` (name or uuid) that `caller` may chat with; on failure the
/// HTTP answer (404 unknown, 403 for an agent-scoped token naming another agent).
/// An empty `agent` with an agent-scoped token means that token's agent.
expected<storage::agent_record> chat_agent(const api_state& state, const api_caller& caller,
                                           const std::string& agent,
                                           std::optional<net::http_response>& answer);

/// Creates a conversation of `caller` with `agent`, titled after `first_message`, with
/// `history` (user and assistant messages, oldest first) stored as its first messages.
boost::asio::awaitable<expected<storage::conversation_record>>
new_conversation(std::shared_ptr<api_state> state, api_caller caller, storage::agent_record agent,
                 std::string first_message, std::vector<chat_message> history);

/// The largest user message a chat route takes.
inline constexpr std::size_t max_message_bytes = 256 * 1024;

/// Waits for the end of the run behind `journal`: the request's deadline is extended to
/// the agent's timeout plus a grace, and so is the wait.
boost::asio::awaitable<expected<run_result>> await_run(const api_state& state,
                                                       net::request_context& ctx,
                                                       const storage::agent_record& agent,
                                                       run_journal_actor journal);

/// Whether answers of `agent` come from the scripted demo model.
bool is_demo_agent(const api_state& state, const storage::agent_record& agent);

/// The JSON of a run's outcome: run and conversation ids, status, content, error, usage,
/// model, rounds, steps summary, files with signed download links, and the demo notice.
std::string run_outcome_json(const api_state& state, const std::string& conversation_id, bool demo,
                             const run_result& r);

/// Follows `journal` from after `after_seq`, writing what `translate` makes of each
/// entry to `stream`; ends the stream with the journal's last entry. When the client
/// leaves first and `cancel_target` is valid, the run is cancelled there.
void stream_journal(caf::actor_system& system, run_journal_actor journal, std::uint64_t after_seq,
                    net::response_stream stream,
                    std::function<std::string(const journal_entry&)> translate,
                    conversation_actor cancel_target, std::string run_id);

} // namespace troupe::actors::detail
