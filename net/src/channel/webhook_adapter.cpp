#include "troupe/net/channel/webhook_adapter.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::channel {

namespace {

// Longest accepted field values: ids and names are short; text is bounded by the body.
constexpr std::size_t max_id_length = 256;

} // namespace

std::string webhook_signature(std::string_view token, std::string_view body) {
  return "sha256=" + to_hex(hmac_sha256(token, body));
}

webhook_adapter::webhook_adapter(std::string channel, std::string token, std::string callback_url)
    : channel_(std::move(channel)), token_(std::move(token)),
      callback_url_(std::move(callback_url)) {}

expected<void> webhook_adapter::verify(const http_request& request) const {
  const auto given = request.header(webhook_token_header);
  // An empty configured token would accept an empty header: never verify against it.
  if (token_.empty() || !constant_time_equal(given, token_)) {
    return fail(errc::permission_denied, "X-Webhook-Token is missing or wrong");
  }
  return {};
}

expected<decoded_request> webhook_adapter::decode(const http_request& request) const {
  auto body = json_object::parse(request.body);
  if (!body) {
    return tl::unexpected(body.error());
  }
  inbound_message m;
  for (auto [key, into] : {std::pair<std::string_view, std::string*>{"message_id", &m.message_id},
                           {"sender", &m.sender},
                           {"text", &m.text}}) {
    auto value = body->required_text(key, key != "text");
    if (!value) {
      return tl::unexpected(value.error());
    }
    *into = std::move(*value);
  }
  auto thread = body->text("thread");
  if (!thread) {
    return tl::unexpected(thread.error());
  }
  m.thread = thread->value_or("");
  if (m.message_id.size() > max_id_length || m.sender.size() > max_id_length ||
      m.thread.size() > max_id_length) {
    return fail(errc::invalid_argument,
                fmt::format("message_id, sender and thread: at most {} bytes each", max_id_length));
  }
  m.reply_to = m.thread;
  decoded_request out;
  out.messages.push_back(std::move(m));
  return out;
}

std::string webhook_adapter::outbound_body(const outbound_part& part) const {
  json_writer w;
  w.begin_object();
  w.key("channel").value(channel_);
  w.key("thread").value(part.reply_to);
  w.key("run_id").value(part.run_id);
  w.key("part").value(part.part);
  w.key("text").value(part.text);
  w.end_object();
  return std::move(w).str();
}

boost::asio::awaitable<send_result> webhook_adapter::send(http_client& http, outbound_part part,
                                                          std::chrono::milliseconds deadline) {
  auto request = json_post(callback_url_, outbound_body(part), deadline);
  request.headers.push_back(
      {std::string(webhook_signature_header), webhook_signature(token_, request.body)});
  request.headers.push_back(
      {std::string(webhook_idempotency_header), fmt::format("{}:{}", part.run_id, part.part)});
  // Awaited as a named value: GCC 12 destroys some temporaries of a co_await
  // full-expression twice.
  auto fetching = http.fetch(std::move(request));
  auto response = co_await std::move(fetching);
  if (!response) {
    // The receiver may have the message when the connection broke after sending; the
    // idempotency key lets it drop the copy a retry brings.
    send_result out;
    out.outcome = send_outcome::retry;
    out.error = response.error().message;
    co_return out;
  }
  co_return classify_http_status(response->status, response->header("retry-after"), response->body);
}

} // namespace troupe::net::channel
