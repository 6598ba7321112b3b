#pragma once

// Private to api/: what every resource's routes share (the services, the settings, the
// link key, the rate limiter), how they read and write the database, and the table that
// adds a guarded route with its CORS preflight.

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "json.hpp"
#include "troupe/actors/approvals_facade.hpp"
#include "troupe/actors/channel_facade.hpp"
#include "troupe/actors/chat_facade.hpp"
#include "troupe/actors/mcp_facade.hpp"
#include "troupe/actors/memory_facade.hpp"
#include "troupe/actors/skills_facade.hpp"
#include "troupe/actors/store_facade.hpp"
#include "troupe/actors/tools_facade.hpp"
#include "troupe/api/auth.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/settings.hpp"
#include "troupe/storage/catalog_cache.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/secret_box.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::api {

// The names every resource file uses.
namespace asio = boost::asio;
using net::http_response;
using net::request_context;

/// The sessions of `/mcp` (mcp_endpoint.cpp).
struct mcp_sessions;

/// Everything the API routes share.
struct api_state {
  /// Database reads (on the calling thread; SQLite reads may block briefly).
  std::shared_ptr<storage::read_pool> reads;
  /// Tokens, agents and providers from memory; null: read from `reads`. Every write
  /// through `store` below invalidates it.
  std::shared_ptr<storage::catalog_cache> catalog;
  /// Database writes, through the store_writer.
  std::shared_ptr<actors::store_facade> store;
  /// Starts and follows agent runs; null: the chat routes answer 503.
  std::shared_ptr<actors::chat_facade> chat;
  /// Messaging channels' inbound webhooks; null: they answer 503.
  std::shared_ptr<actors::channel_facade> channels;
  /// Changes of durable memory through each user's memory writer; null: straight to the
  /// store (the changes are still applied one at a time by the store_writer).
  std::shared_ptr<actors::memory_facade> memory;
  /// Custom tools and search engines of the running node (issue 18); null: changes are
  /// stored and reach runs at the next start.
  std::shared_ptr<actors::tools_facade> tools;
  /// The node's skills (issue 19); null: the skill routes answer 503.
  std::shared_ptr<actors::skills_facade> skills;
  /// Decisions reach waiting runs here (issue 19); null: decisions are only stored.
  std::shared_ptr<actors::approvals_facade> approvals;
  api_settings config;
  /// How a conversation's earlier turns are loaded into a prompt (`actors.history_messages`,
  /// `actors.history_max_tokens`), for the context route.
  std::size_t history_messages = 100;
  std::uint32_t history_max_tokens = 0;
  /// Providers declared in the config: their inline keys never reach the database.
  std::vector<provider_settings> declared_providers;
  std::filesystem::path data_dir;
  /// The key signing file links (`<data-dir>/link.secret`).
  std::string link_secret;
  /// Seals provider keys set over the API and opens them to list a provider's models.
  std::shared_ptr<const storage::secret_box> secrets;
  /// Which variables `api_key_ref` may name (`[secrets] allowed_env`).
  key_env_policy key_env;
  std::shared_ptr<rate_limiter> limiter;
  /// Requests without a valid token (and token minting), per client address; null: no
  /// such limit.
  std::shared_ptr<address_limiter> address_limits;
  /// The embedded catalog's agent answers with the scripted demo model.
  bool demo = false;
  /// The node's MCP servers (`/api/v1/runtime/mcp`); null: the routes answer 503.
  std::shared_ptr<actors::mcp_facade> mcp;
  /// `/mcp`: its sessions (mcp_endpoint.cpp); created with the routes.
  std::shared_ptr<mcp_sessions> mcp_session_table;
  /// Runs a job that may block (removing files) on the node's blocking pool; empty: inline.
  std::function<boost::asio::awaitable<expected<void>>(std::function<expected<void>()>)>
      run_blocking;
};

using state_ptr = std::shared_ptr<api_state>;

/// Runs `job` on the node's blocking pool (`run_blocking`), inline when the node has none.
/// Arguments by value: a coroutine.
inline boost::asio::awaitable<expected<void>> off_the_shard(state_ptr state,
                                                            std::function<expected<void>()> job) {
  if (!state->run_blocking) {
    co_return job();
  }
  // Awaited as a named value: GCC 12 mishandles temporaries in co_await expressions.
  auto running = state->run_blocking(std::move(job));
  auto done = co_await std::move(running);
  co_return done;
}

/// A point read on a pooled connection, on the calling thread (a shard's, for a route):
/// `f(connection&)` returns an expected. Counted on /metrics
/// (`troupe_shard_sqlite_reads_total`); what reads more than a row or two uses
/// `read_off_shard`.
template <class F> auto read(const state_ptr& state, F f) {
  return state->reads->with(std::move(f));
}

/// `f(connection&)` (returning an expected) on the blocking pool with a pooled connection,
/// awaited: for the reads whose cost grows with the data (a search, a page of rows and
/// what each row needs), so that they never hold the shard. Inline without a pool. All of
/// a route's reads go in one `f`: one hand-off there and back. `f` must own what it uses
/// (capture by value, return what it found): past the pool's deadline, or when the node
/// stops, the awaiting coroutine may end while the job still runs.
template <class F>
boost::asio::awaitable<std::invoke_result_t<F&, storage::connection&>>
read_off_shard(state_ptr state, F f) {
  using result = std::invoke_result_t<F&, storage::connection&>;
  auto slot = std::make_shared<std::optional<result>>();
  auto job = [reads = state->reads, f = std::move(f), slot]() mutable -> expected<void> {
    slot->emplace(reads->with(f));
    return {};
  };
  // Awaited as a named value: GCC 12 mishandles temporaries in co_await expressions.
  auto running = off_the_shard(state, std::move(job));
  auto ran = co_await std::move(running);
  if (!ran) {
    co_return result(tl::unexpected(ran.error()));
  }
  co_return std::move(**slot);
}

/// A page of rows and how many there are in all.
template <class Record> struct counted_rows {
  std::vector<Record> rows;
  std::int64_t total = 0;
};

/// `list(c)` (a page of rows) and `count(c)` (their total, in `.count`) on one
/// connection: the page with its total, or the first error.
template <class List, class Count,
          class Rows = typename std::invoke_result_t<List&, storage::connection&>::value_type>
expected<counted_rows<typename Rows::value_type>> read_counted(storage::connection& c, List&& list,
                                                               Count&& count) {
  auto rows = list(c);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  auto total = count(c);
  if (!total) {
    return tl::unexpected(total.error());
  }
  return counted_rows<typename Rows::value_type>{std::move(*rows), total->count};
}

/// `read_counted(list, count)` off the shard (`read_off_shard`; both capture by value).
template <class List, class Count,
          class Rows = typename std::invoke_result_t<List&, storage::connection&>::value_type>
boost::asio::awaitable<expected<counted_rows<typename Rows::value_type>>>
read_page_off_shard(state_ptr state, List list, Count count) {
  auto both = [list = std::move(list), count = std::move(count)](storage::connection& c) mutable {
    return read_counted(c, list, count);
  };
  auto reading = read_off_shard(std::move(state), std::move(both));
  auto read = co_await std::move(reading);
  co_return read;
}

/// A list route's answer: the page `p` read off the shard with its total
/// (`read_page_off_shard`), each row written by `write_one`; an error answers as such.
template <class List, class Count, class Write>
boost::asio::awaitable<net::http_response> page_off_shard(state_ptr state, storage::page p,
                                                          List list, Count count, Write write_one) {
  auto listing = read_page_off_shard(std::move(state), std::move(list), std::move(count));
  auto listed = co_await std::move(listing);
  if (!listed) {
    co_return error_response(listed.error());
  }
  co_return page_answer(listed->rows, listed->total, p, write_one);
}

/// One write through the store facade, awaited; then the catalog cache is invalidated
/// (the routes' writes are the ones that change tokens, users, agents and providers).
/// The result is awaited as a named value: GCC 12 destroys some temporaries of a
/// co_await full-expression twice.
template <class F>
boost::asio::awaitable<expected<std::int64_t>> store(state_ptr state, std::string what, F f) {
  auto pending = state->store->write(storage::make_write(std::move(what), std::move(f)));
  auto done = co_await std::move(pending);
  if (state->catalog) {
    state->catalog->invalidate();
  }
  co_return done;
}

/// Adds routes with their CORS preflight, once per pattern.
class route_table {
public:
  route_table(net::router& routes, state_ptr state) : routes_(routes), state_(std::move(state)) {}

  /// A route behind `guard(access)`, and its preflight.
  void add(net::http_method method, std::string_view pattern, api_access access,
           api_handler handler);

  /// A resource's coroutine, given the shared state and the request (and the caller).
  using caller_route = boost::asio::awaitable<net::http_response> (*)(state_ptr,
                                                                      net::request_context&,
                                                                      api_caller);
  using plain_route = boost::asio::awaitable<net::http_response> (*)(state_ptr,
                                                                     net::request_context&);
  /// `add` for a coroutine function: it is called through a plain lambda with its
  /// arguments by value (a capturing coroutine lambda would dangle after its first
  /// suspension).
  void add(net::http_method method, std::string_view pattern, api_access access,
           caller_route route) {
    add(method, pattern, access,
        [state = state_, route](net::request_context& ctx, const api_caller& caller) {
          return route(state, ctx, caller);
        });
  }
  void add(net::http_method method, std::string_view pattern, api_access access,
           plain_route route) {
    add(method, pattern, access,
        [state = state_, route](net::request_context& ctx, const api_caller&) {
          return route(state, ctx);
        });
  }
  /// A route that authenticates its caller itself, and its preflight.
  void add_open(net::http_method method, std::string_view pattern, net::route_handler handler);
  /// The preflight of `pattern`, unless it has one.
  void preflight(std::string_view pattern);

  const state_ptr& state() const noexcept {
    return state_;
  }

private:
  net::router& routes_;
  state_ptr state_;
  std::set<std::string, std::less<>> preflighted_;
};

// Each resource adds its routes (one file per resource).
void add_user_routes(route_table& routes);
void add_token_routes(route_table& routes);
void add_agent_routes(route_table& routes);
void add_provider_routes(route_table& routes);
void add_conversation_routes(route_table& routes);
void add_file_routes(route_table& routes);
void add_chat_routes(route_table& routes);
void add_run_routes(route_table& routes);
void add_openai_routes(route_table& routes);
void add_memory_routes(route_table& routes);
void add_channel_routes(route_table& routes);
void add_tool_routes(route_table& routes);
void add_skill_routes(route_table& routes);
void add_approval_routes(route_table& routes);
void add_search_engine_routes(route_table& routes);
void add_mcp_routes(route_table& routes);
void add_mcp_endpoint(route_table& routes);

} // namespace troupe::api
