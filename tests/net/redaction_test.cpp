// Credentials never reach a log: the header redaction behind TROUPE_CURL_VERBOSE.

#include <catch2/catch.hpp>

#include "troupe/net/redaction.hpp"

using namespace troupe::net;

TEST_CASE("redaction hides the values of credential headers in any case", "[net][redaction]") {
  const std::string sent = "POST /v1/chat/completions HTTP/1.1\r\n"
                           "Host: 127.0.0.1:9000\r\n"
                           "authorization: Bearer sk-marker-1\r\n"
                           "X-Api-Key: sk-marker-2\r\n"
                           "Cookie: session=sk-marker-3\r\n"
                           "Proxy-Authorization: Basic sk-marker-4\r\n"
                           "x-goog-api-key: sk-marker-5\r\n"
                           "Content-Type: application/json\r\n"
                           "\r\n";
  const auto out = redact_headers(sent);
  for (const char* marker :
       {"sk-marker-1", "sk-marker-2", "sk-marker-3", "sk-marker-4", "sk-marker-5"}) {
    CHECK(out.find(marker) == std::string::npos);
  }
  CHECK_THAT(out, Catch::Contains("POST /v1/chat/completions HTTP/1.1\r\n"));
  CHECK_THAT(out, Catch::Contains("Host: 127.0.0.1:9000\r\n"));
  CHECK_THAT(out, Catch::Contains("authorization: [redacted]\r\n"));
  CHECK_THAT(out, Catch::Contains("X-Api-Key: [redacted]\r\n"));
  CHECK_THAT(out, Catch::Contains("Content-Type: application/json\r\n"));
  CHECK(out.ends_with("\r\n\r\n"));
}

TEST_CASE("redaction handles single received lines, bare LF and lines without a value",
          "[net][redaction]") {
  CHECK(redact_headers("Set-Cookie: id=sk-x; HttpOnly\r\n") == "Set-Cookie: [redacted]\r\n");
  CHECK(redact_headers("x-api-key: sk-y\n") == "x-api-key: [redacted]\n");
  CHECK(redact_headers("Authorization:sk-z") == "Authorization: [redacted]");
  CHECK(redact_headers("HTTP/1.1 401 Unauthorized: token\r\n") ==
        "HTTP/1.1 401 Unauthorized: token\r\n");
  CHECK(redact_headers("Content-Length: 12\r\n") == "Content-Length: 12\r\n");
  CHECK(redact_headers("").empty());
  CHECK(is_secret_header("X-Auth-Token"));
  CHECK(is_secret_header("api-key"));
  CHECK_FALSE(is_secret_header("Keep-Alive"));
  CHECK_FALSE(is_secret_header("Accept"));
}
