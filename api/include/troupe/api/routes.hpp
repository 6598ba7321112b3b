#pragma once

/// \file
/// The HTTP layer of a troupe node: the system routes, the native API under `/api/v1`
/// (users, tokens, agents, providers, conversations, files, chat and runs) and the
/// OpenAI-compatible endpoint under `/v1`, over the service facades a node exposes.

#include "troupe/actors/node_services.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::api {

/// Adds every route to `routes`. Loads (or creates) the link-signing key in the data
/// directory, so it can fail.
expected<void> add_routes(net::router& routes, const actors::node_services& services);

/// The first-start bootstrap of the database: an admin token when none is live.
expected<void> prepare_storage(storage::connection& writer, const settings& config);

/// What a node needs to serve this API: `prepare_storage` and `add_routes`.
actors::node_frontend frontend();

} // namespace troupe::api
