#pragma once

// A fake of Tencent's two message APIs for tests and the bench, on 127.0.0.1: WeCom's (`GET
// /cgi-bin/gettoken?corpid&corpsecret`, `POST /cgi-bin/message/send?access_token`) and the
// WeChat Official Account's (`GET /cgi-bin/token?grant_type=client_credential&appid&secret`,
// `POST /cgi-bin/message/custom/send?access_token`), with their answers: a token valid for
// `expires_in` seconds, `{"errcode":0,"errmsg":"ok",…}` for a send, errcode 40013/40001
// for wrong credentials, 42001 for an expired token, 40014 (WeCom) / 40001 (WeChat) for an
// unknown one, 45002 for content over 2,048 bytes, 40003 for a missing touser. Failures on
// demand: the token in use expires (42001 once, and it stays dead), a frequency limit
// (45009 WeCom / 45047 WeChat), a 5xx. Every call is recorded ("gettoken" / "token",
// "send").
//
// And `wechat_sender`, which delivers callbacks as the platforms do: WeCom's URL check
// (GET with msg_signature and an encrypted echostr) and encrypted text messages; WeChat's
// URL check (GET with signature and echostr) and text messages, plain or encrypted
// (encrypt_type=aes). The crypto is troupe's own wechat_wire, whose scheme the unit tests
// check against vectors computed with OpenSSL's command line.

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

enum class wechat_flavor { wecom, official_account };

struct wechat_fault {
  enum class kind {
    /// The token the call carries has expired: errcode 42001, and it stays expired.
    expire_token,
    /// The frequency limit: errcode 45009 (WeCom) or 45047 (WeChat).
    rate_limited,
    /// HTTP 502 with an HTML body.
    server_error,
  };
  kind what = kind::server_error;
};

/// A text message the fake accepted.
struct wechat_sent {
  std::string touser;
  std::string content;
  /// WeCom: the agentid as sent ("" for WeChat).
  std::string agentid;
  std::string msgid;
};

class fake_wechat {
public:
  /// `app_id`: WeCom's corp id or WeChat's AppID; `secret` its secret.
  fake_wechat(wechat_flavor flavor, std::string app_id, std::string secret,
              std::chrono::seconds expires_in = std::chrono::seconds(7200));
  ~fake_wechat();
  fake_wechat(const fake_wechat&) = delete;
  fake_wechat& operator=(const fake_wechat&) = delete;

  /// The origin to configure as the channel's api_base.
  std::string api_base() const;
  /// "gettoken" (WeCom) or "token" (WeChat).
  std::string token_method() const;

  /// Called with the content of every text message the fake accepts, on the fake's io
  /// thread, outside its lock (the bench's reply tracker); set before traffic starts.
  void on_send(std::function<void(std::string_view text)> hook);
  void fail(std::string method, wechat_fault fault, std::size_t times = 1);
  std::vector<recorded_call> calls(std::string_view method) const;
  bool wait_for_calls(std::string_view method, std::size_t n,
                      std::chrono::milliseconds deadline) const;
  std::vector<wechat_sent> sent() const;
  bool wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const;
  /// Tokens issued so far.
  std::size_t tokens_issued() const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

/// Delivers WeCom and WeChat callbacks to a channel's route, signed (and encrypted) as
/// the platform does.
class wechat_sender {
public:
  /// `url`: the channel's route; `token` its callback Token; `aes_key` the 43-character
  /// EncodingAESKey (empty: WeChat's plain mode); `receive_id` the corp id or app id.
  wechat_sender(wechat_flavor flavor, std::string url, std::string token, std::string aes_key,
                std::string receive_id);

  struct text_message {
    std::string msg_id;
    std::string from_user = "zhangsan";
    std::string text;
    /// WeCom's app AgentID.
    std::string agent_id = "1000002";
  };

  /// How one delivery is made.
  struct delivery {
    /// Sign with this token instead (a forged request).
    std::optional<std::string> wrong_token;
    std::chrono::milliseconds deadline{10'000};
  };

  /// The URL check: GET with its signature and echostr (encrypted `plain` for WeCom,
  /// `plain` itself for WeChat).
  expected<net::http_client_response> url_check(const std::string& plain, delivery how) const;
  expected<net::http_client_response> url_check(const std::string& plain) const {
    return url_check(plain, delivery{});
  }
  /// A text message, POSTed.
  expected<net::http_client_response> send(const text_message& m, delivery how) const;
  /// The request `send` would make, signed and encrypted now (the bench sends it through
  /// its own client); an error only for an EncodingAESKey that is not one.
  expected<net::http_client_request> request(const text_message& m, const delivery& how) const;
  expected<net::http_client_response> send(const text_message& m) const {
    return send(m, delivery{});
  }

private:
  wechat_flavor flavor_;
  std::string url_;
  std::string token_;
  std::string aes_key_;
  std::string receive_id_;
};

} // namespace troupe::test
