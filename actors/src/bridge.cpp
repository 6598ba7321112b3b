#include "troupe/actors/bridge.hpp"

namespace troupe::actors {

error from_caf_error(const caf::error& e) {
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
