#include "troupe/tools/http_template.hpp"

#include <catch2/catch.hpp>

using troupe::tools::expand_template;
using troupe::tools::is_private_address;
using troupe::tools::template_part;
using troupe::tools::template_placeholders;
using troupe::tools::template_values;

namespace ip = boost::asio::ip;

TEST_CASE("http template percent-encodes a URL value so it cannot change the host or add a "
          "query parameter",
          "[tools][http_template]") {
  const template_values values{{"q", "a b&admin=1#frag/../@evil.example:80?x"}};
  auto url =
      expand_template("https://api.example/search?q={q}&lang=en", values, template_part::url);
  REQUIRE(url);
  CHECK(*url == "https://api.example/search?q=a%20b%26admin%3D1%23frag%2F..%2F%40evil.example%3A80%"
                "3Fx&lang=en");
}

TEST_CASE("http template JSON-escapes a body value so it stays inside its string",
          "[tools][http_template]") {
  const template_values values{{"text", "x\", \"role\": \"admin\\\n\x01"}};
  auto body = expand_template(R"({"text": "{text}", "n": 1})", values, template_part::body);
  REQUIRE(body);
  CHECK(*body == R"({"text": "x\", \"role\": \"admin\\\n\u0001", "n": 1})");
}

TEST_CASE("http template refuses a header value with CR or LF (no header can be added)",
          "[tools][http_template]") {
  auto header =
      expand_template("Bearer {token}", {{"token", "abc\r\nX-Admin: 1"}}, template_part::header);
  REQUIRE_FALSE(header);
  CHECK(header.error().message.find("control character") != std::string::npos);
  auto fine = expand_template("Bearer {token}", {{"token", "abc"}}, template_part::header);
  REQUIRE(fine);
  CHECK(*fine == "Bearer abc");
}

TEST_CASE("http template fails on an unknown placeholder, keeps other braces literal and "
          "never expands a value twice",
          "[tools][http_template]") {
  CHECK_FALSE(expand_template("{missing}", {}, template_part::body));
  auto literal = expand_template(R"({"a": {"b": "{v}"}, "c": "{ not one }"})",
                                 {{"v", "{v}{w}"}, {"w", "boom"}}, template_part::body);
  REQUIRE(literal);
  CHECK(*literal == R"({"a": {"b": "{v}{w}"}, "c": "{ not one }"})");
  auto names = template_placeholders("{a}/{b}?x={a}&y={}");
  REQUIRE(names);
  CHECK(*names == std::vector<std::string>{"a", "b"});
}

TEST_CASE("private address rule covers loopback, RFC 1918, link-local, CGNAT, ULA and "
          "IPv4-mapped forms",
          "[tools][http_template]") {
  for (const char* a : {"127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
                        "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "::", "fe80::1",
                        "fd00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "224.0.0.1"}) {
    INFO(a);
    CHECK(is_private_address(ip::make_address(a)));
  }
  for (const char* a :
       {"8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:1.1.1.1"}) {
    INFO(a);
    CHECK_FALSE(is_private_address(ip::make_address(a)));
  }
}
