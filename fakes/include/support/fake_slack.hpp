#pragma once

// A fake of the Slack Web API for tests and the bench — `POST /api/auth.test`,
// `/api/chat.postMessage`,
// `/api/chat.update` on 127.0.0.1 with Slack's answers: HTTP 200 with `ok:false` and an
// error word for a missing or wrong bot token (not_authed, invalid_auth), a missing
// channel (channel_not_found) or text (no_text), an unknown message to update
// (message_not_found), `unknown_method` otherwise; failures on demand per method (HTTP
// 429 with Retry-After and `ratelimited`, 500, any error word). Every call is recorded.
// And a sender of Events API deliveries signed as Slack signs them (v0 HMAC-SHA256 with
// a timestamp), for the webhook side: Events API bodies (JSON) and slash commands
// (form-encoded, as Slack POSTs `/new` typed in its message box).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/fake_platform.hpp"

namespace troupe::test {

/// A failure the fake answers a call with instead of doing it.
struct slack_fault {
  enum class kind {
    /// HTTP 429, `Retry-After: N`, `{"ok":false,"error":"ratelimited"}`.
    rate_limited,
    /// HTTP 500 with an HTML body, as Slack's edge sends.
    server_error,
    /// HTTP 200 `{"ok":false,"error":<error>}`.
    error_word,
  };
  kind what = kind::server_error;
  unsigned retry_after = 1;
  std::string error = "internal_error";
};

/// A message the bot posted (chat.postMessage that succeeded), with updates applied.
struct slack_post {
  std::string channel;
  std::string text;
  std::string thread_ts;
  std::string ts;
  unsigned updates = 0;
};

class fake_slack {
public:
  explicit fake_slack(std::string bot_token = "xoxb-fake-token",
                      std::string bot_user_id = "U0FAKEBOT");
  ~fake_slack();
  fake_slack(const fake_slack&) = delete;
  fake_slack& operator=(const fake_slack&) = delete;

  /// The base URL to configure as the channel's api_base ("http://127.0.0.1:<port>/api").
  std::string api_base() const;
  const std::string& bot_token() const noexcept;
  const std::string& bot_user_id() const noexcept;

  /// Called with the text of every message chat.postMessage accepts (not chat.update's
  /// edits: a channel without `stream_edits` posts each reply once, in its final text), on
  /// the fake's io thread, outside its lock (the bench's reply tracker); set before traffic
  /// starts.
  void on_send(std::function<void(std::string_view text)> hook);
  void fail(std::string method, slack_fault fault, std::size_t times = 1);
  void fail_always(std::string method, slack_fault fault);
  void clear_faults();

  std::vector<recorded_call> calls() const;
  std::vector<recorded_call> calls(std::string_view method) const;
  bool wait_for_calls(std::string_view method, std::size_t n,
                      std::chrono::milliseconds deadline) const;
  std::vector<slack_post> posts() const;
  bool wait_for_posts(std::size_t n, std::chrono::milliseconds deadline) const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

/// Builds Events API bodies and delivers them signed, as Slack does.
class slack_event_sender {
public:
  slack_event_sender(std::string signing_secret, std::string url);

  /// An event_callback carrying a `message` (or, with `type`, an `app_mention`) event.
  struct message {
    std::string event_id;
    std::string channel = "C0TEST";
    std::string user = "U0USER";
    std::string text;
    std::string ts;
    std::string thread_ts;
    std::string type = "message";
    std::string subtype;
    std::string bot_id;
    std::string channel_type = "channel";
  };
  static std::string event_body(const message& m, std::string_view team_id = "T0TEST",
                                std::string_view app_id = "A0TEST");
  static std::string url_verification_body(std::string_view challenge);

  /// A slash command as Slack POSTs it (application/x-www-form-urlencoded).
  struct slash_command {
    /// With its slash: "/new".
    std::string command;
    std::string text;
    std::string channel_id = "C0TEST";
    std::string user_id = "U0USER";
    /// Unique per invocation.
    std::string trigger_id;
    std::string team_id = "T0TEST";
  };
  static std::string slash_command_body(const slash_command& c);

  /// How one delivery is made.
  struct delivery {
    /// Unix seconds to sign with; now when unset.
    std::optional<std::int64_t> timestamp;
    /// Slack's redelivery number (X-Slack-Retry-Num, with X-Slack-Retry-Reason
    /// http_timeout); 0 for a first delivery.
    unsigned retry_num = 0;
    /// Sign with this secret instead (a forged request).
    std::optional<std::string> wrong_secret;
    std::chrono::milliseconds deadline{10'000};
    /// The body's Content-Type.
    std::string content_type = "application/json";
  };
  /// POSTs `body` signed; the answer or a transport error.
  expected<net::http_client_response> send(const std::string& body, delivery how) const;
  /// The request `send` would make, signed now (the bench sends it through its own client).
  net::http_client_request request(const std::string& body, const delivery& how) const;
  expected<net::http_client_response> send(const std::string& body) const {
    return send(body, delivery{});
  }
  /// POSTs slash command `c`, form-encoded and signed (`how.content_type` is ignored).
  expected<net::http_client_response> send(const slash_command& c, delivery how) const;
  expected<net::http_client_response> send(const slash_command& c) const {
    return send(c, delivery{});
  }

private:
  std::string secret_;
  std::string url_;
};

} // namespace troupe::test
