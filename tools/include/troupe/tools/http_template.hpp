#pragma once

/// \file
/// The request templates of custom HTTP tools (issue 18): `{param}` placeholders in a
/// URL, a header value or a body, replaced by a call's argument values so that an
/// argument always stays data. In a URL a value is percent-encoded (it cannot add a path
/// segment, a query parameter or change the host); in a body it is JSON-escaped (it
/// cannot end the JSON string it sits in); in a header value it is refused when it holds
/// a control character (it cannot end the header and add another). Also the address rule
/// such tools follow: no loopback, private or link-local destination unless allowed.

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "troupe/runtime/error.hpp"

namespace troupe::tools {

/// Where a template's text goes, which decides how a value is encoded.
enum class template_part { url, header, body };

/// Argument values by parameter name, as text (a string argument as is, other JSON
/// values as their JSON text).
using template_values = std::map<std::string, std::string, std::less<>>;

/// `text` with every `{name}` (name: letters, digits, '_', '-') replaced by `values[name]`,
/// encoded for `part`; every other brace is literal text (JSON bodies need no escaping).
/// Fails with invalid_argument on a placeholder naming no value, or (in a header) a value
/// holding a control character. An expanded value is never expanded again.
expected<std::string> expand_template(std::string_view text, const template_values& values,
                                      template_part part);

/// The placeholder names `text` uses, in order of first use.
expected<std::vector<std::string>> template_placeholders(std::string_view text);

/// True when `address` is loopback, private (RFC 1918, unique local fc00::/7), link-local,
/// carrier-grade NAT (100.64/10), unspecified, multicast or an IPv4-mapped form of one:
/// a destination a custom tool may reach only with `allow_private = true`.
bool is_private_address(const boost::asio::ip::address& address) noexcept;

} // namespace troupe::tools
