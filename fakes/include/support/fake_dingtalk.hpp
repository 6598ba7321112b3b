#pragma once

// A fake of DingTalk's robot platform for tests and the bench, on 127.0.0.1:
// `POST /v1.0/oauth2/accessToken` (appKey + appSecret → accessToken, expireIn seconds),
// `POST /v1.0/robot/oToMessages/batchSend` and `/v1.0/robot/groupMessages/send` (the
// token in x-acs-dingtalk-access-token; HTTP 401 {"code":"InvalidAuthentication"} for a
// missing, unknown or expired one; `expire_tokens` expires every token issued so far),
// and session webhooks `POST /robot/sendBySession?session=…` that it hands out with an
// expiry (`errcode` 0 while valid, 300001 once expired). Failures on demand per method
// (HTTP 429 {"code":"Throttling.Api"} with Retry-After, 500, a refused token). Every call
// is recorded. And a sender of robot callbacks signed as DingTalk signs them (`timestamp`
// in ms + `sign`, base64 HMAC-SHA256 of "timestamp\nsecret").

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/fake_platform.hpp"

namespace troupe::test {

struct dingtalk_fault {
  enum class kind { rate_limited, server_error, token_invalid };
  kind what = kind::server_error;
  unsigned retry_after = 1;
};

/// A message the robot sent.
struct dingtalk_send {
  /// "webhook", "batchSend" or "groupSend".
  std::string via;
  /// The session, the user or the conversation.
  std::string target;
  std::string text;
};

class fake_dingtalk {
public:
  /// Methods: "token", "batchSend", "groupSend", "webhook".
  fake_dingtalk(std::string app_key = "dingfakeappkey", std::string app_secret = "fake-secret",
                std::chrono::seconds token_life = std::chrono::seconds(7200));
  ~fake_dingtalk();
  fake_dingtalk(const fake_dingtalk&) = delete;
  fake_dingtalk& operator=(const fake_dingtalk&) = delete;

  /// The channel's api_base: "http://127.0.0.1:<port>".
  std::string api_base() const;
  const std::string& app_key() const noexcept;
  const std::string& app_secret() const noexcept;

  /// A new session webhook valid for `life` (negative: already expired), and its expiry in
  /// Unix milliseconds (what a callback's sessionWebhookExpiredTime says).
  struct session {
    std::string url;
    std::int64_t expires_ms = 0;
  };
  session new_session(std::chrono::milliseconds life = std::chrono::minutes(90));

  /// Called with the text of every message sent, on the fake's io thread (the bench's
  /// reply tracker); set before traffic starts.
  void on_send(std::function<void(std::string_view text)> hook);
  void expire_tokens();
  void fail(std::string method, dingtalk_fault fault, std::size_t times = 1);
  void clear_faults();

  std::vector<recorded_call> calls(std::string_view method) const;
  bool wait_for_calls(std::string_view method, std::size_t n,
                      std::chrono::milliseconds deadline) const;
  std::vector<dingtalk_send> sends() const;
  bool wait_for_sends(std::size_t n, std::chrono::milliseconds deadline) const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

/// Builds robot callbacks and delivers them signed, as DingTalk does.
class dingtalk_callback_sender {
public:
  dingtalk_callback_sender(std::string url, std::string app_secret);

  struct message {
    std::string msg_id;
    std::string text;
    std::string conversation_id = "cidFakeConversation";
    /// "1" a single chat, "2" a group.
    std::string conversation_type = "1";
    std::string sender_staff_id = "staff-fake";
    std::string sender_id = "$:LWCP_v1:$fake";
    std::string session_webhook;
    std::int64_t session_webhook_expires_ms = 0;
    std::string msgtype = "text";
  };
  static std::string callback_body(const message& m,
                                   std::string_view robot_code = "dingfakeappkey");

  struct delivery {
    /// Unix milliseconds to sign with; now when unset.
    std::optional<std::int64_t> timestamp_ms;
    std::optional<std::string> wrong_secret;
    std::chrono::milliseconds deadline{10'000};
  };
  expected<net::http_client_response> send(const std::string& body, delivery how) const;
  expected<net::http_client_response> send(const std::string& body) const {
    return send(body, delivery{});
  }
  net::http_client_request request(const std::string& body, const delivery& how) const;

private:
  std::string url_;
  std::string secret_;
};

} // namespace troupe::test
