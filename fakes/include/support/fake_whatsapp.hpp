#pragma once

// A fake of the WhatsApp Business Cloud API for tests and the bench, on 127.0.0.1:
// `POST /v21.0/{phone_number_id}/messages` with a Bearer token, answering as Graph does:
// `{"messaging_product":"whatsapp","contacts":[…],"messages":[{"id":"wamid.…"}]}`; a
// wrong or expired token is HTTP 401 with OAuth error 190; a body over 4,096 characters
// HTTP 400 with error 100; an unknown phone number id error 100 too. Failures on demand:
// the token expires (401/190, once), a rate limit (HTTP 400, error 130429 or 131056,
// the "pair rate limit"), the 24-hour window (HTTP 400, error 131047), a 5xx. Every call
// is recorded ("messages").
//
// And `whatsapp_sender`, which delivers webhooks as Meta does: the subscription check
// (GET hub.mode, hub.verify_token, hub.challenge) and message / status notifications
// signed with X-Hub-Signature-256.

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

struct whatsapp_fault {
  enum class kind {
    expire_token,
    rate_limited,
    pair_rate_limited,
    window_closed,
    server_error,
  };
  kind what = kind::server_error;
};

struct whatsapp_sent {
  std::string to;
  std::string body;
  std::string id;
};

class fake_whatsapp {
public:
  fake_whatsapp(std::string phone_number_id, std::string access_token);
  ~fake_whatsapp();
  fake_whatsapp(const fake_whatsapp&) = delete;
  fake_whatsapp& operator=(const fake_whatsapp&) = delete;

  /// "http://127.0.0.1:<port>/v21.0": the channel's api_base.
  std::string api_base() const;

  /// Called with the body of every text message the fake accepts, on the fake's io thread,
  /// outside its lock (the bench's reply tracker); set before traffic starts.
  void on_send(std::function<void(std::string_view text)> hook);
  void fail(whatsapp_fault fault, std::size_t times = 1);
  std::vector<recorded_call> calls() const;
  bool wait_for_calls(std::size_t n, std::chrono::milliseconds deadline) const;
  std::vector<whatsapp_sent> sent() const;
  bool wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

class whatsapp_sender {
public:
  whatsapp_sender(std::string url, std::string app_secret, std::string phone_number_id);

  struct text_message {
    /// wamid.…
    std::string id;
    std::string from = "16315551234";
    std::string text;
    /// Unix seconds; now when unset.
    std::optional<std::int64_t> timestamp;
  };
  static std::string message_body(const text_message& m, std::string_view phone_number_id);
  /// A `statuses` notification (delivered) for message `id`.
  static std::string status_body(std::string_view id, std::string_view phone_number_id);

  struct delivery {
    std::optional<std::string> wrong_secret;
    std::chrono::milliseconds deadline{10'000};
  };
  expected<net::http_client_response> send(const std::string& body, delivery how) const;
  /// The request `send` would make, signed (the bench sends it through its own client).
  net::http_client_request request(const std::string& body, const delivery& how) const;
  expected<net::http_client_response> send(const std::string& body) const {
    return send(body, delivery{});
  }
  expected<net::http_client_response> send(const text_message& m, delivery how) const {
    return send(message_body(m, phone_number_id_), how);
  }
  expected<net::http_client_response> send(const text_message& m) const {
    return send(message_body(m, phone_number_id_), delivery{});
  }
  /// The subscription check with `verify_token` and `challenge`.
  expected<net::http_client_response> subscribe(const std::string& verify_token,
                                                const std::string& challenge) const;

private:
  std::string url_;
  std::string secret_;
  std::string phone_number_id_;
};

} // namespace troupe::test
