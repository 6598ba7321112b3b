// Fuzzes troupe::net::parse_multipart (net/include/troupe/net/multipart.hpp), which splits
// the body of a file upload (POST /api/v1/files).
//
// Input: a Content-Type header value up to the first LF, then the body. Properties
// checked: no crash, leak or undefined behaviour; a failure is invalid_argument with a
// message; every part's data lies inside the body, after the previous part's, and holds
// no delimiter (CRLF "--" boundary); an accepted body has its closing delimiter.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "troupe/net/multipart.hpp"

namespace {

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto lf = input.find('\n');
  if (lf == std::string_view::npos) {
    return 0;
  }
  const auto content_type = input.substr(0, lf);
  const auto body = input.substr(lf + 1);
  auto parts = troupe::net::parse_multipart(content_type, body);
  if (!parts) {
    check(parts.error().code == troupe::errc::invalid_argument);
    check(!parts.error().message.empty());
    return 0;
  }
  const auto boundary = troupe::net::header_parameter(content_type, "boundary");
  check(!boundary.empty() && boundary.size() <= 70);
  const std::string delimiter = "\r\n--" + boundary;
  const char* previous_end = body.data();
  for (const auto& part : *parts) {
    check(part.data.data() >= previous_end);
    check(part.data.data() + part.data.size() <= body.data() + body.size());
    check(part.data.find(delimiter) == std::string_view::npos);
    previous_end = part.data.data() + part.data.size();
  }
  check(body.find("--" + boundary + "--") != std::string_view::npos);
  return 0;
}
