#include <catch2/catch.hpp>

#include <string>

#include "troupe/net/channel/flat_xml.hpp"
#include "troupe/net/channel/wechat_wire.hpp"
#include "troupe/runtime/channel/text.hpp"

using namespace troupe;
using namespace troupe::net;

namespace {

// A 43-character EncodingAESKey (base64 of 32 bytes without its "=").
constexpr auto aes_key = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG";

} // namespace

// python3 -c "import hashlib; print(hashlib.sha1(b''.join(sorted([b'QDG6eK', b'1409659813',
//   b'1372623149', b'RypEvHKD…Ax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS']))).hexdigest())"
// (WeCom's documented sample request; the ciphertext is `encrypted` below).
TEST_CASE("the wechat signature is the SHA-1 of the sorted parts", "[net][wechat]") {
  const std::string encrypted =
      "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/"
      "0lWfrf0QADHHhGd3QczcdCUpj9"
      "11L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06"
      "DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+"
      "3IQ"
      "H03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+"
      "rUPA3k22Ncx4XXZS9o0MBH27Bo6"
      "BpNelZpS";
  const auto expected_signature = "2ecc5745cc405397f9c1ed24f09bdcc0a6c132ed";
  CHECK(wechat::signature({"QDG6eK", "1409659813", "1372623149", encrypted}) == expected_signature);
  // Order does not matter; case of the hex given does not either; anything else does.
  CHECK(wechat::signature_matches({encrypted, "1372623149", "QDG6eK", "1409659813"},
                                  "2ECC5745CC405397F9C1ED24F09BDCC0A6C132ED"));
  CHECK_FALSE(wechat::signature_matches({"QDG6eK", "1409659813", "1372623140", encrypted},
                                        expected_signature));
  CHECK_FALSE(wechat::signature_matches({"QDG6eK", "1409659813", "1372623149", encrypted}, ""));
}

// The ciphertext from the command line, with the 16 leading bytes "0123456789abcdef":
//   python3: key = b64decode(aes_key + "="); msg = b"<xml><Content>hi</Content></xml>";
//   plain = b"0123456789abcdef" + len(msg).to_bytes(4, "big") + msg + b"wx5823bf96d3bd56c7";
//   plain += bytes([32 - len(plain) % 32]) * (32 - len(plain) % 32)
//   openssl enc -aes-256-cbc -nopad -K key.hex() -iv key[:16].hex() | base64
TEST_CASE("the wechat cipher matches OpenSSL on a known message and checks the receive id",
          "[net][wechat]") {
  auto cipher = wechat::cipher::from_encoding_aes_key(aes_key);
  REQUIRE(cipher);
  const std::string known = "Q3stYC6hdFzMh9T8HCvyDCEPX2Akqj/gygI/6v/7fonvwELc/mZ525i/WoR+zYxuvEwmCn"
                            "GqJH8zCrF0gSjif+nUQcXSEDvXx6LFOlTYhdCINR5Wrs2Ktt4+bjDDwJEN";
  auto sealed =
      cipher->encrypt("<xml><Content>hi</Content></xml>", "wx5823bf96d3bd56c7", "0123456789abcdef");
  REQUIRE(sealed);
  CHECK(*sealed == known);
  auto opened = cipher->decrypt(known, "wx5823bf96d3bd56c7");
  REQUIRE(opened);
  CHECK(*opened == "<xml><Content>hi</Content></xml>");
  // For another corp or app: refused.
  auto other = cipher->decrypt(known, "wx0000000000000000");
  REQUIRE_FALSE(other);
  CHECK_THAT(other.error().message, Catch::Contains("receive id"));
  // Fresh random bytes: another ciphertext each time, the same message inside.
  auto a = cipher->encrypt("same", "corp");
  auto b = cipher->encrypt("same", "corp");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a != *b);
  CHECK(cipher->decrypt(*b, "corp").value_or("") == "same");
}

TEST_CASE("the wechat cipher refuses bad keys, bad base64, torn blocks and bad padding",
          "[net][wechat]") {
  CHECK_FALSE(wechat::cipher::from_encoding_aes_key("short"));
  CHECK_FALSE(wechat::cipher::from_encoding_aes_key(std::string(43, '*')));
  auto cipher = wechat::cipher::from_encoding_aes_key(aes_key);
  REQUIRE(cipher);
  CHECK_FALSE(cipher->decrypt("!!!not base64!!!", "corp"));
  CHECK_FALSE(cipher->decrypt("QUJD", "corp")); // 3 bytes
  // 32 bytes of zeros decrypt to garbage whose last byte is not valid padding (or whose
  // length field is out of range): an error, never a crash.
  CHECK_FALSE(cipher->decrypt("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "corp"));
}

TEST_CASE("flat xml reads the root's fields with CDATA and character references", "[net][wechat]") {
  auto xml = net::channel::parse_flat_xml(
      "<xml><ToUserName><![CDATA[ww123]]></ToUserName><Content><![CDATA[a < b & "
      "c]]></Content><Title>x &amp; y</Title><Nested><Inner>no</Inner></Nested>"
      "<CreateTime>1348831860</CreateTime></xml>");
  REQUIRE(xml);
  CHECK(xml->root() == "xml");
  CHECK(xml->text("ToUserName") == "ww123");
  CHECK(xml->text("Content") == "a < b & c");
  CHECK(xml->text("Title") == "x & y");
  CHECK(xml->text("Nested").empty());
  CHECK_FALSE(xml->field("Inner"));
  CHECK(xml->text("CreateTime") == "1348831860");
}

TEST_CASE("flat xml refuses DOCTYPE, entities, oversize, repeated fields and malformed input",
          "[net][wechat]") {
  const auto refused = [](std::string_view text, std::string_view why, std::size_t limit = 65536) {
    auto xml = net::channel::parse_flat_xml(text, limit);
    REQUIRE_FALSE(xml);
    CHECK(xml.error().code == errc::invalid_argument);
    CHECK_THAT(xml.error().message, Catch::Contains(std::string(why)));
  };
  refused("<!DOCTYPE xml [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><xml><A>&x;</A></xml>",
          "document type");
  refused("<!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;\">]>"
          "<xml><A>&lol2;</A></xml>",
          "document type");
  refused("<xml><A>1</A></xml>", "more than", 10);
  refused("<xml><A>1</A><A>2</A></xml>", "twice");
  refused("<xml><A>1</xml>", "malformed");
  refused("", "malformed");
}

TEST_CASE("a wechat text message decodes, and an encrypted body's Encrypt field is read",
          "[net][wechat]") {
  wechat::message m;
  m.to_user = "ww123";
  m.from_user = "zhangsan";
  m.create_time = 1348831860;
  m.msg_type = "text";
  m.content = "this is a <test> & more";
  m.msg_id = "1234567890123456";
  m.agent_id = "1000002";
  auto back = wechat::decode_message(wechat::encode_text_message(m));
  REQUIRE(back);
  CHECK(back->from_user == "zhangsan");
  CHECK(back->content == "this is a <test> & more");
  CHECK(back->msg_id == "1234567890123456");
  CHECK(back->agent_id == "1000002");
  CHECK(back->create_time == 1348831860);
  CHECK_FALSE(wechat::decode_message("<xml><Content>x</Content></xml>"));
  auto field = wechat::encrypted_field(wechat::encode_encrypted_body("ww123", "abc+/=", "1000002"));
  REQUIRE(field);
  CHECK(*field == "abc+/=");
  CHECK_FALSE(wechat::encrypted_field("<xml><ToUserName>a</ToUserName></xml>"));
}

TEST_CASE("a reply split for wechat keeps every part within 2,048 bytes of UTF-8",
          "[net][wechat]") {
  // 1,500 three-byte characters in paragraphs: under 2,048 characters, over 2,048 bytes.
  std::string text;
  for (int p = 0; p < 3; ++p) {
    text += p > 0 ? "\n\n" : "";
    for (int i = 0; i < 500; ++i) {
      text += "\xe4\xbd\xa0"; // 你
    }
  }
  const auto parts = troupe::channel::split_message_bytes(text, wechat::text_limit_bytes);
  REQUIRE(parts.size() >= 2);
  std::string joined;
  for (const auto& p : parts) {
    CHECK(p.size() <= wechat::text_limit_bytes);
    CHECK(p.size() % 3 == 0); // never a torn character
    joined += p;
  }
  std::string squeezed = text;
  std::erase(squeezed, '\n');
  CHECK(joined == squeezed);
  CHECK(troupe::channel::split_message_bytes("short", 2048) == std::vector<std::string>{"short"});
}
