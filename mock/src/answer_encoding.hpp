#pragma once

/// \file
/// An answer plan written in a wire format: the SSE events of a stream, a whole body, an
/// error body. Every byte comes from troupe_net's wire encoders (wire_encode.hpp) except
/// the deliberately broken chunk of the `malformed` fault. Private to troupe_mock.

#include <string>
#include <string_view>
#include <vector>

#include "answer_plan.hpp"
#include "troupe/net/http_message.hpp"
#include "troupe/net/provider_wire.hpp"

namespace troupe::mock::detail {

/// The plan as OpenAI chat.completion.chunk events, one SSE event per element: the role,
/// the text chunks, each call's first fragment (id and name), the argument fragments
/// interleaved across calls, the finish, usage when asked for, and [DONE] last.
std::vector<std::string> openai_events(const answer_plan& p);

/// The plan as Anthropic Messages events: message_start, a text block, one tool_use block
/// per call, message_delta and message_stop last.
std::vector<std::string> anthropic_events(const answer_plan& p);

/// The plan as a whole chat.completion or Anthropic message body.
std::string whole_body(const answer_plan& p);

/// An error answer in the wire's own shape.
net::http_response error_response(net::wire_format format, unsigned status, std::string_view type,
                                  std::string_view message);

/// The `malformed` fault's chunk: an OpenAI data line whose JSON breaks off mid-string.
std::string malformed_chunk();

} // namespace troupe::mock::detail
