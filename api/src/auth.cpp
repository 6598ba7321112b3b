// Authentication (bearer tokens behind `guard`), per-token rate limits, CORS, token
// minting and the first-start admin token.

#include "troupe/api/auth.hpp"

#include <cmath>

#include <fmt/format.h>

#include "private_file.hpp"
#include "state.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

namespace {

constexpr std::string_view token_prefix = "trp_";

// The bearer token of the request, or empty.
std::string_view bearer_token(const net::http_request& request) {
  auto value = request.header("Authorization");
  if (value.size() <= 7 || !net::iequals(value.substr(0, 7), "Bearer ")) {
    return {};
  }
  value.remove_prefix(7);
  while (!value.empty() && value.front() == ' ') {
    value.remove_prefix(1);
  }
  while (!value.empty() && value.back() == ' ') {
    value.remove_suffix(1);
  }
  return value;
}

net::http_response unauthorized(std::string_view message) {
  auto r = net::http_response::error(401, "unauthenticated", message);
  r.headers.push_back({"WWW-Authenticate", R"(Bearer realm="troupe")"});
  return r;
}

// Runs the guard's checks and then the handler. Parameters by value: this coroutine
// outlives the lambda that started it.
boost::asio::awaitable<net::http_response> run_guarded(std::shared_ptr<api_state> state,
                                                       api_access access, api_handler handler,
                                                       bool charge_address,
                                                       net::request_context& ctx) {
  const auto token = bearer_token(ctx.request());
  const auto address = ctx.remote_address();
  net::http_response response;
  auto* by_address = state->address_limits.get();
  if (auto address_wait = by_address ? by_address->retry_after(address) : std::nullopt) {
    // Before the token is looked up: an address out of attempts learns nothing about the
    // token it sends.
    response = net::http_response::error(
        429, "rate_limited",
        fmt::format("too many requests without a valid token from this address; retry in {} s",
                    *address_wait));
    response.headers.push_back({"Retry-After", std::to_string(*address_wait)});
  } else if (token.empty()) {
    if (by_address) {
      by_address->charge(address);
    }
    response = unauthorized("this route needs an 'Authorization: Bearer <token>' header");
  } else {
    // The hash is looked up (not the token): equal hashes are found by the index, and
    // comparing digests of a secret leaks nothing useful about the secret.
    const auto hash = hash_token(token);
    auto found = state->catalog ? state->catalog->token_by_hash(hash)
                                : state->reads->with([&](storage::connection& c) {
                                    return storage::find_api_token(c, hash);
                                  });
    if (!found) {
      if (found.error().code != errc::not_found) {
        ctx.log().error("token lookup failed: {}", found.error().message);
        response = net::http_response::error(503, "unavailable", "cannot check the token now");
      } else {
        if (by_address) {
          by_address->charge(address);
        }
        response = unauthorized("unknown or revoked token");
      }
    } else {
      api_caller caller{found->user_id, found->id, found->scope, found->agent_id};
      if (access == api_access::admin && !caller.is_admin()) {
        response =
            net::http_response::error(403, "permission_denied", "this route needs an admin token");
      } else if (access == api_access::user && caller.scope == "agent") {
        response = net::http_response::error(403, "permission_denied",
                                             "an agent-scoped token may only use the chat routes");
      } else if (auto wait = state->limiter->take(caller.token_id)) {
        response = net::http_response::error(
            429, "rate_limited", fmt::format("too many requests; retry in {} s", *wait));
        response.headers.push_back({"Retry-After", std::to_string(*wait)});
      } else {
        if (charge_address && by_address) {
          by_address->charge(address);
        }
        // Awaited as a named value: GCC 12 mishandles temporaries in co_await expressions.
        auto pending = handler(ctx, caller);
        response = co_await std::move(pending);
      }
    }
  }
  add_cors_headers(state->config, ctx.request(), response);
  co_return response;
}

} // namespace

std::optional<long> rate_limiter::take(storage::row_id token_id) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  auto [it, fresh] = buckets_.try_emplace(token_id, bucket{burst_, now});
  auto& b = it->second;
  if (!fresh) {
    const std::chrono::duration<double> elapsed = now - b.last;
    b.level = std::min(burst_, b.level + elapsed.count() * rate_);
    b.last = now;
  }
  if (b.level >= 1.0) {
    b.level -= 1.0;
    return std::nullopt;
  }
  return std::max(1L, static_cast<long>(std::ceil((1.0 - b.level) / rate_)));
}

namespace {

/// The bucket key of a client address: 4 bytes for IPv4 (mapped IPv6 included), the
/// /64 prefix (8 bytes) for IPv6.
std::string address_key(const boost::asio::ip::address& address) {
  if (address.is_v4()) {
    const auto b = address.to_v4().to_bytes();
    return std::string(b.begin(), b.end());
  }
  if (address.is_v6()) {
    const auto v6 = address.to_v6();
    if (v6.is_v4_mapped()) {
      const auto b = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_bytes();
      return std::string(b.begin(), b.end());
    }
    const auto b = v6.to_bytes();
    return "6" + std::string(b.begin(), b.begin() + 8);
  }
  return {};
}

} // namespace

address_limiter::address_limiter(double rate, double burst, std::size_t max_addresses)
    : rate_(rate), burst_(burst), max_addresses_(std::max<std::size_t>(1, max_addresses)) {}

address_limiter::bucket& address_limiter::touch(const std::string& key,
                                                std::chrono::steady_clock::time_point now) {
  if (auto it = buckets_.find(key); it != buckets_.end()) {
    order_.splice(order_.begin(), order_, it->second);
    auto& b = *it->second;
    const std::chrono::duration<double> elapsed = now - b.last;
    b.level = std::min(burst_, b.level + elapsed.count() * rate_);
    b.last = now;
    return b;
  }
  if (buckets_.size() >= max_addresses_) {
    buckets_.erase(order_.back().key);
    order_.pop_back();
  }
  order_.push_front(bucket{key, burst_, now});
  buckets_.emplace(key, order_.begin());
  return order_.front();
}

std::optional<long> address_limiter::retry_after(const boost::asio::ip::address& address) {
  const auto key = address_key(address);
  std::lock_guard lock(mutex_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    return std::nullopt;
  }
  const auto& b = touch(key, std::chrono::steady_clock::now());
  if (b.level >= 1.0) {
    return std::nullopt;
  }
  return std::max(1L, static_cast<long>(std::ceil((1.0 - b.level) / rate_)));
}

void address_limiter::charge(const boost::asio::ip::address& address) {
  const auto key = address_key(address);
  std::lock_guard lock(mutex_);
  auto& b = touch(key, std::chrono::steady_clock::now());
  b.level = std::max(0.0, b.level - 1.0);
}

std::size_t address_limiter::size() const {
  std::lock_guard lock(mutex_);
  return buckets_.size();
}

net::route_handler guard(std::shared_ptr<api_state> state, api_access access, api_handler handler) {
  return [state = std::move(state), access, handler = std::move(handler)](
             net::request_context& ctx) { return run_guarded(state, access, handler, false, ctx); };
}

namespace {

/// Routes whose every request counts against the client address's bucket, whatever its
/// token: minting tokens.
bool charges_address(net::http_method method, std::string_view pattern) {
  return method == net::http_method::post && pattern == "/api/v1/tokens";
}

} // namespace

void add_cors_headers(const api_settings& config, const net::http_request& request,
                      net::http_response& response) {
  const auto origin = request.header("Origin");
  if (origin.empty() || config.cors_origins.empty()) {
    return;
  }
  for (const auto& allowed : config.cors_origins) {
    if (allowed == "*" || allowed == origin) {
      response.headers.push_back({"Access-Control-Allow-Origin", std::string(origin)});
      response.headers.push_back({"Vary", "Origin"});
      response.headers.push_back(
          {"Access-Control-Expose-Headers", "Retry-After, X-Request-Id, Content-Disposition"});
      return;
    }
  }
}

namespace {

boost::asio::awaitable<net::http_response> preflight(std::shared_ptr<api_state> state,
                                                     net::request_context& ctx) {
  auto response = net::http_response::text(204, "");
  const auto before = response.headers.size();
  add_cors_headers(state->config, ctx.request(), response);
  if (response.headers.size() != before) {
    response.headers.push_back(
        {"Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS"});
    response.headers.push_back(
        {"Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID"});
    response.headers.push_back({"Access-Control-Max-Age", "600"});
  }
  co_return response;
}

} // namespace

void add_preflight(net::router& routes, std::shared_ptr<api_state> state,
                   std::string_view pattern) {
  routes.add(
      net::http_method::options, pattern,
      [state = std::move(state)](net::request_context& ctx) { return preflight(state, ctx); });
}

void route_table::add(net::http_method method, std::string_view pattern, api_access access,
                      api_handler handler) {
  const bool charged = charges_address(method, pattern);
  routes_.add(
      method, pattern,
      [state = state_, access, handler = std::move(handler), charged](net::request_context& ctx) {
        return run_guarded(state, access, handler, charged, ctx);
      });
  preflight(pattern);
}

void route_table::add_open(net::http_method method, std::string_view pattern,
                           net::route_handler handler) {
  routes_.add(method, pattern, std::move(handler));
  preflight(pattern);
}

void route_table::preflight(std::string_view pattern) {
  if (preflighted_.emplace(pattern).second) {
    add_preflight(routes_, state_, pattern);
  }
}

std::string hash_token(std::string_view token) {
  return sha256_hex(token);
}

expected<minted_token> mint_token() {
  auto bytes = random_bytes(32);
  if (!bytes) {
    return tl::unexpected(bytes.error());
  }
  minted_token t;
  t.token = std::string(token_prefix) + to_hex(*bytes);
  t.hash = hash_token(t.token);
  return t;
}

expected<std::optional<std::filesystem::path>>
bootstrap_admin(storage::connection& writer, const std::filesystem::path& data_dir) {
  auto admins = storage::count_live_admin_tokens(writer);
  if (!admins) {
    return tl::unexpected(admins.error());
  }
  if (*admins > 0) {
    return std::optional<std::filesystem::path>{};
  }
  const auto path = data_dir / "admin.token";
  auto done = storage::in_transaction(writer, [&](storage::connection& c) -> expected<void> {
    storage::row_id user_id = 0;
    if (auto user = storage::find_user_by_name(c, "admin")) {
      user_id = user->id;
    } else {
      storage::user_record u;
      u.name = "admin";
      u.display_name = "Administrator";
      u.role = "admin";
      auto id = storage::insert_user(c, u);
      if (!id) {
        return tl::unexpected(id.error());
      }
      user_id = *id;
    }
    auto minted = mint_token();
    if (!minted) {
      return tl::unexpected(minted.error());
    }
    storage::api_token_record t;
    t.user_id = user_id;
    t.name = "bootstrap admin";
    t.token_hash = minted->hash;
    t.scope = "admin";
    if (auto id = storage::insert_api_token(c, t); !id) {
      return tl::unexpected(id.error());
    }
    // Written before the commit: if the file cannot be written, no token exists that
    // nobody knows.
    return write_private_file(path, minted->token + "\n");
  });
  if (!done) {
    return tl::unexpected(done.error());
  }
  return std::optional<std::filesystem::path>{path};
}

} // namespace troupe::api
