// Fuzzes troupe::net::openai_stream_decoder and decode_openai_completion
// (net/include/troupe/net/provider_wire.hpp) the way provider_client drives them: the
// bytes of a provider's streamed answer go through the SSE parser, each `data` payload
// into the decoder, until an error or the end; the same bytes are also decoded as a
// whole (non-streamed) answer.
//
// Properties checked: no crash, leak or undefined behaviour on any answer; every error is
// a classified provider_error; a tool call is completed at most once, with the arguments
// its deltas carried; the completion_builder folding the events agrees with them.

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
using troupe::net::openai_stream_decoder;
using troupe::net::sse_message;
using troupe::net::sse_parser;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

// Checks the tool-call events of one answer: deltas before the completion add up to the
// completed arguments, and no call completes twice.
void check_tool_calls(const std::vector<stream_event>& events) {
  std::map<std::size_t, std::string> arguments;
  std::map<std::size_t, bool> completed;
  for (const auto& e : events) {
    if (e.type == stream_event::kind::tool_call_delta && !completed[e.index]) {
      arguments[e.index] += e.text;
    } else if (e.type == stream_event::kind::tool_call_complete) {
      check(!completed[e.index]);
      completed[e.index] = true;
      check(e.text == arguments[e.index]);
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
  openai_stream_decoder decoder;
  std::vector<stream_event> events;
  bool failed = false;
  auto parsed = parser.feed(bytes, [&](const sse_message& m) -> bool {
    auto r = decoder.decode(m.data, events);
    if (!r) {
      check(!r.error().message.empty());
      failed = true;
      return false;
    }
    return true;
  });
  if (parsed && !failed && !decoder.done()) {
    decoder.flush(events); // the stream ended early: keep what arrived
  }
  check_tool_calls(events);
  fold(events);

  std::vector<stream_event> whole;
  auto r = troupe::net::decode_openai_completion(bytes, whole);
  if (!r) {
    check(!r.error().message.empty());
  }
  check_tool_calls(whole);
  fold(whole);
  return 0;
}
