#include <catch2/catch.hpp>

#include <set>

#include "troupe/runtime/base64.hpp"
#include "troupe/runtime/crypto.hpp"

using namespace troupe;

namespace {

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

} // namespace

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[runtime][crypto]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklm"
                   "nopqklmnopqrlmnopqrsmnopqrstnopqrstu") ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(sha256_hex(std::string(1'000'000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 gives the same digest for data fed in pieces", "[runtime][crypto]") {
  const std::string text(200, 'z');
  sha256_hasher h;
  h.update(text.substr(0, 63));
  h.update(text.substr(63, 2));
  h.update(text.substr(65));
  CHECK(to_hex(h.finish()) == sha256_hex(text));
}

TEST_CASE("sha256 of the million-a vector fed one byte at a time matches FIPS 180-4",
          "[runtime][crypto]") {
  sha256_hasher h;
  for (int i = 0; i < 1'000'000; ++i) {
    h.update("a");
  }
  CHECK(to_hex(h.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("a moved sha256 hasher keeps the bytes fed before the move", "[runtime][crypto]") {
  sha256_hasher a;
  a.update("ab");
  sha256_hasher b = std::move(a);
  b.update("c");
  CHECK(to_hex(b.finish()) == sha256_hex("abc"));
}

TEST_CASE("hmac-sha256 matches RFC 4231", "[runtime][crypto]") {
  CHECK(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (test case 6).
  CHECK(to_hex(hmac_sha256(std::string(131, '\xaa'),
                           "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // Test case 3: 50 bytes of 0xdd under 20 bytes of 0xaa.
  CHECK(to_hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Test case 4: the key is the bytes 0x01 to 0x19.
  std::string key4;
  for (char c = 1; c <= 25; ++c) {
    key4.push_back(c);
  }
  CHECK(to_hex(hmac_sha256(key4, std::string(50, '\xcd'))) ==
        "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test case 5 publishes only the first 128 bits.
  CHECK(to_hex(hmac_sha256(std::string(20, '\x0c'), "Test With Truncation")).substr(0, 32) ==
        "a3b6167473100ee06e0c796c2955552b");
  // Test case 7: key and data both longer than the block.
  CHECK(to_hex(hmac_sha256(std::string(131, '\xaa'),
                           "This is a test using a larger than block-size key and a larger than "
                           "block-size data. The key needs to be hashed before being used by the "
                           "HMAC algorithm.")) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST_CASE("random bytes differ between calls and constant-time compare is exact",
          "[runtime][crypto]") {
  const auto a = random_bytes(32);
  const auto b = random_bytes(32);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->size() == 32);
  CHECK(*a != *b);
  CHECK(constant_time_equal("abc", "abc"));
  CHECK_FALSE(constant_time_equal("abc", "abd"));
  CHECK_FALSE(constant_time_equal("abc", "abcd"));
}

TEST_CASE("constant-time compare treats empty inputs and embedded zero bytes exactly",
          "[runtime][crypto]") {
  CHECK(constant_time_equal("", ""));
  CHECK_FALSE(constant_time_equal("", "a"));
  CHECK(constant_time_equal(std::string("a\0b", 3), std::string("a\0b", 3)));
  CHECK_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST_CASE("random bytes come in the size asked for, large requests included", "[runtime][crypto]") {
  CHECK(random_bytes(0).value().empty());
  const auto big = random_bytes(100'000);
  REQUIRE(big);
  CHECK(big->size() == 100'000);
  // All 256 byte values appear in 100,000 uniform bytes (missing one has odds ~e^-390).
  std::set<char> seen(big->begin(), big->end());
  CHECK(seen.size() == 256);
}

namespace {

bool is_lower_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

} // namespace

TEST_CASE("uuids are canonical version 4, RFC 4122 variant, and do not repeat",
          "[runtime][crypto]") {
  std::set<std::string> seen;
  for (int i = 0; i < 10'000; ++i) {
    const auto id = new_uuid();
    REQUIRE(id.size() == 36);
    for (std::size_t j = 0; j < id.size(); ++j) {
      if (j == 8 || j == 13 || j == 18 || j == 23) {
        REQUIRE(id[j] == '-');
      } else {
        REQUIRE(is_lower_hex(id[j]));
      }
    }
    REQUIRE(id[14] == '4');
    REQUIRE((id[19] == '8' || id[19] == '9' || id[19] == 'a' || id[19] == 'b'));
    seen.insert(id);
  }
  CHECK(seen.size() == 10'000);
  CHECK(seen.count("00000000-0000-4000-8000-000000000000") == 0);
}

// Vectors from the command line:
//   python3 -c "import hashlib; print(hashlib.sha1(b'abc').hexdigest())"
//   printf 'A%.0s' {1..32} | openssl enc -aes-256-cbc -nopad
//     -K 69b71d79f8218a39259a7a29aabb2dbafc31cb3d35db7e39ebbf3d0010831051
//     -iv 69b71d79f8218a39259a7a29aabb2dba | xxd -p
// (the key is base64 "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG=", the iv its first half).
TEST_CASE("sha1_hex matches the FIPS 180 vector", "[runtime][crypto]") {
  CHECK(sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST_CASE("aes_256_cbc encrypts as OpenSSL's command line does and decrypts back",
          "[runtime][crypto]") {
  const auto key = *base64_decode("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG=");
  REQUIRE(key.size() == 32);
  const auto iv = key.substr(0, 16);
  const std::string plain(32, 'A');
  auto sealed = aes_256_cbc_encrypt(key, iv, plain);
  REQUIRE(sealed);
  CHECK(to_hex(*sealed) == "782c887b4fae8a28c606ae385eeb719ebe86ef64d239ac299b16cd92089bb246");
  auto opened = aes_256_cbc_decrypt(key, iv, *sealed);
  REQUIRE(opened);
  CHECK(*opened == plain);
}

TEST_CASE("aes_256_cbc refuses a wrong key, iv or a length that is not whole blocks",
          "[runtime][crypto]") {
  const std::string key(32, 'k');
  const std::string iv(16, 'i');
  CHECK_FALSE(aes_256_cbc_encrypt(key.substr(0, 31), iv, std::string(16, 'x')));
  CHECK_FALSE(aes_256_cbc_encrypt(key, iv.substr(0, 15), std::string(16, 'x')));
  auto odd = aes_256_cbc_decrypt(key, iv, std::string(17, 'x'));
  REQUIRE_FALSE(odd);
  CHECK(odd.error().code == errc::invalid_argument);
  CHECK(aes_256_cbc_encrypt(key, iv, ""));
}

TEST_CASE("aes-256-cbc with pkcs7 matches openssl and Feishu's published example",
          "[runtime][crypto]") {
  const auto key_digest = sha256("test key");
  const std::string key(reinterpret_cast<const char*>(key_digest.data()), key_digest.size());
  // Feishu's example (open.feishu.cn, "Encrypt the event"): encrypt key "test key",
  // {"encrypt":"P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk="} is "hello world"; the
  // decoded bytes are the iv 3f7ef0f9564898d80f10ed5106127a46 and one block.
  const auto iv = from_hex("3f7ef0f9564898d80f10ed5106127a46");
  const auto data = from_hex("d2a5ee7eb3ca621b106d6945e1338219");
  CHECK(aes_256_cbc_pkcs7_decrypt(key, iv, data).value_or("error") == "hello world");
  // printf 'hello feishu, sixteen+ bytes' | openssl enc -aes-256-cbc
  //   -K $(printf 'test key' | sha256sum | cut -d' ' -f1) -iv 30313233343536373839616263646566
  const auto openssl_out =
      from_hex("17b30384d5456f22e3d4fb068ee686b2627349495ea274b8292b0e90902e6dc4");
  CHECK(aes_256_cbc_pkcs7_encrypt(key, "0123456789abcdef", "hello feishu, sixteen+ bytes")
            .value_or("error") == openssl_out);
  CHECK(aes_256_cbc_pkcs7_decrypt(key, "0123456789abcdef", openssl_out).value_or("error") ==
        "hello feishu, sixteen+ bytes");
  // A whole block of padding for a multiple of 16.
  CHECK(aes_256_cbc_pkcs7_encrypt(key, iv, std::string(16, 'x'))->size() == 32);
  // Wrong sizes, torn blocks and a wrong key are errors, never garbage.
  CHECK_FALSE(aes_256_cbc_pkcs7_decrypt("short", iv, data));
  CHECK_FALSE(aes_256_cbc_pkcs7_decrypt(key, "short", data));
  CHECK_FALSE(aes_256_cbc_pkcs7_decrypt(key, iv, data.substr(0, 15)));
  CHECK_FALSE(aes_256_cbc_pkcs7_decrypt(key, iv, ""));
  std::string other_key = key;
  other_key[0] = static_cast<char>(other_key[0] ^ 1);
  const auto wrong = aes_256_cbc_pkcs7_decrypt(other_key, iv, data);
  CHECK((!wrong || *wrong != "hello world"));
}
