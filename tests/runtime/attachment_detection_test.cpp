#include <catch2/catch.hpp>

#include "troupe/runtime/attachment_detection.hpp"
#include "troupe/runtime/base64.hpp"

using troupe::mentioned_paths;

TEST_CASE("paths are found in JSON file payloads", "[runtime][attachments]") {
  const auto paths =
      mentioned_paths(R"({"__type":"file","path":"/work/out/report.csv","mime":"text/csv"})");
  REQUIRE(paths.size() == 1);
  CHECK(paths[0] == "/work/out/report.csv");
}

TEST_CASE("an absolute path printed alone on a line is found", "[runtime][attachments]") {
  const auto paths = mentioned_paths("done\n/work/chart\n/work/totals.csv\r\n");
  CHECK(paths == std::vector<std::string>{"/work/chart", "/work/totals.csv"});
}

TEST_CASE("paths embedded in sentences are found without trailing punctuation",
          "[runtime][attachments]") {
  const auto paths = mentioned_paths("Saved to /work/report.csv. Chart: '/work/plot.png', ok\n"
                                     "see https://example.com/a.html and /usr/bin/env");
  CHECK(paths == std::vector<std::string>{"/work/report.csv", "/work/plot.png"});
}

TEST_CASE("each path is reported once", "[runtime][attachments]") {
  const auto paths = mentioned_paths("/work/a.txt\nwrote /work/a.txt\n");
  CHECK(paths.size() == 1);
}

TEST_CASE("base64 round-trips binary data and rejects junk", "[runtime][base64]") {
  const std::string bytes("\x00\x01\xfe\xffhello", 9);
  CHECK(troupe::base64_encode("hi") == "aGk=");
  CHECK(troupe::base64_decode(troupe::base64_encode(bytes)).value() == bytes);
  CHECK(troupe::base64_decode("aGk").value() == "hi");
  CHECK(troupe::base64_decode("aG\nk=").value() == "hi");
  CHECK_FALSE(troupe::base64_decode("a*b="));
}
