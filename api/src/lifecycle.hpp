#pragma once

// Private to api/: how a conversation leaves, with everything it left on disk, and the
// expiry of the ephemeral conversations the OpenAI-compatible route creates.

#include <cstddef>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "state.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::api {

/// Deletes `conversation` (its messages, runs and files' rows, in one write), then the bytes
/// of its files and its workspace (on the blocking pool). A failure to remove bytes is
/// logged, not returned: the rows are gone by then.
boost::asio::awaitable<expected<void>>
discard_conversation(state_ptr state, storage::conversation_record conversation);

/// Deletes, with their workspaces and files, the ephemeral conversations idle for longer
/// than `api.ephemeral_retention_ms` with no queued or running run (at most `batch`);
/// returns how many went.
boost::asio::awaitable<expected<std::size_t>> expire_ephemeral_conversations(state_ptr state,
                                                                             std::size_t batch);

/// Runs `expire_ephemeral_conversations` on `executor` at start and then every quarter of
/// the retention (1 s to 60 s). Holds the state weakly: it ends once the routes are gone.
void start_ephemeral_expiry(const state_ptr& state, boost::asio::any_io_executor executor);

} // namespace troupe::api
