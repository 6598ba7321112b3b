#include <catch2/catch.hpp>

#include "troupe/net/sse.hpp"

using namespace troupe::net;

TEST_CASE("sse event carries event, id, retry and data fields", "[net][sse]") {
  const auto text = format_sse_event({"message", "7", 3000, R"({"delta":"hi"})"});
  CHECK(text == "event: message\nid: 7\nretry: 3000\ndata: {\"delta\":\"hi\"}\n\n");
}

TEST_CASE("sse data spanning lines becomes one data line per line", "[net][sse]") {
  CHECK(format_sse_event({"", "", {}, "a\nb\r\nc\rd"}) == "data: a\ndata: b\ndata: c\ndata: d\n\n");
  CHECK(format_sse_event({"", "", {}, "end\n"}) == "data: end\ndata: \n\n");
  CHECK(format_sse_event({"", "", {}, ""}) == "data: \n\n");
}

TEST_CASE("sse payloads cannot inject events or fields", "[net][sse]") {
  const auto text = format_sse_event({"mes\nsage", "1\n2", {}, "x\n\nevent: evil\ndata: y"});
  // The blank line inside data is a data line, never an event boundary.
  CHECK(text == "event: message\nid: 12\ndata: x\ndata: \ndata: event: evil\ndata: data: y\n\n");
  CHECK(text.find("\n\n") == text.size() - 2);
}

TEST_CASE("sse comments are single lines ignored by clients", "[net][sse]") {
  CHECK(format_sse_comment("ping") == ": ping\n\n");
  CHECK(format_sse_comment("a\nb") == ": ab\n\n");
}
