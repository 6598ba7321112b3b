#pragma once

/// \file
/// An HTTP client on libcurl's multi interface, driven by Asio
/// (`curl_multi_socket_action`: Asio watches curl's sockets and runs its timer). One
/// client serves many concurrent transfers on one executor and keeps connections alive
/// between them. Every transfer has deadlines for connect, first body byte, the idle gap
/// between body chunks, and in total; cancelling the awaiting coroutine (or dropping the
/// stream) removes the transfer at once and frees its connection. TLS and proxies use
/// libcurl's defaults and the usual environment variables (HTTPS_PROXY, NO_PROXY, …).
/// Setting TROUPE_CURL_VERBOSE in the environment makes libcurl trace every transfer to
/// stderr.
///
/// Threading: a client and its streams belong to the executor they were created with,
/// which must run on one thread at a time (an io_context run by one thread, or a
/// strand); call them only from coroutines on that executor.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "troupe/net/http_message.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::net {

namespace asio = boost::asio;

/// Deadlines of one transfer. Zero disables one.
struct http_deadlines {
  std::chrono::milliseconds connect{10'000};
  /// From the start until the first byte of the response body (for an LLM: the time to
  /// first token, which may include a long prompt evaluation).
  std::chrono::milliseconds first_byte{120'000};
  /// Longest silence between two body chunks once the body started.
  std::chrono::milliseconds idle{60'000};
  /// The whole transfer.
  std::chrono::milliseconds total{600'000};
};

/// One request.
struct http_client_request {
  http_method method = http_method::get;
  std::string url;
  std::vector<http_header> headers;
  std::string body;
  /// When set, sent instead of `body`, without a copy: a body sent more than once (a
  /// provider's retries) lives once, shared by the attempts.
  std::shared_ptr<const std::string> shared_body;
  http_deadlines deadlines;
  /// Addresses to connect to instead of asking DNS, as libcurl's CURLOPT_RESOLVE entries
  /// `HOST:PORT:ADDRESS[,ADDRESS…]` (an IPv6 address in brackets). Callers that check a
  /// destination's addresses themselves pin the transfer to the checked ones, so a second
  /// DNS answer cannot send it elsewhere. The entries go into the client's DNS cache with
  /// its normal lifetime (libcurl's `+` prefix is added).
  std::vector<std::string> resolve;
};

/// Knobs of a client.
struct http_client_options {
  /// Body bytes buffered per transfer before curl is paused (back-pressure on a slow
  /// consumer).
  std::size_t max_buffered_bytes = 1024 * 1024;
  /// Connections kept open for reuse.
  long max_cached_connections = 64;
  /// Connections per host; 0 is no limit.
  long max_host_connections = 0;
  /// Largest body `fetch` accepts.
  std::size_t max_body_bytes = 32 * 1024 * 1024;
  std::string user_agent = "troupe";
};

/// A complete response (see `http_client::fetch`).
struct http_client_response {
  unsigned status = 0;
  std::vector<http_header> headers;
  std::string body;

  std::string_view header(std::string_view name) const noexcept;
};

namespace detail {
struct transfer;
struct curl_engine;
} // namespace detail

/// A response whose body is being received. Move-only; destroying it or calling
/// `cancel` ends the transfer.
class http_stream {
public:
  http_stream() = default;
  ~http_stream();
  http_stream(http_stream&&) noexcept;
  http_stream& operator=(http_stream&&) noexcept;
  http_stream(const http_stream&) = delete;
  http_stream& operator=(const http_stream&) = delete;

  unsigned status() const noexcept;
  const std::vector<http_header>& headers() const noexcept;
  /// The first header named `name` (case-insensitive), or empty.
  std::string_view header(std::string_view name) const noexcept;

  /// Waits for body bytes and appends all that are buffered to `out`. Returns false at
  /// the end of the body. Fails with `timeout` (a deadline passed), `unavailable` (the
  /// connection broke or the body was cut short), `cancelled` (the awaiting coroutine was
  /// cancelled; the transfer is then removed) or `io_error`. Bytes received before a
  /// failure have been handed out by earlier reads.
  asio::awaitable<expected<bool>> read(std::string& out);

  /// Ends the transfer now; its connection is closed, not reused.
  void cancel();

  /// Body bytes received so far.
  std::size_t bytes_received() const noexcept;

  /// The IP address the transfer's connection goes to (libcurl's CURLINFO_PRIMARY_IP), as
  /// text; empty when unknown. A reused connection reports the address it was opened to.
  std::string remote_address() const;

private:
  friend class http_client;
  explicit http_stream(std::shared_ptr<detail::transfer> t) : transfer_(std::move(t)) {}
  std::shared_ptr<detail::transfer> transfer_;
};

/// The client. Create one per io thread and share it among the coroutines on it.
class http_client {
public:
  explicit http_client(asio::any_io_executor executor, http_client_options options = {});
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// Starts a request and waits for the response head (status and headers). The body
  /// is then read through the returned stream.
  asio::awaitable<expected<http_stream>> open(http_client_request request);

  /// Runs a request to completion and returns the whole body (bounded by
  /// `max_body_bytes`).
  asio::awaitable<expected<http_client_response>> fetch(http_client_request request);

  /// Transfers in progress.
  std::size_t active_transfers() const noexcept;
  /// Connections libcurl opened so far (a measure of connection reuse).
  std::size_t connections_opened() const noexcept;
  /// libcurl easy handles made so far: an ended transfer's handle, reset, serves the next.
  std::size_t easy_handles_made() const noexcept;

  asio::any_io_executor get_executor() const;

private:
  std::shared_ptr<detail::curl_engine> engine_;
};

} // namespace troupe::net
