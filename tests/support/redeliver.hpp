#pragma once

// Delivering a webhook as the platforms do. WeCom, WeChat, WhatsApp, Feishu and DingTalk
// all deliver a callback again when it is not acknowledged with 200. troupe answers 503
// when it could not make a message durable within its acknowledgement deadline (2 s,
// channel_service.cpp), which a slowed-down build (TSan) on a loaded machine can pass; the
// message is then journaled at most once, whichever delivery lands (the redelivery is
// dropped as a duplicate if the first write committed after all).

#include <functional>

namespace troupe::test {

/// Calls `deliver` (returning the HTTP status of one delivery) until it is answered other
/// than 503, at most `attempts` times; the last status.
inline unsigned deliver_until_acknowledged(const std::function<unsigned()>& deliver,
                                           int attempts = 4) {
  unsigned status = deliver();
  for (int i = 1; i < attempts && status == 503; ++i) {
    status = deliver();
  }
  return status;
}

} // namespace troupe::test
