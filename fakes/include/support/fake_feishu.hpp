#pragma once

// A fake of Feishu's (Lark's) open platform for tests and the bench —
// `POST /open-apis/auth/v3/tenant_access_token/internal` (app_id + app_secret → a
// tenant_access_token and `expire` seconds) and `POST /open-apis/im/v1/messages/{id}/reply`
// on 127.0.0.1, with Feishu's answers: `{"code":0,"msg":"success","data":{…}}`, code
// 99991663 for a missing, unknown or expired token (`expire_tokens` expires every token
// issued so far), 99991400 with HTTP 429 and x-ogw-ratelimit-reset for a rate limit,
// 230001 for text over the fake's limit (150 KB), a replayed `uuid` answered with the first
// reply (Feishu's idempotency); failures on demand per method. Every call is recorded.
// And a sender of event callbacks as Feishu pushes them: plain or encrypted
// (`{"encrypt": …}`), signed with X-Lark-Signature when the app has an encrypt key.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/fake_platform.hpp"

namespace troupe::test {

struct feishu_fault {
  enum class kind {
    /// HTTP 429, `x-ogw-ratelimit-reset: N`, code 99991400.
    rate_limited,
    /// HTTP 500 with an HTML body.
    server_error,
    /// HTTP 200 with code 99991663 (as for an expired token).
    token_invalid,
  };
  kind what = kind::server_error;
  unsigned retry_after = 1;
};

/// A reply the bot posted.
struct feishu_reply {
  /// The message replied to.
  std::string parent_id;
  std::string text;
  std::string uuid;
  std::string message_id;
};

class fake_feishu {
public:
  /// Methods: "token" and "reply".
  fake_feishu(std::string app_id = "cli_fake", std::string app_secret = "fake-app-secret",
              std::chrono::seconds token_life = std::chrono::seconds(7200));
  ~fake_feishu();
  fake_feishu(const fake_feishu&) = delete;
  fake_feishu& operator=(const fake_feishu&) = delete;

  /// The channel's api_base: "http://127.0.0.1:<port>/open-apis".
  std::string api_base() const;
  const std::string& app_id() const noexcept;
  const std::string& app_secret() const noexcept;

  /// Every token issued so far is expired from now on (code 99991663 when used).
  void expire_tokens();
  /// Called with the text of every new reply, on the fake's io thread (the bench's reply
  /// tracker); set before traffic starts.
  void on_reply(std::function<void(std::string_view text)> hook);
  void fail(std::string method, feishu_fault fault, std::size_t times = 1);
  void clear_faults();

  std::vector<recorded_call> calls(std::string_view method) const;
  bool wait_for_calls(std::string_view method, std::size_t n,
                      std::chrono::milliseconds deadline) const;
  std::vector<feishu_reply> replies() const;
  bool wait_for_replies(std::size_t n, std::chrono::milliseconds deadline) const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

/// Builds event callbacks and pushes them as Feishu does.
class feishu_event_sender {
public:
  /// `encrypt_key` empty: plain bodies, unsigned.
  feishu_event_sender(std::string url, std::string verification_token, std::string encrypt_key);

  struct message {
    std::string event_id;
    std::string message_id;
    std::string chat_id = "oc_fakechat";
    std::string chat_type = "group";
    std::string text;
    std::string sender = "ou_fakeuser";
    std::string sender_type = "user";
    std::string message_type = "text";
    std::string root_id;
    std::string thread_id;
  };
  /// The plaintext of an im.message.receive_v1 event (schema 2.0).
  std::string event_body(const message& m) const;
  /// The plaintext of a url_verification.
  std::string url_verification_body(std::string_view challenge) const;

  struct delivery {
    /// Sign with this key instead (a forged request); with an encrypt key only.
    std::optional<std::string> wrong_signing_key;
    /// Send no signature headers.
    bool unsigned_request = false;
    std::chrono::milliseconds deadline{10'000};
  };
  /// POSTs `plain` (encrypted and signed when the sender has an encrypt key).
  expected<net::http_client_response> send(const std::string& plain, delivery how) const;
  expected<net::http_client_response> send(const std::string& plain) const {
    return send(plain, delivery{});
  }
  /// The request `send` would make (the bench sends it through its own client).
  net::http_client_request request(const std::string& plain, const delivery& how) const;

private:
  std::string url_;
  std::string token_;
  std::string key_;
};

} // namespace troupe::test
