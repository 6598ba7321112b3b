#include "troupe/net/mcp/stdio_bridge.hpp"

#include <deque>

#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "async_event.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/net/mcp/jsonrpc.hpp"
#include "troupe/net/sse_parser.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::mcp {

namespace {

using std::chrono::steady_clock;

// A relayed request's limit (an agent's run may be long).
constexpr auto request_limit = std::chrono::hours(2);
constexpr std::size_t max_line_bytes = 16 * 1024 * 1024;

struct bridge {
  explicit bridge(asio::io_context& io, stdio_bridge_options o)
      : options(std::move(o)), in(io, ::dup(options.in_fd)), out(io, ::dup(options.out_fd)),
        http(io.get_executor()), idle(io.get_executor()) {}

  stdio_bridge_options options;
  asio::posix::stream_descriptor in;
  asio::posix::stream_descriptor out;
  http_client http;
  std::string session;
  std::string version;
  std::deque<std::string> queue;
  bool writing = false;
  std::size_t in_flight = 0;
  detail::async_event idle;
  bool input_done = false;
};

asio::awaitable<void> drain(std::shared_ptr<bridge> b) {
  while (!b->queue.empty()) {
    auto [ec, n] = co_await asio::async_write(b->out, asio::buffer(b->queue.front()),
                                              asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec) {
      b->queue.clear();
      break;
    }
    b->queue.pop_front();
  }
  b->writing = false;
}

// Writes one message as a line, in order.
void emit(const std::shared_ptr<bridge>& b, std::string_view message) {
  std::string line(message);
  line.push_back('\n');
  b->queue.push_back(std::move(line));
  if (!b->writing) {
    b->writing = true;
    asio::co_spawn(b->out.get_executor(), drain(b), asio::detached);
  }
}

// Learns the session's version from an initialize answer.
void sniff(const std::shared_ptr<bridge>& b, const jsonrpc_message& m) {
  if (m.kind != message_kind::response) {
    return;
  }
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(m.result);
  simdjson::dom::element root;
  std::string_view version;
  if (parser.parse(padded).get(root) == simdjson::SUCCESS &&
      root["protocolVersion"].get_string().get(version) == simdjson::SUCCESS &&
      root["serverInfo"].is_object()) {
    b->version = std::string(version);
  }
}

// Writes a JSON answer as one line per message (a batch as several), or, when it is not
// JSON-RPC, an error answering request `id`.
void relay_body(const std::shared_ptr<bridge>& b, const std::string& id, unsigned status,
                const std::string& body) {
  if (body.empty()) {
    if (status >= 400 && !id.empty()) {
      emit(b, write_error(id, jsonrpc_code::internal_error,
                          fmt::format("the server answered HTTP {}", status)));
    }
    return;
  }
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(body);
  simdjson::dom::element root;
  auto messages = parse_jsonrpc(body);
  if (!messages || parser.parse(padded).get(root) != simdjson::SUCCESS) {
    if (!id.empty()) {
      emit(b, write_error(
                  id, jsonrpc_code::internal_error,
                  fmt::format("the server answered HTTP {}: {}", status, body.substr(0, 300))));
    }
    return;
  }
  for (const auto& m : *messages) {
    sniff(b, m);
  }
  simdjson::dom::array batch;
  if (root.get_array().get(batch) == simdjson::SUCCESS) {
    for (auto item : batch) {
      emit(b, simdjson::minify(item));
    }
  } else {
    emit(b, simdjson::minify(root));
  }
}

asio::awaitable<void> relay(std::shared_ptr<bridge> b, std::string line) {
  ++b->in_flight;
  std::string id;
  auto parsed = parse_jsonrpc(line);
  if (!parsed) {
    emit(b, write_error({},
                        parsed.error().code == errc::parse_error ? jsonrpc_code::parse_error
                                                                 : jsonrpc_code::invalid_request,
                        parsed.error().message));
  } else {
    if (parsed->size() == 1 && parsed->front().is_request()) {
      id = parsed->front().id;
    }
    http_client_request request;
    request.method = http_method::post;
    request.url = b->options.url;
    request.headers = {{"Content-Type", "application/json"},
                       {"Accept", "application/json, text/event-stream"}};
    if (!b->options.token.empty()) {
      request.headers.push_back({"Authorization", "Bearer " + b->options.token});
    }
    if (!b->session.empty()) {
      request.headers.push_back({"Mcp-Session-Id", b->session});
    }
    if (!b->version.empty()) {
      request.headers.push_back({"MCP-Protocol-Version", b->version});
    }
    request.body = std::move(line);
    request.deadlines.first_byte = request_limit;
    request.deadlines.idle = request_limit;
    request.deadlines.total = request_limit;
    // Named: GCC 12 destroys some temporaries of a co_await twice.
    auto opening = b->http.open(std::move(request));
    auto opened = co_await std::move(opening);
    std::string failure;
    if (!opened) {
      failure = opened.error().message;
    } else {
      if (const auto s = opened->header("Mcp-Session-Id"); !s.empty()) {
        b->session = std::string(s);
      }
      const auto type = opened->header("Content-Type");
      const bool sse = type.find("text/event-stream") != std::string_view::npos;
      sse_parser parser;
      std::string body;
      for (;;) {
        std::string chunk;
        auto more = co_await opened->read(chunk);
        if (!more) {
          failure = more.error().message;
          break;
        }
        if (sse) {
          (void)parser.feed(chunk, [&](const sse_message& e) {
            if (!e.data.empty() && (e.event.empty() || e.event == "message")) {
              if (auto ms = parse_jsonrpc(e.data)) {
                for (const auto& m : *ms) {
                  sniff(b, m);
                }
              }
              emit(b, e.data);
            }
          });
        } else {
          body += chunk;
          if (body.size() > max_line_bytes) {
            failure = "the answer is too large";
            break;
          }
        }
        if (!*more) {
          break;
        }
      }
      if (!sse && failure.empty()) {
        relay_body(b, id, opened->status(), body);
      }
    }
    if (!failure.empty() && !id.empty()) {
      emit(b, write_error(id, jsonrpc_code::internal_error,
                          fmt::format("troupe's endpoint {}: {}", b->options.url, failure)));
    }
  }
  if (--b->in_flight == 0 && b->input_done) {
    b->idle.set();
  }
}

asio::awaitable<void> read_input(std::shared_ptr<bridge> b) {
  std::string buffer;
  std::array<char, 16 * 1024> chunk{};
  for (;;) {
    auto [ec, n] =
        co_await b->in.async_read_some(asio::buffer(chunk), asio::as_tuple(asio::use_awaitable));
    if (ec) {
      break;
    }
    buffer.append(chunk.data(), n);
    std::size_t start = 0;
    for (;;) {
      const auto end = buffer.find('\n', start);
      if (end == std::string::npos) {
        break;
      }
      std::string line = buffer.substr(start, end - start);
      start = end + 1;
      if (!line.empty() && line.back() == '\r') {
        line.pop_back();
      }
      if (line.find_first_not_of(" \t") != std::string::npos) {
        asio::co_spawn(b->in.get_executor(), relay(b, std::move(line)), asio::detached);
      }
    }
    buffer.erase(0, start);
    if (buffer.size() > max_line_bytes) {
      emit(b, write_error({}, jsonrpc_code::invalid_request, "a line over 16 MiB"));
      buffer.clear();
    }
  }
  b->input_done = true;
  if (b->in_flight == 0) {
    b->idle.set();
  }
  // Answers still on their way are written before the session ends.
  co_await b->idle.wait_until(steady_clock::time_point::max());
  if (!b->session.empty()) {
    http_client_request end;
    end.method = http_method::del;
    end.url = b->options.url;
    end.headers = {{"Mcp-Session-Id", b->session}};
    if (!b->options.token.empty()) {
      end.headers.push_back({"Authorization", "Bearer " + b->options.token});
    }
    end.deadlines.total = std::chrono::seconds(5);
    auto ending = b->http.fetch(std::move(end));
    std::ignore = co_await std::move(ending);
  }
  // A write still under way is work of the io_context: run() returns after it.
}

} // namespace

int run_stdio_bridge(const stdio_bridge_options& options) {
  asio::io_context io;
  auto b = std::make_shared<bridge>(io, options);
  asio::co_spawn(io, read_input(b), asio::detached);
  io.run();
  return 0;
}

} // namespace troupe::net::mcp
