#include <string>

#include <catch2/catch.hpp>

#include "troupe/net/http_request_parser.hpp"

using troupe::net::http_method;
using troupe::net::parse_http_request;
using troupe::net::request_limits;
using troupe::net::request_read_failure;

TEST_CASE("request parser reads a request with a body and splits its target", "[net][http]") {
  const std::string bytes = "POST /api/v1/runs/7?x=1&y=%20 HTTP/1.1\r\nHost: a\r\n"
                            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
  auto r = parse_http_request(bytes, {});
  REQUIRE(r);
  CHECK(r->request.method == http_method::post);
  CHECK(r->request.target == "/api/v1/runs/7?x=1&y=%20");
  CHECK(r->request.path == "/api/v1/runs/7");
  CHECK(r->request.query == "x=1&y=%20");
  CHECK(r->request.query_param("y") == " ");
  CHECK(r->request.header("content-type") == "application/json");
  CHECK(r->request.body == "{}");
  CHECK(r->version == 11);
  CHECK(r->keep_alive);
  CHECK(r->consumed == bytes.size());
}

TEST_CASE("request parser decodes a chunked body and leaves a pipelined request", "[net][http]") {
  const std::string first = "PUT /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n";
  const std::string second = "GET /g HTTP/1.0\r\n\r\n";
  auto r = parse_http_request(first + second, {});
  REQUIRE(r);
  CHECK(r->request.body == "abcde");
  CHECK(r->consumed == first.size());
  auto next = parse_http_request(std::string(first + second).substr(r->consumed), {});
  REQUIRE(next);
  CHECK(next->request.path == "/g");
  CHECK(next->version == 10);
  CHECK_FALSE(next->keep_alive);
}

TEST_CASE("request parser reports what the server answers 400, 413 and 431 for", "[net][http]") {
  const request_limits small{.header_limit_bytes = 64, .body_limit_bytes = 4};
  auto big_header =
      parse_http_request("GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n", small);
  REQUIRE_FALSE(big_header);
  CHECK(big_header.error().failure == request_read_failure::headers_too_large);

  auto big_body = parse_http_request("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", small);
  REQUIRE_FALSE(big_body);
  CHECK(big_body.error().failure == request_read_failure::body_too_large);

  auto garbage = parse_http_request("GET / FTP/9\r\n\r\n", {});
  REQUIRE_FALSE(garbage);
  CHECK(garbage.error().failure == request_read_failure::malformed);
}

TEST_CASE("a header whose request line and fields are each within the limit but not together "
          "is too large",
          "[net][http]") {
  // Beast limits the request line and the fields separately (found by
  // fuzz/http_request_fuzz); the header limit is for the whole.
  const request_limits small{.header_limit_bytes = 64, .body_limit_bytes = 4};
  const auto request =
      "GET /" + std::string(40, 'p') + " HTTP/1.1\r\nX: " + std::string(40, 'a') + "\r\n\r\n";
  auto r = parse_http_request(request, small);
  REQUIRE_FALSE(r);
  CHECK(r.error().failure == request_read_failure::headers_too_large);
  auto fits = parse_http_request("GET /" + std::string(20, 'p') +
                                     " HTTP/1.1\r\nX: " + std::string(20, 'a') + "\r\n\r\n",
                                 small);
  CHECK(fits);
}

TEST_CASE("request parser reports a request the bytes do not finish as incomplete", "[net][http]") {
  for (const std::string cut : {"", "GET / HT", "GET / HTTP/1.1\r\nHost: a\r\n",
                                "POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc"}) {
    CAPTURE(cut);
    auto r = parse_http_request(cut, {});
    REQUIRE_FALSE(r);
    CHECK(r.error().failure == request_read_failure::incomplete);
  }
}
