#include "troupe/actors/bridge.hpp"

namespace troupe::actors {

namespace {

/// The category of CAF errors that carry a troupe error (code and message).
constexpr auto troupe_error_category = caf::atom("troupe");

} // namespace

caf::error to_caf_error(const error& e) {
  return caf::error(static_cast<std::uint8_t>(e.code), troupe_error_category,
                    caf::make_message(e.message));
}

error from_caf_error(const caf::error& e) {
  if (e.category() == troupe_error_category) {
    const auto& context = e.context();
    std::string message =
        context.match_elements<std::string>() ? context.get_as<std::string>(0) : std::string{};
    return {static_cast<errc>(e.code()), std::move(message)};
  }
  if (e.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(e.code())) {
      case caf::sec::request_timeout:
        return {errc::timeout, "the actor did not answer in time"};
      case caf::sec::request_receiver_down:
        return {errc::unavailable, "the actor is gone"};
      case caf::sec::unexpected_message:
        return {errc::internal, "the actor does not handle this request"};
      default:
        break;
    }
  }
  return {errc::internal, caf::to_string(e)};
}

} // namespace troupe::actors
