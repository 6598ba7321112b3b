#include "troupe/net/channel/adapter.hpp"

#include <fmt/format.h>

#include "troupe/net/provider_wire.hpp"

namespace troupe::net::channel {

send_result classify_http_status(unsigned status, std::string_view retry_after_header,
                                 std::string_view body) {
  send_result out;
  if (status >= 200 && status < 300) {
    out.outcome = send_outcome::sent;
    return out;
  }
  // A short excerpt of what the platform said, for last_error (never the request).
  constexpr std::size_t excerpt = 200;
  out.error = fmt::format("HTTP {}", status);
  if (!body.empty()) {
    out.error += ": " + std::string(body.substr(0, excerpt));
  }
  if (status == 429 || status == 408 || status == 425 || status >= 500) {
    out.outcome = send_outcome::retry;
    out.retry_after = parse_retry_after(retry_after_header).value_or(std::chrono::milliseconds{0});
    return out;
  }
  out.outcome = send_outcome::failed;
  return out;
}

} // namespace troupe::net::channel
