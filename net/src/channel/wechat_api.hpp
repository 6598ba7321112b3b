#pragma once

/// \file
/// What the WeCom and WeChat Official Account adapters share: turning a decoded callback
/// into the message troupe answers, and on the way out: reading
/// their access-token and `errcode` answers, fetching a token, and one send through the
/// access-token cache (a token the platform calls expired or invalid is dropped from the
/// cache and the send made again at once with a fresh one). Private to troupe_net.

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>

#include <boost/asio/awaitable.hpp>

#include "troupe/net/channel/access_token.hpp"
#include "troupe/net/channel/adapter.hpp"
#include "troupe/net/channel/wechat_wire.hpp"

namespace troupe::net::wechat {

/// Adds `decoded` to `out` as the inbound message of its sender's thread when it is a text
/// message with an id, a sender and content; events (subscribe, …), images and voice are
/// left out (acknowledged and skipped).
void add_text_message(channel::decoded_request& out, message&& decoded);

/// `base` (a URL) with the query parameters `params` appended, percent-encoded.
std::string
url_with_query(std::string_view base,
               std::initializer_list<std::pair<std::string_view, std::string_view>> params);

/// An answer `{"errcode":…,"errmsg":…,"msgid":…}` (errcode 0, or absent, on success).
struct api_answer {
  std::int64_t errcode = 0;
  std::string errmsg;
  std::string msgid;
  bool parsed = false;
};
api_answer read_api_answer(std::string_view body);

/// The token of a gettoken / token answer (`access_token`, `expires_in` seconds).
expected<channel::access_token> read_token_answer(std::string_view body, unsigned status);

/// GETs `url` (gettoken with its query) and reads the token; a coroutine on `http`'s
/// executor.
boost::asio::awaitable<expected<channel::access_token>> fetch_token(http_client& http,
                                                                    std::string url);

/// Which errcodes mean what for one platform.
struct error_codes {
  /// The token expired or is invalid: refresh and send again.
  std::set<std::int64_t> token;
  /// Rate limits and the platform being busy: the outbox tries later.
  std::set<std::int64_t> retry;
};

/// POSTs `body` to `{url}?access_token=<token>` (url may carry a query: `&` then), the
/// token from `tokens`; errcodes in `codes.token` refresh it and send once more.
boost::asio::awaitable<channel::send_result>
send_with_token(http_client& http, channel::access_token_cache& tokens, std::string url,
                std::string body, std::chrono::milliseconds deadline, error_codes codes,
                std::string channel_name);

} // namespace troupe::net::wechat
