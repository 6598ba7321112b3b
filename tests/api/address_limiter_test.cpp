#include <boost/asio/ip/address.hpp>
#include <catch2/catch.hpp>

#include "troupe/api/auth.hpp"

using boost::asio::ip::make_address;
using troupe::api::address_limiter;

TEST_CASE("an address limiter refuses an address whose bucket is empty, and only that one",
          "[api][auth]") {
  address_limiter limits(0.001, 2, 100);
  const auto a = make_address("192.0.2.1");
  CHECK_FALSE(limits.retry_after(a));
  limits.charge(a);
  CHECK_FALSE(limits.retry_after(a));
  limits.charge(a);
  const auto wait = limits.retry_after(a);
  REQUIRE(wait);
  CHECK(*wait >= 1);
  CHECK_FALSE(limits.retry_after(make_address("192.0.2.2")));
}

TEST_CASE("an address limiter counts an IPv6 address by its /64 and a mapped IPv4 address as "
          "itself",
          "[api][auth]") {
  address_limiter limits(0.001, 1, 100);
  limits.charge(make_address("2001:db8:1:2::1"));
  CHECK(limits.retry_after(make_address("2001:db8:1:2:ffff::9")));
  CHECK_FALSE(limits.retry_after(make_address("2001:db8:1:3::1")));
  limits.charge(make_address("::ffff:198.51.100.7"));
  CHECK(limits.retry_after(make_address("198.51.100.7")));
  CHECK(limits.size() == 2);
}

TEST_CASE("an address limiter tracks a bounded number of addresses, forgetting the least "
          "recently seen",
          "[api][auth]") {
  address_limiter limits(0.001, 1, 3);
  const auto first = make_address("10.0.0.1");
  limits.charge(first);
  REQUIRE(limits.retry_after(first));
  // A flood of new addresses never grows the table past its bound ...
  for (int i = 2; i < 1000; ++i) {
    limits.charge(make_address("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256)));
    REQUIRE(limits.size() <= 3);
  }
  // ... and the oldest address was forgotten: it starts again with a full bucket.
  CHECK_FALSE(limits.retry_after(first));
  // A recently seen address stays while others come, until it is the least recent.
  const auto kept = make_address("10.9.9.9");
  limits.charge(kept);
  limits.charge(make_address("10.8.0.1"));
  limits.charge(make_address("10.8.0.2"));
  CHECK(limits.retry_after(kept)); // seen again: now the most recent
  limits.charge(make_address("10.8.0.3"));
  limits.charge(make_address("10.8.0.4"));
  CHECK(limits.retry_after(kept));
  limits.charge(make_address("10.8.0.5"));
  limits.charge(make_address("10.8.0.6"));
  limits.charge(make_address("10.8.0.7"));
  CHECK_FALSE(limits.retry_after(kept));
}
