#pragma once

/// \file
/// A provider client: one chat completion against an OpenAI-compatible or Anthropic
/// server over the libcurl-multi client, streamed or whole, decoded into normalized
/// `stream_event`s, with every failure classified. Retryable failures (rate limits,
/// 5xx, timeouts, lost connections) are retried with exponential backoff and jitter,
/// honouring `retry-after`, but only while no byte of the answer has arrived; a failure
/// after that is reported with everything received so far.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <tl/expected.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/net/provider_wire.hpp"
#include "troupe/runtime/chat.hpp"

namespace troupe::net {

/// When and how often to retry.
struct retry_policy {
  /// Attempts in total, the first included.
  unsigned max_attempts = 3;
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{8'000};
  /// Each delay is scaled by a random factor in [1 - jitter, 1 + jitter].
  double jitter = 0.2;
  /// A `retry-after` longer than this is not waited for: the failure is reported.
  std::chrono::milliseconds max_retry_after{60'000};
};

/// One provider endpoint.
struct provider_config {
  provider_type type = provider_type::openai_compatible;
  /// Base URL up to and including the version segment, e.g. http://127.0.0.1:8081/v1;
  /// empty: the type's default.
  std::string base_url;
  std::string api_key;
  std::vector<http_header> extra_headers;
  http_deadlines deadlines;
  retry_policy retry;
  std::string anthropic_version = "2023-06-01";
  std::uint32_t default_max_tokens = 4096;
};

/// Receives each normalized event as it arrives.
using stream_event_sink = std::function<void(const stream_event&)>;

/// The client. Cheap; create one per provider. Use it on the http_client's executor.
class provider_client {
public:
  provider_client(http_client& http, provider_config config);

  /// Runs one completion (streamed when `request.stream`). `on_event` sees every event
  /// as it is decoded; the outcome holds the folded answer and the failure, if any.
  asio::awaitable<completion_outcome> complete(completion_request request,
                                               stream_event_sink on_event = {});

  /// The model ids the provider offers (`GET {base}/models`).
  asio::awaitable<tl::expected<std::vector<std::string>, provider_error>> list_models();

  const provider_config& config() const noexcept {
    return config_;
  }

  /// The delay before retry number `retry` (1-based) after `failure`, or none when the
  /// failure is not to be retried. Exposed for tests.
  std::optional<std::chrono::milliseconds> backoff(unsigned retry,
                                                   const provider_error& failure) const;

private:
  struct attempt_result {
    std::optional<provider_error> failure;
    bool answer_started = false;
  };
  asio::awaitable<attempt_result> attempt(std::string url, std::shared_ptr<const std::string> body,
                                          completion_builder& builder,
                                          const stream_event_sink& on_event, bool stream);
  std::vector<http_header> headers(bool stream) const;

  http_client& http_;
  provider_config config_;
};

/// Maps a transport error from the http client to a provider failure.
provider_error provider_error_from(const error& e);

} // namespace troupe::net
