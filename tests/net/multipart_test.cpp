#include <string>

#include <catch2/catch.hpp>

#include "troupe/net/multipart.hpp"

using troupe::net::header_parameter;
using troupe::net::parse_multipart;

namespace {

std::string error_of(std::string_view content_type, std::string_view body) {
  auto r = parse_multipart(content_type, body);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == troupe::errc::invalid_argument);
  return r.error().message;
}

} // namespace

TEST_CASE("multipart parser splits an upload into its parts with their headers",
          "[net][multipart]") {
  const std::string body =
      "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nnotes\r\n"
      "--XyZ\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a b.txt\"\r\n"
      "Content-Type: text/plain\r\n\r\nline 1\r\nline 2\r\n--XyZ--\r\nepilogue";
  auto parts = parse_multipart("multipart/form-data; boundary=XyZ", body);
  REQUIRE(parts);
  REQUIRE(parts->size() == 2);
  CHECK((*parts)[0].name == "purpose");
  CHECK((*parts)[0].filename.empty());
  CHECK((*parts)[0].data == "notes");
  CHECK((*parts)[1].name == "file");
  CHECK((*parts)[1].filename == "a b.txt");
  CHECK((*parts)[1].content_type == "text/plain");
  CHECK((*parts)[1].data == "line 1\r\nline 2");
}

TEST_CASE("multipart parser unquotes parameters and tells name from filename", "[net][multipart]") {
  CHECK(header_parameter(R"(form-data; name="file"; filename="r\"q\".csv")", "name") == "file");
  CHECK(header_parameter(R"(form-data; name="file"; filename="r\"q\".csv")", "filename") ==
        R"(r"q".csv)");
  CHECK(header_parameter("form-data; filename=x.bin", "name").empty());
  CHECK(header_parameter("multipart/form-data; boundary=ab; charset=utf-8", "boundary") == "ab");
  auto parts =
      parse_multipart("Multipart/Form-Data; boundary=\"q q\"", "--q q\r\n\r\nx\r\n--q q--");
  REQUIRE(parts);
  REQUIRE(parts->size() == 1);
  CHECK((*parts)[0].data == "x");
}

TEST_CASE("multipart parser names what is wrong with a malformed body", "[net][multipart]") {
  CHECK(error_of("application/json", "{}") == "body: must be multipart/form-data");
  CHECK(error_of("multipart/form-data", "--x\r\n") == "body: the multipart boundary is missing");
  CHECK(error_of("multipart/form-data; boundary=" + std::string(71, 'b'), "") ==
        "body: the multipart boundary is missing");
  CHECK(error_of("multipart/form-data; boundary=XyZ", "no delimiter") ==
        "body: no multipart part found");
  CHECK(error_of("multipart/form-data; boundary=XyZ", "--XyZ junk") ==
        "body: malformed multipart delimiter");
  CHECK(error_of("multipart/form-data; boundary=XyZ", "--XyZ\r\nContent-Type: a\r\n") ==
        "body: a multipart part has no header end");
  CHECK(error_of("multipart/form-data; boundary=XyZ", "--XyZ\r\n\r\ndata with no end") ==
        "body: a multipart part is not terminated");
}

TEST_CASE("multipart parser accepts a body whose only delimiter is the closing one",
          "[net][multipart]") {
  auto parts = parse_multipart("multipart/form-data; boundary=XyZ", "--XyZ--\r\n");
  REQUIRE(parts);
  CHECK(parts->empty());
}
