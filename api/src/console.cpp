// The web console's files (web/, embedded at build time): the page at `/`, its assets
// under `/console/<version>/…`. No token: the page holds no data, and signs in with a
// token the user types (kept in session storage, sent as a bearer header to /api/v1).

#include "console.hpp"

#include <algorithm>
#include <string>

#include "console_assets.hpp"

namespace troupe::api {

namespace {

/// The page runs only its own scripts and styles (no inline ones), talks only to this
/// origin, shows images from it (file previews) or made in the page (charts as blob:
/// URLs), and cannot be framed.
constexpr std::string_view content_security_policy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

/// An asset URL names its content's version: it never changes, so a year and immutable.
constexpr std::string_view asset_cache = "public, max-age=31536000, immutable";
/// The page names the current assets: asked again every time (a 304 when unchanged).
constexpr std::string_view page_cache = "no-cache";

void add_security_headers(net::http_response& r) {
  r.headers.push_back({"Content-Security-Policy", std::string(content_security_policy)});
  r.headers.push_back({"X-Content-Type-Options", "nosniff"});
  r.headers.push_back({"Referrer-Policy", "no-referrer"});
  r.headers.push_back({"X-Frame-Options", "DENY"});
  r.headers.push_back({"Cross-Origin-Opener-Policy", "same-origin"});
}

/// True when `If-None-Match` lists `etag` (or is `*`); weak tags compare by their value.
bool matches_etag(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const auto comma = header.find(',');
    auto item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) {
      item.remove_prefix(1);
    }
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) {
      item.remove_suffix(1);
    }
    if (item.starts_with("W/")) {
      item.remove_prefix(2);
    }
    if (item == "*" || item == etag) {
      return true;
    }
  }
  return false;
}

net::http_response serve(const net::request_context& ctx, const console_asset& asset,
                         std::string_view cache) {
  net::http_response r;
  r.headers.push_back({"ETag", std::string(asset.etag)});
  r.headers.push_back({"Cache-Control", std::string(cache)});
  add_security_headers(r);
  r.content_type = std::string(asset.media_type);
  if (matches_etag(ctx.request().header("If-None-Match"), asset.etag)) {
    r.status = 304;
    return r;
  }
  r.status = 200;
  r.body.assign(reinterpret_cast<const char*>(asset.bytes.data()), asset.bytes.size());
  return r;
}

net::http_response not_found() {
  auto r = net::http_response::error(404, "not_found", "no such console file");
  r.headers.push_back({"Cache-Control", "no-store"});
  add_security_headers(r);
  return r;
}

/// The asset named `name` of the current version; null for any other name or version
/// (a name is looked up, never joined to a path: `..`, `%2e%2e` and `/` find nothing).
const console_asset* find_asset(std::string_view version, std::string_view name) {
  if (version != console_version()) {
    return nullptr;
  }
  const auto all = console_assets();
  const auto it = std::find_if(all.begin(), all.end(),
                               [name](const console_asset& a) { return a.name == name; });
  return it == all.end() ? nullptr : &*it;
}

boost::asio::awaitable<net::http_response> page(net::request_context& ctx) {
  co_return serve(ctx, console_index(), page_cache);
}

boost::asio::awaitable<net::http_response> asset(net::request_context& ctx) {
  const auto* found = find_asset(ctx.param("version"), ctx.param("file"));
  co_return found ? serve(ctx, *found, asset_cache) : not_found();
}

boost::asio::awaitable<net::http_response> nested_asset(net::request_context& ctx) {
  const std::string name = std::string(ctx.param("folder")) + "/" + std::string(ctx.param("file"));
  const auto* found = ctx.param("folder").find('/') == std::string_view::npos
                          ? find_asset(ctx.param("version"), name)
                          : nullptr;
  co_return found ? serve(ctx, *found, asset_cache) : not_found();
}

} // namespace

void add_console_routes(net::router& routes) {
  using net::http_method;
  routes.add(http_method::get, "/", &page);
  routes.add(http_method::get, "/console/{version}/{file}", &asset);
  routes.add(http_method::get, "/console/{version}/{folder}/{file}", &nested_asset);
}

} // namespace troupe::api
