#pragma once

// A fake MCP server over Streamable HTTP for the client's tests, on net's HTTP server at
// http://127.0.0.1:<port>/mcp. It speaks the wire as the spec (and the official SDK's
// server) does, including its failures:
// - POST without `Accept: application/json, text/event-stream` is 406; a request other
//   than initialize without a session is 400; an unknown session is 404; after
//   initialize, a request whose MCP-Protocol-Version differs from the agreed one is 400;
// - initialize answers with a new Mcp-Session-Id and the client's version, or the one
//   set with `set_answer_version` (a server that downgrades);
// - tools/list in pages of two (nextCursor "page-2", …);
// - tools/call: "echo" (JSON), "progress" (an SSE stream: three progress notifications
//   when the call has a progress token, then the answer), "cut" (an SSE stream with a
//   priming event `id: cut-1`, `retry: <cut_retry_ms>`, then closed: the answer comes on
//   a GET with `Last-Event-ID: cut-1`), "cut_no_id" (an SSE stream closed without an
//   event id or an answer), "hang" (no answer, ever);
// - notifications and responses: 202 (or 200 with a body, on request); GET without
//   Last-Event-ID: 405; DELETE: 200.
// Every request is recorded with its headers and the time it arrived.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "support/fake_platform.hpp"

namespace troupe::test {

/// One request the fake received.
struct mcp_request_record {
  net::http_method method = net::http_method::post;
  /// The JSON-RPC method (POST), empty for GET and DELETE.
  std::string rpc_method;
  std::string body;
  std::vector<net::http_header> headers;
  std::chrono::steady_clock::time_point at;

  std::string_view header(std::string_view name) const noexcept;
};

class fake_mcp_server {
public:
  fake_mcp_server();
  ~fake_mcp_server();

  /// "http://127.0.0.1:<port>/mcp".
  std::string url() const;

  /// Every request so far.
  std::vector<mcp_request_record> requests() const;
  /// Those whose JSON-RPC method (or HTTP method "GET"/"DELETE") is `what`.
  std::vector<mcp_request_record> requests_of(std::string_view what) const;
  /// Waits until `n` requests of `what` have arrived.
  bool wait_for(std::string_view what, std::size_t n, std::chrono::milliseconds deadline) const;

  /// Forgets every session: the next request with one is answered 404.
  void forget_sessions();
  /// The version initialize answers from now on, whatever the client offers.
  void set_answer_version(std::string version);
  /// From now on, notifications are answered 200 with `{"jsonrpc":"2.0","result":{}}`
  /// (a body without an id, as the conformance suite's initialize scenario sends)
  /// instead of 202.
  void answer_notifications_with_body();
  /// The `retry` of the "cut" tool's priming event.
  void set_cut_retry(std::chrono::milliseconds retry);
  /// When the "cut" stream was closed.
  std::chrono::steady_clock::time_point cut_closed_at() const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

} // namespace troupe::test
