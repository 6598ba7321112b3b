// Outbound HTTP with the private-address rule, pinned addresses, checked redirects and a
// bounded body (guarded_fetch.hpp).

#include "troupe/tools/guarded_fetch.hpp"

#include <algorithm>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>
#include <fmt/format.h>

#include "troupe/tools/http_template.hpp"

namespace troupe::tools {

namespace asio = boost::asio;
namespace urls = boost::urls;
using namespace asio::experimental::awaitable_operators;
using std::chrono::steady_clock;

namespace {

using resolve_outcome =
    std::tuple<boost::system::error_code, asio::ip::tcp::resolver::results_type>;

asio::awaitable<resolve_outcome> resolve_name(asio::ip::tcp::resolver& resolver, std::string host) {
  co_return co_await resolver.async_resolve(host, "", asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<void> wait_until(steady_clock::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_at(when);
  (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

std::chrono::milliseconds left(steady_clock::time_point deadline) {
  return std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now()));
}

tl::unexpected<error> refuse_private(std::string_view host, const asio::ip::address& a) {
  return fail(errc::permission_denied,
              fmt::format("'{}' resolves to {}, a loopback, private or link-local address: "
                          "refused (a tool may reach such addresses only with "
                          "allow_private = true)",
                          host, a.to_string()));
}

// The pieces of an http(s) URL a request needs.
struct destination {
  std::string scheme;
  /// The host as the URL writes it (an IPv6 literal without brackets).
  std::string host;
  std::uint16_t port = 0;
  bool literal = false;
};

expected<destination> destination_of(std::string_view text) {
  auto parsed = urls::parse_uri(text);
  if (!parsed) {
    return fail(errc::invalid_argument,
                fmt::format("'{}' is not a URL ({})", text, parsed.error().message()));
  }
  destination d;
  d.scheme = std::string(parsed->scheme());
  std::transform(d.scheme.begin(), d.scheme.end(), d.scheme.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  if (d.scheme != "http" && d.scheme != "https") {
    return fail(errc::invalid_argument,
                fmt::format("'{}': only http and https URLs may be fetched", text));
  }
  if (!parsed->has_authority() || parsed->encoded_host().empty()) {
    return fail(errc::invalid_argument, fmt::format("'{}' has no host", text));
  }
  if (parsed->has_userinfo()) {
    return fail(errc::invalid_argument,
                fmt::format("'{}': credentials in a URL are not sent", text));
  }
  const auto type = parsed->host_type();
  d.literal = type == urls::host_type::ipv4 || type == urls::host_type::ipv6;
  d.host = type == urls::host_type::ipv6 ? std::string(parsed->encoded_host_address())
                                         : std::string(parsed->encoded_host());
  if (type == urls::host_type::ipvfuture || d.host.find('%') != std::string::npos) {
    return fail(errc::invalid_argument, fmt::format("'{}': the host is not a name or an IP "
                                                    "address",
                                                    text));
  }
  d.port = parsed->has_port() ? parsed->port_number() : (d.scheme == "https" ? 443 : 80);
  if (d.port == 0) {
    return fail(errc::invalid_argument, fmt::format("'{}': the port is not valid", text));
  }
  return d;
}

bool same_origin(const destination& a, const destination& b) {
  return a.scheme == b.scheme && a.port == b.port && net::iequals(a.host, b.host);
}

std::string pin_entry(const destination& d, const std::vector<asio::ip::address>& addresses) {
  std::string entry = fmt::format("{}:{}:", d.host, d.port);
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    const auto& a = addresses[i];
    entry += (i > 0 ? "," : "") + (a.is_v6() ? fmt::format("[{}]", a.to_string()) : a.to_string());
  }
  return entry;
}

bool is_redirect(unsigned status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

} // namespace

std::string_view outbound_response::header(std::string_view name) const noexcept {
  for (const auto& h : headers) {
    if (net::iequals(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

asio::awaitable<expected<std::vector<asio::ip::address>>>
resolve_destination(std::string host, steady_clock::time_point deadline, bool allow_private) {
  boost::system::error_code parse_error;
  const auto literal = asio::ip::make_address(host, parse_error);
  if (!parse_error) {
    if (!allow_private && is_private_address(literal)) {
      co_return refuse_private(host, literal);
    }
    co_return std::vector<asio::ip::address>{literal};
  }
  asio::ip::tcp::resolver resolver(co_await asio::this_coro::executor);
  auto raced = co_await (resolve_name(resolver, host) || wait_until(deadline));
  if (raced.index() == 1) {
    co_return fail(errc::timeout,
                   fmt::format("resolving '{}' took longer than the deadline", host));
  }
  auto& [ec, results] = std::get<0>(raced);
  if (ec) {
    co_return fail(errc::not_found, fmt::format("'{}' does not resolve ({})", host, ec.message()));
  }
  std::vector<asio::ip::address> out;
  for (const auto& entry : results) {
    const auto a = entry.endpoint().address();
    if (!allow_private && is_private_address(a)) {
      co_return refuse_private(host, a);
    }
    if (std::find(out.begin(), out.end(), a) == out.end()) {
      out.push_back(a);
    }
  }
  if (out.empty()) {
    co_return fail(errc::not_found, fmt::format("'{}' has no address", host));
  }
  co_return out;
}

asio::awaitable<expected<outbound_response>>
guarded_fetch(net::http_client& http, net::http_client_request request, outbound_policy policy) {
  const auto deadline = steady_clock::now() + policy.timeout;
  std::optional<destination> origin;
  for (unsigned hop = 0;; ++hop) {
    auto where = destination_of(request.url);
    if (!where) {
      co_return tl::unexpected(where.error());
    }
    if (!origin) {
      origin = *where;
    } else if (!same_origin(*origin, *where)) {
      // The headers were meant for the first origin (they may carry its credentials).
      request.headers.clear();
    }
    auto addresses = co_await resolve_destination(where->host, deadline, policy.allow_private);
    if (!addresses) {
      co_return tl::unexpected(addresses.error());
    }
    request.resolve.clear();
    if (!where->literal) {
      request.resolve.push_back(pin_entry(*where, *addresses));
    }
    const auto remaining = left(deadline);
    request.deadlines.total = remaining;
    request.deadlines.first_byte = remaining;
    request.deadlines.idle = remaining;
    request.deadlines.connect = std::min(remaining, std::chrono::milliseconds(10'000));
    auto opened = co_await http.open(request);
    if (!opened) {
      co_return tl::unexpected(opened.error());
    }
    auto& stream = *opened;
    outbound_response response;
    response.url = request.url;
    response.address = stream.remote_address();
    if (!policy.allow_private) {
      // The pin decides where a new connection goes; a connection reused from the pool
      // was opened by someone else, so where it leads is checked as well.
      boost::system::error_code ec;
      const auto reached = asio::ip::make_address(response.address, ec);
      if (ec || is_private_address(reached)) {
        stream.cancel();
        co_return fail(errc::permission_denied,
                       fmt::format("'{}' was reached at '{}', which is not a public address: "
                                   "refused",
                                   where->host, response.address));
      }
    }
    response.status = stream.status();
    response.headers = stream.headers();
    if (is_redirect(response.status) && policy.max_redirects > 0) {
      stream.cancel();
      const auto location = response.header("Location");
      if (location.empty()) {
        co_return response;
      }
      if (hop >= policy.max_redirects) {
        co_return fail(errc::limit_exceeded,
                       fmt::format("more than {} redirects (the last to '{}')",
                                   policy.max_redirects, location));
      }
      auto base = urls::parse_uri(request.url);
      auto ref = urls::parse_uri_reference(location);
      if (!base || !ref) {
        co_return fail(errc::invalid_argument,
                       fmt::format("the redirect to '{}' is not a URL", location));
      }
      urls::url next;
      if (auto resolved = urls::resolve(*base, *ref, next); !resolved) {
        co_return fail(errc::invalid_argument,
                       fmt::format("the redirect to '{}' cannot be followed", location));
      }
      next.remove_fragment();
      request.url = std::string(next.buffer());
      // 303, and 301/302 after a POST, turn into a GET without a body (as browsers do).
      if (response.status == 303 || ((response.status == 301 || response.status == 302) &&
                                     request.method == net::http_method::post)) {
        request.method = net::http_method::get;
        request.body.clear();
        request.shared_body.reset();
        std::erase_if(request.headers, [](const net::http_header& h) {
          return net::iequals(h.name, "Content-Type") || net::iequals(h.name, "Content-Length");
        });
      }
      continue;
    }
    for (;;) {
      auto more = co_await stream.read(response.body);
      if (!more) {
        co_return tl::unexpected(more.error());
      }
      if (response.body.size() > policy.max_body_bytes) {
        stream.cancel();
        if (!policy.truncate) {
          co_return fail(errc::limit_exceeded, fmt::format("the response is larger than {} bytes",
                                                           policy.max_body_bytes));
        }
        response.body.resize(policy.max_body_bytes);
        response.truncated = true;
        break;
      }
      if (!*more) {
        break;
      }
    }
    co_return response;
  }
}

} // namespace troupe::tools
