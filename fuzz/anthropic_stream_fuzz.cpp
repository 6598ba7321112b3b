// Fuzzes troupe::net::anthropic_stream_decoder and decode_anthropic_message
// (net/include/troupe/net/provider_wire.hpp) the way provider_client drives them: the
// bytes of a streamed Messages answer go through the SSE parser, each event (name and
// data) into the decoder, until an error or the end; the same bytes are also decoded as
// a whole (non-streamed) message.
//
// Properties checked: no crash, leak or undefined behaviour on any answer; every error is
// a classified provider_error with a message; the first completion of a tool_use block
// carries the input its deltas sent; the completion_builder folds any event sequence.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/net/provider_wire.hpp"
#include "troupe/net/sse_parser.hpp"

namespace {

using troupe::stream_event;
using troupe::net::anthropic_stream_decoder;
using troupe::net::sse_message;
using troupe::net::sse_parser;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

// Checks the tool-call events of a stream: the first completion of a block carries the
// input its deltas sent before it ("{}" when they sent none).
void check_tool_calls(const std::vector<stream_event>& events) {
  std::map<std::size_t, std::string> input;
  std::map<std::size_t, bool> completed;
  for (const auto& e : events) {
    if (e.type == stream_event::kind::tool_call_delta && !completed[e.index]) {
      input[e.index] += e.text;
    } else if (e.type == stream_event::kind::tool_call_complete && !completed[e.index]) {
      completed[e.index] = true;
      const auto& sent = input[e.index];
      check(e.text == (sent.empty() ? std::string("{}") : sent));
    }
  }
}

void fold(const std::vector<stream_event>& events) {
  troupe::completion_builder builder;
  for (const auto& e : events) {
    builder.apply(e);
  }
  (void)builder.result();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  sse_parser parser;
  anthropic_stream_decoder decoder;
  std::vector<stream_event> events;
  bool failed = false;
  auto parsed = parser.feed(bytes, [&](const sse_message& m) -> bool {
    auto r = decoder.decode(m.event, m.data, events);
    if (!r) {
      check(!r.error().message.empty());
      failed = true;
      return false;
    }
    return true;
  });
  if (parsed && !failed && !decoder.done()) {
    decoder.flush(events);
  }
  check_tool_calls(events);
  fold(events);

  std::vector<stream_event> whole;
  auto r = troupe::net::decode_anthropic_message(bytes, whole);
  if (!r) {
    check(!r.error().message.empty());
  }
  fold(whole);
  return 0;
}
