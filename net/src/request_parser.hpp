#pragma once

// Private to troupe_net: the Beast request parser as troupe configures it, shared by the
// server (which feeds it from a socket) and parse_http_request (which feeds it bytes).

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "troupe/net/http_message.hpp"
#include "troupe/net/http_request_parser.hpp"

namespace troupe::net::detail {

/// The parser every request is read with.
using request_parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

/// Applies troupe's limits to a fresh parser.
void apply_limits(request_parser& parser, const request_limits& limits);

/// Whether a parsed header (its target and every field's name and value) is within
/// `limit` bytes. Beast applies its header limit to the request line and to the fields
/// separately, so a header of almost twice the limit passes it; this is the check for
/// the whole.
bool header_within_limit(const boost::beast::http::request<boost::beast::http::string_body>& in,
                         std::size_t limit);

/// Moves a parsed Beast request into troupe's own request value (target split into path
/// and query, headers in order, the body).
http_request to_request(boost::beast::http::request<boost::beast::http::string_body>&& in);

} // namespace troupe::net::detail
