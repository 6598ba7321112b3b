#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "troupe/net/sse_parser.hpp"

using troupe::net::sse_message;
using troupe::net::sse_parser;

namespace {

struct seen {
  std::string event;
  std::string data;
  std::string id;
};

std::vector<seen> parse_in_pieces(std::string_view text, std::size_t piece) {
  sse_parser parser;
  std::vector<seen> out;
  for (std::size_t at = 0; at < text.size(); at += piece) {
    auto ok = parser.feed(text.substr(at, piece), [&](const sse_message& m) {
      out.push_back({std::string(m.event), std::string(m.data), std::string(m.id)});
    });
    REQUIRE(ok);
  }
  return out;
}

} // namespace

TEST_CASE("sse parser yields the same events whatever byte boundaries the reads have",
          "[net][sse]") {
  const std::string text = "event: a\ndata: one\n\n: comment\r\ndata: two\r\ndata: lines\r\n\r\n"
                           "id: 7\rdata:three\r\r";
  for (std::size_t piece = 1; piece <= text.size(); ++piece) {
    const auto events = parse_in_pieces(text, piece);
    REQUIRE(events.size() == 3);
    CHECK(events[0].event == "a");
    CHECK(events[0].data == "one");
    CHECK(events[1].event.empty());
    CHECK(events[1].data == "two\nlines");
    CHECK(events[2].data == "three");
    CHECK(events[2].id == "7");
  }
}

TEST_CASE("sse parser ignores comments and events without data", "[net][sse]") {
  const auto events = parse_in_pieces(": ping\n\nevent: lonely\n\ndata: x\n\n", 64);
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == "x");
  CHECK(events[0].event.empty());
}

TEST_CASE("sse parser removes exactly one space after the colon", "[net][sse]") {
  const auto events = parse_in_pieces("data:  two spaces\ndata\n\n", 100);
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == " two spaces\n");
}

TEST_CASE("sse parser reads the retry field and ignores a malformed one", "[net][sse]") {
  sse_parser parser;
  REQUIRE(parser.feed("retry: 2500\n\nretry: soon\n\n", [](const sse_message&) {}));
  REQUIRE(parser.retry_ms());
  CHECK(*parser.retry_ms() == 2500);
}

TEST_CASE("sse parser skips a byte order mark split across reads", "[net][sse]") {
  const std::string text = "\xEF\xBB\xBF"
                           "data: bom\n\n";
  for (std::size_t piece = 1; piece < 5; ++piece) {
    const auto events = parse_in_pieces(text, piece);
    REQUIRE(events.size() == 1);
    CHECK(events[0].data == "bom");
  }
}

TEST_CASE("sse parser rejects an endless line instead of buffering it", "[net][sse]") {
  sse_parser parser({.max_line_bytes = 1024, .max_event_bytes = 4096});
  int events = 0;
  const std::string chunk(300, 'x');
  REQUIRE(parser.feed("data: ok\n\n", [&](const sse_message&) { ++events; }));
  troupe::expected<void> result;
  for (int i = 0; i < 10 && result; ++i) {
    result = parser.feed(chunk, [&](const sse_message&) { ++events; });
  }
  REQUIRE_FALSE(result);
  CHECK(result.error().code == troupe::errc::limit_exceeded);
  CHECK(events == 1);
}

TEST_CASE("sse parser rejects an event whose data outgrows its bound", "[net][sse]") {
  sse_parser parser({.max_line_bytes = 1024, .max_event_bytes = 2048});
  std::string text;
  for (int i = 0; i < 10; ++i) {
    text += "data: " + std::string(500, 'y') + "\n";
  }
  auto result = parser.feed(text, [](const sse_message&) {});
  REQUIRE_FALSE(result);
  CHECK(result.error().code == troupe::errc::limit_exceeded);
}

TEST_CASE("sse parser reports an unfinished event at end of stream", "[net][sse]") {
  sse_parser parser;
  int events = 0;
  REQUIRE(parser.feed("data: complete\n\ndata: cut", [&](const sse_message&) { ++events; }));
  CHECK(events == 1);
  CHECK(parser.has_partial_event());
}

TEST_CASE("sse parser stops when the callback asks it to", "[net][sse]") {
  sse_parser parser;
  int events = 0;
  REQUIRE(parser.feed("data: 1\n\ndata: 2\n\n", [&](const sse_message&) {
    ++events;
    return false;
  }));
  CHECK(events == 1);
}
