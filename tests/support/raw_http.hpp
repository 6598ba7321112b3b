#pragma once

// Blocking loopback HTTP helpers for tests: a raw TCP client that sends exact bytes and
// reads with timeouts, so tests can send garbage, stall, or vanish mid-request.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace troupe::test {

/// One client TCP connection to 127.0.0.1:port.
class raw_client {
public:
  explicit raw_client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect failed");
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;
  ~raw_client() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) {
        throw std::runtime_error("send failed");
      }
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// Reads what arrives within `timeout`; empty when nothing did. Sets closed() on EOF.
  std::string read_some(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
      return {};
    }
    char buffer[65536];
    const auto n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) {
      closed_ = true;
      return {};
    }
    return std::string(buffer, static_cast<std::size_t>(n));
  }

  /// Reads until the peer closes or `timeout` passes in total.
  std::string read_until_closed(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::string all;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!closed_ && std::chrono::steady_clock::now() < deadline) {
      all += read_some(std::chrono::milliseconds(50));
    }
    return all;
  }

  /// Reads until `needle` has arrived (returns everything read) or `timeout` passes.
  std::string read_until(std::string_view needle,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buffer_.find(needle) == std::string::npos && !closed_ &&
           std::chrono::steady_clock::now() < deadline) {
      buffer_ += read_some(std::chrono::milliseconds(20));
    }
    return buffer_;
  }

  /// Like read_until, but removes what it returns (up to and including `needle`) from
  /// the buffer, so a keep-alive exchange can be read one response at a time.
  std::string take_until(std::string_view needle,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    read_until(needle, timeout);
    const auto at = buffer_.find(needle);
    if (at == std::string::npos) {
      return std::exchange(buffer_, std::string{});
    }
    auto taken = buffer_.substr(0, at + needle.size());
    buffer_.erase(0, at + needle.size());
    return taken;
  }

  bool closed() const noexcept {
    return closed_;
  }
  /// Closes the connection abruptly (RST), as a client that crashed would.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }
  int fd() const noexcept {
    return fd_;
  }

private:
  int fd_ = -1;
  bool closed_ = false;
  std::string buffer_;
};

/// How long `http_exchange` waits for a whole answer: a bound, not a pause. Long enough
/// for a blocking chat whose run starts sandboxed pandas and matplotlib on a loaded
/// machine (the data-task test takes 5 s even when it is alone).
inline constexpr std::chrono::milliseconds http_exchange_timeout = std::chrono::seconds(60);

/// Sends one request with Connection: close and returns the whole raw response.
inline std::string http_exchange(std::uint16_t port, std::string_view method,
                                 std::string_view target, std::string_view body = {},
                                 std::string_view extra_headers = {}) {
  raw_client c(port);
  std::string request = std::string(method) + " " + std::string(target) +
                        " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                        std::string(extra_headers);
  if (!body.empty() || method == "POST") {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n";
  request += body;
  c.send(request);
  return c.read_until_closed(http_exchange_timeout);
}

/// The status code of a raw response ("HTTP/1.1 404 …" -> 404), or 0.
inline int status_of(std::string_view response) {
  if (response.size() < 12 || response.substr(0, 5) != "HTTP/") {
    return 0;
  }
  return std::stoi(std::string(response.substr(9, 3)));
}

/// The body of a raw, non-chunked response.
inline std::string body_of(std::string_view response) {
  const auto split = response.find("\r\n\r\n");
  return split == std::string_view::npos ? std::string{} : std::string(response.substr(split + 4));
}

/// The body of a raw chunked response with its chunk framing removed; empty when the
/// framing is broken or the last (zero-size) chunk is missing.
inline std::string dechunked_body_of(std::string_view response) {
  const auto split = response.find("\r\n\r\n");
  if (split == std::string_view::npos) {
    return {};
  }
  auto rest = response.substr(split + 4);
  std::string body;
  for (;;) {
    const auto line_end = rest.find("\r\n");
    if (line_end == std::string_view::npos) {
      return {};
    }
    std::size_t size = 0;
    try {
      size = std::stoul(std::string(rest.substr(0, line_end)), nullptr, 16);
    } catch (const std::exception&) {
      return {};
    }
    rest.remove_prefix(line_end + 2);
    if (size == 0) {
      return body;
    }
    if (rest.size() < size + 2) {
      return {};
    }
    body.append(rest.substr(0, size));
    rest.remove_prefix(size + 2);
  }
}

} // namespace troupe::test
