// Fuzzes troupe::net::parse_http_request (net/include/troupe/net/http_request_parser.hpp):
// Beast's request parser with the limits the server reads every request with, and the
// conversion into troupe's http_request that route handlers see.
//
// Input: the bytes a client sends on one connection. Properties checked:
// - a request is read under the server's default limits and under tight ones; a request
//   read never exceeds them (body, header fields) and never takes more bytes than given;
// - the path is the target up to '?' and the query what follows it;
// - the bytes a request took, given alone, yield the same request (nothing depends on
//   what follows it);
// - pipelined requests are read one after another while the connection stays open;
// - what handlers do next with a request (header lookup, query and percent decoding)
//   works on whatever the parser let through.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "troupe/net/http_request_parser.hpp"

namespace {

using troupe::net::http_request;
using troupe::net::parse_http_request;
using troupe::net::request_limits;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

bool same_request(const http_request& a, const http_request& b) {
  if (a.method != b.method || a.target != b.target || a.body != b.body ||
      a.headers.size() != b.headers.size()) {
    return false;
  }
  for (std::size_t k = 0; k < a.headers.size(); ++k) {
    if (a.headers[k].name != b.headers[k].name || a.headers[k].value != b.headers[k].value) {
      return false;
    }
  }
  return true;
}

void read_connection(std::string_view bytes, const request_limits& limits) {
  for (int round = 0; round < 8 && !bytes.empty(); ++round) {
    auto r = parse_http_request(bytes, limits);
    if (!r) {
      return;
    }
    const auto& request = r->request;
    check(r->consumed > 0 && r->consumed <= bytes.size());
    check(request.body.size() <= limits.body_limit_bytes);
    std::size_t header_bytes = request.target.size();
    for (const auto& h : request.headers) {
      header_bytes += h.name.size() + h.value.size();
    }
    check(header_bytes <= limits.header_limit_bytes);
    check(request.target.starts_with(request.path));
    if (request.target.size() > request.path.size()) {
      check(request.target[request.path.size()] == '?');
      check(request.query == request.target.substr(request.path.size() + 1));
    } else {
      check(request.query.empty());
    }
    check(r->version == 10 || r->version == 11);

    auto alone = parse_http_request(bytes.substr(0, r->consumed), limits);
    check(alone && alone->consumed == r->consumed && same_request(alone->request, request));

    // What route handlers and the server do with a request next.
    (void)request.header("content-type");
    (void)request.header("x-request-id");
    (void)request.query_param("limit");
    (void)troupe::net::percent_decode(request.path);
    (void)troupe::net::percent_decode(request.query, true);

    if (!r->keep_alive) {
      return;
    }
    bytes.remove_prefix(r->consumed);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  read_connection(bytes, request_limits{}); // the server's defaults
  read_connection(bytes, request_limits{.header_limit_bytes = 256, .body_limit_bytes = 64});
  return 0;
}
