#pragma once

// Private to troupe_net: the state shared between a connection's coroutine, the
// handlers it runs and the producers of a streaming response.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "troupe/net/http_message.hpp"

namespace troupe::net::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;

struct server_state;

/// One accepted connection.
struct connection {
  static asio::ip::address peer_of(const asio::ip::tcp::socket& socket) {
    boost::system::error_code ec;
    auto endpoint = socket.remote_endpoint(ec);
    return ec ? asio::ip::address{} : endpoint.address();
  }

  enum class phase { idle, busy, streaming };

  connection(asio::ip::tcp::socket socket, server_state* owner, std::uint64_t number)
      : peer(peer_of(socket)), stream(std::move(socket)), server(owner), id(number) {}

  /// The client's address (unspecified when the socket could not say).
  asio::ip::address peer;
  beast::tcp_stream stream;
  server_state* server;
  std::uint64_t id;
  std::atomic<phase> state{phase::idle};
  /// It left the server's table and open-connection count (done once, before the socket
  /// closes, so a client that saw the close never finds it still counted).
  std::atomic<bool> released{false};
};

/// One queued chunk of a streaming response: bytes of its own, or bytes shared with other
/// streams (an event encoded once for every subscriber), which the writer reads in place.
struct stream_chunk {
  std::string owned;
  std::shared_ptr<const std::string> shared;

  std::string_view bytes() const noexcept {
    return shared ? std::string_view(*shared) : std::string_view(owned);
  }
  bool empty() const noexcept {
    return bytes().empty();
  }
};

/// A streaming response: the bounded chunk queue between producers and the
/// connection's writer, and how the stream ended.
struct stream_state {
  using channel_type =
      asio::experimental::concurrent_channel<void(boost::system::error_code, stream_chunk)>;

  stream_state(asio::any_io_executor executor, std::size_t capacity)
      : channel(std::move(executor), capacity) {}

  channel_type channel;
  // Response head, written before the first chunk.
  unsigned status = 200;
  std::string content_type;
  std::vector<http_header> headers;
  bool sse = false;

  std::atomic<bool> open{true};
  std::atomic<bool> finished{false};
  std::atomic<bool> aborted{false};
  std::atomic<bool> gone{false};

  std::mutex callback_mutex;
  std::function<void()> on_disconnect;
  bool disconnect_reported = false;

  /// Marks the client gone and runs the disconnect callback once.
  void report_disconnect();
};

} // namespace troupe::net::detail
