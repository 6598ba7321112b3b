#include "troupe/runtime/error.hpp"

namespace troupe {

std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::ok:
      return "ok";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::not_found:
      return "not_found";
    case errc::conflict:
      return "conflict";
    case errc::permission_denied:
      return "permission_denied";
    case errc::timeout:
      return "timeout";
    case errc::cancelled:
      return "cancelled";
    case errc::limit_exceeded:
      return "limit_exceeded";
    case errc::unavailable:
      return "unavailable";
    case errc::overloaded:
      return "overloaded";
    case errc::parse_error:
      return "parse_error";
    case errc::io_error:
      return "io_error";
    case errc::internal:
      return "internal";
  }
  return "unknown";
}

namespace {

class troupe_error_category final : public std::error_category {
public:
  const char* name() const noexcept override {
    return "troupe";
  }
  std::string message(int value) const override {
    return std::string(to_string(static_cast<errc>(value)));
  }
};

} // namespace

const std::error_category& troupe_category() noexcept {
  static const troupe_error_category category;
  return category;
}

} // namespace troupe
