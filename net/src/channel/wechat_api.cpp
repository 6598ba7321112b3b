#include "wechat_api.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>
#include <fmt/format.h>

#include "platform_wire.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::wechat {

void add_text_message(channel::decoded_request& out, message&& decoded) {
  if (decoded.msg_type != "text" || decoded.msg_id.empty() || decoded.from_user.empty() ||
      decoded.content.empty()) {
    return;
  }
  channel::inbound_message m;
  m.message_id = std::move(decoded.msg_id);
  m.thread = decoded.from_user;
  m.sender = decoded.from_user;
  m.reply_to = std::move(decoded.from_user);
  m.text = std::move(decoded.content);
  out.messages.push_back(std::move(m));
}

namespace asio = boost::asio;
namespace cj = channel_json;

namespace {

/// The deadline of a token fetch: the cache's callers wait for it.
constexpr std::chrono::milliseconds token_deadline{10'000};

} // namespace

std::string
url_with_query(std::string_view base,
               std::initializer_list<std::pair<std::string_view, std::string_view>> params) {
  auto parsed = boost::urls::parse_uri_reference(base);
  if (!parsed) {
    return std::string(base);
  }
  boost::urls::url u(*parsed);
  for (const auto& [key, value] : params) {
    u.params().append({key, value});
  }
  return std::string(u.buffer());
}

api_answer read_api_answer(std::string_view body) {
  api_answer out;
  auto doc = cj::document::parse_object(body, "answer");
  if (!doc) {
    return out;
  }
  out.parsed = true;
  out.errcode = cj::int_member(doc->root(), "errcode").value_or(0);
  out.errmsg = cj::text_member(doc->root(), "errmsg");
  if (auto id = cj::string_member(doc->root(), "msgid")) {
    out.msgid = std::string(*id);
  } else if (auto n = cj::int_member(doc->root(), "msgid")) {
    out.msgid = std::to_string(*n);
  }
  return out;
}

expected<channel::access_token> read_token_answer(std::string_view body, unsigned status) {
  auto doc = cj::document::parse_object(body, "access token answer");
  if (status < 200 || status >= 300 || !doc) {
    return fail(errc::unavailable, fmt::format("the access token request answered HTTP {}: {}",
                                               status, cj::excerpt(body)));
  }
  const auto root = doc->root();
  const auto code = cj::int_member(root, "errcode").value_or(0);
  auto token = cj::text_member(root, "access_token");
  if (code != 0 || token.empty()) {
    return fail(code == 0 ? errc::parse_error : errc::permission_denied,
                fmt::format("no access token: errcode {}: {}", code,
                            cj::excerpt(cj::text_member(root, "errmsg"))));
  }
  const auto expires_in = cj::int_member(root, "expires_in").value_or(7200);
  channel::access_token out;
  out.value = std::move(token);
  out.expires_at = std::chrono::steady_clock::now() +
                   std::chrono::seconds(std::max<std::int64_t>(expires_in, 1));
  return out;
}

asio::awaitable<expected<channel::access_token>> fetch_token(http_client& http, std::string url) {
  http_client_request request;
  request.method = http_method::get;
  request.url = std::move(url);
  request.deadlines.connect = std::min(token_deadline, request.deadlines.connect);
  request.deadlines.first_byte = token_deadline;
  request.deadlines.idle = token_deadline;
  request.deadlines.total = token_deadline;
  auto fetching = http.fetch(std::move(request));
  auto response = co_await std::move(fetching);
  if (!response) {
    co_return tl::unexpected(response.error());
  }
  co_return read_token_answer(response->body, response->status);
}

asio::awaitable<channel::send_result> send_with_token(http_client& http,
                                                      channel::access_token_cache& tokens,
                                                      std::string url, std::string body,
                                                      std::chrono::milliseconds deadline,
                                                      error_codes codes, std::string channel_name) {
  channel::send_result out;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto getting = tokens.get(http);
    auto token = co_await std::move(getting);
    if (!token) {
      // No token now (the platform or the network): nothing was sent; later.
      out.outcome = channel::send_outcome::retry;
      out.error = "no access token: " + token.error().message;
      co_return out;
    }
    auto fetching = http.fetch(
        channel::json_post(url_with_query(url, {{"access_token", *token}}), body, deadline));
    auto response = co_await std::move(fetching);
    if (!response) {
      out.outcome = channel::send_outcome::retry;
      out.error = response.error().message;
      co_return out;
    }
    const auto answer = read_api_answer(response->body);
    if (response->status >= 200 && response->status < 300 && answer.parsed && answer.errcode == 0) {
      out.outcome = channel::send_outcome::sent;
      out.error.clear();
      out.platform_message_id = answer.msgid;
      co_return out;
    }
    if (response->status < 200 || response->status >= 300 || !answer.parsed) {
      co_return channel::classify_http_status(response->status == 200 ? 502 : response->status,
                                              response->header("retry-after"), response->body);
    }
    out.error = fmt::format("errcode {}: {}", answer.errcode, cj::excerpt(answer.errmsg));
    if (codes.token.contains(answer.errcode)) {
      // Expired or invalid: drop it (unless another send already did) and go again.
      log::info("{}: the access token was refused ({}); fetching a new one", channel_name,
                out.error);
      tokens.invalidate(*token);
      out.outcome = channel::send_outcome::retry;
      continue;
    }
    out.outcome = codes.retry.contains(answer.errcode) ? channel::send_outcome::retry
                                                       : channel::send_outcome::failed;
    co_return out;
  }
  co_return out;
}

} // namespace troupe::net::wechat
