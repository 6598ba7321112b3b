#include <catch2/catch.hpp>

#include <string>

#include "troupe/net/http_message.hpp"

using namespace troupe::net;

TEST_CASE("percent decoding turns escapes into bytes and '+' into a space only when asked",
          "[net][http]") {
  CHECK(percent_decode("%41%62c") == "Abc");
  CHECK(percent_decode("caf%C3%A9") == "caf\xC3\xA9");
  CHECK(percent_decode("a+b") == "a+b");
  CHECK(percent_decode("a+b", true) == "a b");
  CHECK(percent_decode("%2B", true) == "+");
  CHECK(percent_decode("a%00b") == std::string("a\0b", 3));
  CHECK(percent_decode("") == "");
}

TEST_CASE("percent decoding keeps malformed escapes literally and decodes the valid ones beside "
          "them",
          "[net][http]") {
  CHECK(percent_decode("100%") == "100%");
  CHECK(percent_decode("%4") == "%4");
  CHECK(percent_decode("%%41") == "%A");
  CHECK(percent_decode("%zz%20x") == "%zz x");
  CHECK(percent_decode("%g1+", true) == "%g1 ");
}

TEST_CASE("query parameters decode keys and values and take the first of repeated names",
          "[net][http]") {
  http_request req;
  req.query = "&&na%6De=first&name=second&eq=1=2&plus=%2B+x&flag";
  CHECK(req.query_param("name") == "first");
  CHECK(req.query_param("eq") == "1=2");
  CHECK(req.query_param("plus") == "+ x");
  CHECK(req.query_param("flag").empty());
  CHECK(req.query_param("").empty());
}

TEST_CASE("query parameters keep stray '%' and characters a URL may not hold literally",
          "[net][http]") {
  http_request req;
  req.query = "pipe=a|b&bad=%zz&tail=50%&quote=\"x\"&ok=%41";
  CHECK(req.query_param("pipe") == "a|b");
  CHECK(req.query_param("bad") == "%zz");
  CHECK(req.query_param("tail") == "50%");
  CHECK(req.query_param("quote") == "\"x\"");
  CHECK(req.query_param("ok") == "A");
}

TEST_CASE("an empty query has no parameters", "[net][http]") {
  http_request req;
  CHECK(req.query_param("a").empty());
}
