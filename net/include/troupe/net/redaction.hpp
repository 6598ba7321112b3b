#pragma once

/// \file
/// Keeping credentials out of logs: which HTTP headers carry secrets, and header text
/// with their values replaced, for diagnostics such as `TROUPE_CURL_VERBOSE`.

#include <string>
#include <string_view>

namespace troupe::net {

/// What a secret header's value becomes in a log.
inline constexpr std::string_view redacted_value = "[redacted]";

/// Whether header `name` (any case) may carry a credential: Authorization,
/// Proxy-Authorization, Cookie, Set-Cookie, x-api-key, and any name containing "auth",
/// "token", "secret", "key", "cookie", "password", "session" or "signature". Errs on the
/// side of hiding: a log loses a harmless value rather than show a secret.
bool is_secret_header(std::string_view name) noexcept;

/// `text` — one or more header lines (`Name: value`, ending in CRLF or LF, as curl
/// reports them) — with the value of every secret header replaced by `[redacted]`.
/// Every other line (the request or status line, other headers) is unchanged.
std::string redact_headers(std::string_view text);

} // namespace troupe::net
