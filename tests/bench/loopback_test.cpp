#include <string>

#include <catch2/catch.hpp>

#include "troupe/bench/loopback.hpp"

using troupe::errc;
using troupe::bench::check_loopback_url;

TEST_CASE("bench accepts loopback targets only", "[bench][loopback]") {
  for (const char* ok : {"http://127.0.0.1:8081", "http://127.3.2.1:9/v1/chat/completions",
                         "http://[::1]:8081/", "http://localhost:8081"}) {
    INFO(ok);
    CHECK(check_loopback_url(ok).has_value());
  }
  const auto u = check_loopback_url("http://127.0.0.1:8081/api/chat?x=1");
  REQUIRE(u);
  CHECK(u->port == 8081);
  CHECK(u->target == "/api/chat?x=1");
  CHECK(u->origin == "http://127.0.0.1:8081");
  CHECK(check_loopback_url("http://[::1]:5/")->origin == "http://[::1]:5");
}

TEST_CASE("bench refuses targets outside loopback without resolving them", "[bench][loopback]") {
  // None of these is resolved or contacted: the check reads the URL text only. A name
  // other than localhost is refused even if it would resolve to 127.0.0.1, because
  // finding out would already send a DNS query.
  for (const char* bad : {"http://10.0.0.1:8081/", "http://8.8.8.8/", "http://example.com:8081/",
                          "http://troupe-bench-target.invalid/", "http://[::ffff:8.8.8.8]:80/",
                          "http://0.0.0.0:80/", "http://[2001:db8::1]/"}) {
    INFO(bad);
    const auto r = check_loopback_url(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::permission_denied);
    CHECK(r.error().message.find("loopback") != std::string::npos);
  }
  CHECK(check_loopback_url("https://127.0.0.1/").error().code == errc::invalid_argument);
  CHECK(check_loopback_url("not a url").error().code == errc::invalid_argument);
}
