// The web console as `troupe serve` serves it (api/src/console.cpp): the page and its
// assets with their cache headers, ETags, media types and Content-Security-Policy, and the
// refusals: unknown names, another version, and every way of spelling `..`.

#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "support/api_server.hpp"

using namespace troupe::test;

namespace {

/// The versioned base of the page's assets ("/console/<hex>"), read from the page.
std::string asset_base(const std::string& page) {
  std::smatch m;
  const std::regex app(R"re(src="(/console/[0-9a-f]{16})/app\.js")re");
  REQUIRE(std::regex_search(page, m, app));
  return m[1].str();
}

void check_security_headers(const std::string& answer) {
  const auto csp = header_value(answer, "Content-Security-Policy");
  CHECK_THAT(csp, Catch::Contains("default-src 'self'") && Catch::Contains("script-src 'self'") &&
                      Catch::Contains("style-src 'self'") && Catch::Contains("object-src 'none'") &&
                      Catch::Contains("frame-ancestors 'none'"));
  CHECK_THAT(csp, !Catch::Contains("unsafe-inline") && !Catch::Contains("unsafe-eval"));
  CHECK(header_value(answer, "X-Content-Type-Options") == "nosniff");
}

} // namespace

TEST_CASE(
    "the console's page is served at / with no-cache, an ETag and a policy without inline code",
    "[integration][console]") {
  api_server s;
  REQUIRE(s.port() != 0);
  const auto page = http_exchange(s.port(), "GET", "/");
  REQUIRE(status_of(page) == 200);
  CHECK(header_value(page, "Content-Type") == "text/html; charset=utf-8");
  CHECK(header_value(page, "Cache-Control") == "no-cache");
  check_security_headers(page);
  const auto body = body_of(page);
  CHECK_THAT(body, Catch::Contains("<script type=\"module\""));
  // No inline script or style: every script and stylesheet is a file of the console.
  CHECK_THAT(body, !Catch::Contains("<script>") && !Catch::Contains("<style") &&
                       !Catch::Contains("style=") && !Catch::Contains("{{asset_base}}"));
  asset_base(body);

  // Revalidation: the same ETag is a 304 without a body.
  const auto etag = header_value(page, "ETag");
  REQUIRE(etag.size() == 66); // a quoted SHA-256
  const auto again = http_exchange(s.port(), "GET", "/", {}, "If-None-Match: " + etag + "\r\n");
  CHECK(status_of(again) == 304);
  CHECK(body_of(again).empty());
  CHECK(status_of(http_exchange(s.port(), "GET", "/", {}, "If-None-Match: \"other\"\r\n")) == 200);
}

TEST_CASE("console assets are cached for a year as immutable under their version, with their "
          "media types",
          "[integration][console]") {
  api_server s;
  REQUIRE(s.port() != 0);
  const auto base = asset_base(body_of(http_exchange(s.port(), "GET", "/")));
  const std::pair<std::string, std::string> assets[] = {
      {"/app.js", "text/javascript; charset=utf-8"},
      {"/style.css", "text/css; charset=utf-8"},
      {"/icon.svg", "image/svg+xml"},
      {"/views/chat.js", "text/javascript; charset=utf-8"},
  };
  for (const auto& [name, type] : assets) {
    INFO(name);
    const auto answer = http_exchange(s.port(), "GET", base + name);
    REQUIRE(status_of(answer) == 200);
    CHECK(header_value(answer, "Content-Type") == type);
    CHECK(header_value(answer, "Cache-Control") == "public, max-age=31536000, immutable");
    CHECK(header_value(answer, "ETag").size() == 66);
    check_security_headers(answer);
    CHECK(std::stoul(header_value(answer, "Content-Length")) == body_of(answer).size());
    CHECK_FALSE(body_of(answer).empty());
    const auto revalidated =
        http_exchange(s.port(), "GET", base + name, {},
                      "If-None-Match: " + header_value(answer, "ETag") + "\r\n");
    CHECK(status_of(revalidated) == 304);
  }
  // HEAD: the headers without the body.
  const auto head = http_exchange(s.port(), "HEAD", base + "/app.js");
  CHECK(status_of(head) == 200);
  CHECK(body_of(head).empty());
  // The API is where it was.
  CHECK(status_of(http_exchange(s.port(), "GET", "/healthz")) == 200);
  CHECK(status_of(http_exchange(s.port(), "GET", "/api/v1/me")) == 401);
  CHECK(status_of(s.call("GET", "/metrics", s.admin())) == 200);
}

TEST_CASE("unknown console paths, another version and every spelling of .. answer 404",
          "[integration][console]") {
  api_server s;
  REQUIRE(s.port() != 0);
  const auto base = asset_base(body_of(http_exchange(s.port(), "GET", "/")));
  const std::string refused[] = {
      base + "/nope.js",
      base + "/views/nope.js",
      "/console/0000000000000000/app.js",
      "/console/app.js",
      base + "/a/b/app.js",
      base + "/../../../../etc/passwd",
      base + "/views/../../../../etc/passwd",
      base + "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
      base + "/%2E%2E%2F%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
      base + "/views/..%2f..%2f..%2f..%2fetc%2fpasswd",
      base + "/..%2fapp.js",
      base + "/views%2f..%2fapp.js",
      base + "/%2e%2e/app.js",
      base + "/.%2fapp.js",
      base + "/app.js%00.css",
      "/console/" + std::string(base.substr(9)) + "%2fapp.js",
      "/console/..%2f..%2fetc/passwd",
      "/console/%2e%2e/%2e%2e",
  };
  for (const auto& target : refused) {
    INFO(target);
    const auto answer = http_exchange(s.port(), "GET", target);
    CHECK(status_of(answer) == 404);
    CHECK_THAT(body_of(answer), !Catch::Contains("root:"));
  }
  // A console 404 carries the same headers and is never cached.
  const auto missing = http_exchange(s.port(), "GET", base + "/nope.js");
  check_security_headers(missing);
  CHECK(header_value(missing, "Cache-Control") == "no-store");
  CHECK_THAT(body_of(missing), Catch::Contains(R"("code":"not_found")"));
}
