#include <catch2/catch.hpp>

#include <string>

#include "troupe/runtime/base64.hpp"

using namespace troupe;

TEST_CASE("base64 encodes the RFC 4648 test vectors with padding", "[runtime][base64]") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("foob") == "Zm9vYg==");
  CHECK(base64_encode("fooba") == "Zm9vYmE=");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
}

TEST_CASE("base64 decodes the RFC 4648 test vectors with and without padding",
          "[runtime][base64]") {
  for (const auto& [plain, coded] : {std::pair<std::string, std::string>{"", ""},
                                     {"f", "Zg=="},
                                     {"fo", "Zm8="},
                                     {"foo", "Zm9v"},
                                     {"foob", "Zm9vYg=="},
                                     {"fooba", "Zm9vYmE="},
                                     {"foobar", "Zm9vYmFy"}}) {
    CHECK(base64_decode(coded).value() == plain);
    auto unpadded = coded;
    while (!unpadded.empty() && unpadded.back() == '=') {
      unpadded.pop_back();
    }
    CHECK(base64_decode(unpadded).value() == plain);
  }
}

TEST_CASE("base64 ignores whitespace anywhere, line breaks of MIME bodies included",
          "[runtime][base64]") {
  CHECK(base64_decode(" Zm9v\r\nYmFy\t").value() == "foobar");
  CHECK(base64_decode("Zm9vYg\n==\n").value() == "foob");
}

TEST_CASE("base64 round-trips every byte value and payloads longer than one piece",
          "[runtime][base64]") {
  std::string bytes;
  for (int i = 0; i < 256; ++i) {
    bytes.push_back(static_cast<char>(i));
  }
  CHECK(base64_decode(base64_encode(bytes)).value() == bytes);
  std::string big;
  for (int i = 0; i < 300'001; ++i) {
    big.push_back(static_cast<char>((i * 131) % 251));
  }
  const auto coded = base64_encode(big);
  CHECK(coded.size() == (big.size() + 2) / 3 * 4);
  CHECK(base64_decode(coded).value() == big);
}

TEST_CASE("base64 rejects characters outside the alphabet, naming their offset",
          "[runtime][base64]") {
  const auto junk = base64_decode("Zm9v*mFy");
  REQUIRE_FALSE(junk);
  CHECK(junk.error().code == errc::invalid_argument);
  CHECK(junk.error().message == "invalid base64 character at offset 4");
  // The URL-safe alphabet is a different encoding, not accepted here.
  CHECK_FALSE(base64_decode("Zm-_"));
}

TEST_CASE("base64 rejects data after padding and a lone trailing character", "[runtime][base64]") {
  const auto after = base64_decode("Zg==Zg==");
  REQUIRE_FALSE(after);
  CHECK(after.error().message == "invalid base64 character at offset 4");
  const auto lone = base64_decode("Zm9vY");
  REQUIRE_FALSE(lone);
  CHECK(lone.error().code == errc::invalid_argument);
  CHECK(lone.error().message.find("truncated") != std::string::npos);
}
