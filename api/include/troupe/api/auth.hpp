#pragma once

/// \file
/// Who calls the native API and what a token may do: the caller, the access levels of
/// routes, per-token rate limits, the guard that checks a bearer token before a handler
/// runs, CORS, token minting and the first-start admin token.

#include <chrono>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <boost/asio/awaitable.hpp>

#include "troupe/net/http_server.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/runtime/settings.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/records.hpp"

namespace troupe::api {

/// Who is calling: the user and the token that authenticated the request.
struct api_caller {
  storage::row_id user_id = 0;
  storage::row_id token_id = 0;
  /// "admin", "user" or "agent" (chat with `agent_id` only).
  std::string scope;
  std::optional<storage::row_id> agent_id;

  bool is_admin() const noexcept {
    return scope == "admin";
  }
};

/// What a route requires of its caller's token.
enum class api_access {
  /// Admin tokens only (manage agents, providers, users).
  admin,
  /// Admin or user tokens; agent-scoped tokens get 403.
  user,
  /// Any token, agent-scoped ones included (chat routes; the handler must check that an
  /// agent-scoped token names its own agent).
  chat,
};

/// Token buckets, one per token id: `rate` requests per second, up to `burst` at once.
class rate_limiter {
public:
  rate_limiter(double rate, double burst) : rate_(rate), burst_(burst) {}
  /// Takes one request from the token's bucket; when empty, the seconds until one is
  /// available again (at least 1).
  std::optional<long> take(storage::row_id token_id);

private:
  struct bucket {
    double level = 0;
    std::chrono::steady_clock::time_point last;
  };
  double rate_;
  double burst_;
  std::mutex mutex_;
  std::unordered_map<storage::row_id, bucket> buckets_;
};

/// Token buckets, one per client address, for the requests a token does not vouch for:
/// those without a valid token (401) and token minting (`POST /api/v1/tokens`). While an
/// address's bucket is empty, every guarded request from it is answered 429 with
/// Retry-After before its token is looked up, so guessing tokens from one address goes at
/// `rate` per second at most. An IPv6 address counts by its /64 prefix (one host usually
/// holds a whole /64); an IPv4-mapped IPv6 address counts as its IPv4 address. At most
/// `max_addresses` buckets are kept: past that the address seen least recently is
/// forgotten (it would have refilled the soonest), so no flood of addresses grows it.
class address_limiter {
public:
  address_limiter(double rate, double burst, std::size_t max_addresses);

  /// While `address`'s bucket is empty: the seconds until it holds a request again (at
  /// least 1). Takes nothing.
  std::optional<long> retry_after(const boost::asio::ip::address& address);
  /// Takes one request from `address`'s bucket.
  void charge(const boost::asio::ip::address& address);
  /// The addresses tracked now.
  std::size_t size() const;

private:
  struct bucket {
    std::string key;
    double level = 0;
    std::chrono::steady_clock::time_point last;
  };
  using lru_list = std::list<bucket>;
  /// The bucket of `key`, refilled up to now and moved to the front (created full).
  bucket& touch(const std::string& key, std::chrono::steady_clock::time_point now);

  double rate_;
  double burst_;
  std::size_t max_addresses_;
  mutable std::mutex mutex_;
  /// Most recently seen first.
  lru_list order_;
  std::unordered_map<std::string, lru_list::iterator> buckets_;
};

struct api_state;

/// A handler behind `guard`: it gets the authenticated caller.
using api_handler = std::function<boost::asio::awaitable<net::http_response>(net::request_context&,
                                                                             const api_caller&)>;

/// Wraps `handler`: 401 without a live bearer token, 403 when its scope lacks `access`,
/// 429 with Retry-After past the token's rate, CORS headers on the answer.
net::route_handler guard(std::shared_ptr<api_state> state, api_access access, api_handler handler);

/// Adds CORS headers for the request's Origin to `response` when it is allowed.
void add_cors_headers(const api_settings& config, const net::http_request& request,
                      net::http_response& response);

/// Answers CORS preflight (OPTIONS) for `pattern`.
void add_preflight(net::router& routes, std::shared_ptr<api_state> state, std::string_view pattern);

/// A new random token ("trp_" and 64 hex digits) and its stored hash.
struct minted_token {
  std::string token;
  std::string hash;
};
expected<minted_token> mint_token();
/// The hash stored for `token` (SHA-256, hex).
std::string hash_token(std::string_view token);

/// First start: when no live admin token exists, creates the `admin` user (if missing)
/// and an admin token, and writes the token to `<data_dir>/admin.token` (mode 0600).
/// Runs on the writer connection before the store_writer takes it. Returns the file's
/// path when it created a token.
expected<std::optional<std::filesystem::path>>
bootstrap_admin(storage::connection& writer, const std::filesystem::path& data_dir);

} // namespace troupe::api
