#pragma once

/// \file
/// Server-Sent Events: the event encoding (`event`, `id`, `retry`, multi-line `data`,
/// comment pings) used by every streaming route.

#include <optional>
#include <string>
#include <string_view>

namespace troupe::net {

/// One SSE event. Empty `event` and `id` are omitted; `data` may span lines.
struct sse_event {
  std::string event;
  std::string id;
  std::optional<unsigned> retry_ms;
  std::string data;
};

/// Encodes `e` as it goes on the wire, ending with the blank line. Every line of
/// `data` (split at \n, \r\n or \r) becomes its own `data:` line, so a payload can never
/// end the event early or inject fields. Newlines in `event` or `id` are dropped.
std::string format_sse_event(const sse_event& e);

/// Appends the encoding of `e` to `out`.
void append_sse_event(std::string& out, const sse_event& e);

/// A comment line (`: text`), used as a keep-alive ping; ignored by clients.
std::string format_sse_comment(std::string_view text);

} // namespace troupe::net
