#include "troupe/net/channel/slack_adapter.hpp"

#include <fmt/format.h>

#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::channel {

namespace asio = boost::asio;

namespace {

/// A Web API call: a JSON POST with the bot token.
http_client_request web_api_call(const slack_options& o, std::string_view method, std::string body,
                                 std::chrono::milliseconds deadline) {
  auto request = json_post(slack::method_url(o.api_base, method), std::move(body), deadline);
  request.headers = {{"Content-Type", "application/json; charset=utf-8"},
                     {"Authorization", "Bearer " + o.bot_token}};
  return request;
}

/// The `user_id` of an auth.test answer.
std::optional<std::string> auth_user_id(std::string_view body) {
  auto parsed = json_object::parse(body);
  if (!parsed) {
    return std::nullopt;
  }
  auto user = parsed->text("user_id");
  if (!user || !*user || (*user)->empty()) {
    return std::nullopt;
  }
  return std::move(**user);
}

std::string describe(const slack::answer& a) {
  return fmt::format("HTTP {} ({}): {}", a.http_status, slack::to_string(a.kind), a.error);
}

} // namespace

std::vector<inbound_message> slack_inbound(const slack::envelope& envelope,
                                           std::string_view bot_user_id) {
  std::vector<inbound_message> out;
  if (envelope.type != slack::envelope::kind::message || !envelope.message ||
      envelope.message->ignored) {
    return out;
  }
  const auto& e = *envelope.message;
  auto text = std::string(slack::strip_mention(e.text, bot_user_id));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return out; // a bare mention: nothing to answer
  }
  inbound_message m;
  m.message_id = slack::message_key(e);
  if (!e.event_id.empty()) {
    m.delivery_id = "event:" + e.event_id;
  }
  m.thread = slack::thread_key(e);
  m.sender = e.user;
  m.text = std::move(text);
  m.reply_to = e.channel + ':' + std::string(slack::reply_thread_ts(e));
  out.push_back(std::move(m));
  return out;
}

inbound_message slack_command_inbound(const slack::slash_command& command) {
  inbound_message m;
  m.message_id = "command:" + command.trigger_id;
  m.thread = command.channel_id;
  m.sender = command.user_id;
  m.text = command.command;
  if (!command.text.empty()) {
    m.text += ' ' + command.text;
  }
  // No thread: the answer goes to the channel itself.
  m.reply_to = command.channel_id + ':';
  return m;
}

std::optional<slack_thread> parse_slack_reply_to(std::string_view reply_to) {
  const auto colon = reply_to.find(':');
  if (colon == 0 || colon == std::string_view::npos) {
    return std::nullopt;
  }
  return slack_thread{std::string(reply_to.substr(0, colon)),
                      std::string(reply_to.substr(colon + 1))};
}

slack_adapter::slack_adapter(slack_options options) : options_(std::move(options)) {}

slack_adapter::~slack_adapter() {
  task_.stop(false);
}

std::string slack_adapter::bot_user_id() const {
  std::lock_guard lock(mutex_);
  return bot_user_id_;
}

expected<void> slack_adapter::verify(const http_request& request) const {
  const auto check = slack::verify_signature(
      options_.signing_secret, request.header(slack::timestamp_header),
      request.header(slack::signature_header), request.body, std::chrono::system_clock::now());
  if (check != slack::signature_check::valid) {
    return fail(errc::permission_denied,
                fmt::format("the Slack signature is not valid ({})", slack::to_string(check)));
  }
  return {};
}

expected<decoded_request> slack_adapter::decode(const http_request& request) const {
  if (slack::is_slash_command(request.header("Content-Type"), request.body)) {
    auto command = slack::decode_slash_command(request.body);
    if (!command) {
      return fail(errc::invalid_argument, command.error().message);
    }
    decoded_request out;
    out.messages.push_back(slack_command_inbound(*command));
    // An empty 200: Slack shows nothing for it; the answer comes as a message.
    out.empty_response = true;
    return out;
  }
  const auto bot = bot_user_id();
  auto envelope = slack::decode_envelope(request.body, bot);
  if (!envelope) {
    return fail(errc::invalid_argument, envelope.error().message);
  }
  decoded_request out;
  if (envelope->type == slack::envelope::kind::url_verification) {
    out.response_body = slack::encode_challenge_answer(envelope->challenge);
    return out;
  }
  out.messages = slack_inbound(*envelope, bot);
  return out;
}

std::vector<std::string> slack_adapter::split(std::string_view text) const {
  return troupe::channel::split_message(text, troupe::channel::slack_message_limit);
}

namespace {

/// One chat.postMessage or chat.update, its answer as a send_result (`ts` its message id).
asio::awaitable<send_result> post_call(http_client& http, http_client_request request) {
  send_result out;
  // Awaited as a named value: GCC 12 destroys some temporaries of a co_await
  // full-expression twice.
  auto fetching = http.fetch(std::move(request));
  auto response = co_await std::move(fetching);
  if (!response) {
    out.outcome = send_outcome::retry;
    out.error = response.error().message;
    co_return out;
  }
  const auto answer =
      slack::classify_answer(response->status, response->header("retry-after"), response->body);
  if (answer.ok()) {
    out.outcome = send_outcome::sent;
    out.platform_message_id = answer.ts;
    co_return out;
  }
  out.error = describe(answer);
  if (answer.retryable()) {
    // HTTP 429, or 200 with `ratelimited`; Slack's own failures.
    out.outcome = send_outcome::retry;
    if (answer.retry_after) {
      out.retry_after = *answer.retry_after;
    }
    co_return out;
  }
  out.outcome = send_outcome::failed;
  co_return out;
}

} // namespace

asio::awaitable<send_result> slack_adapter::send(http_client& http, outbound_part part,
                                                 std::chrono::milliseconds deadline) {
  const auto thread = parse_slack_reply_to(part.reply_to);
  if (!thread) {
    send_result out;
    out.error = fmt::format("'{}' is not a Slack channel and thread", part.reply_to);
    co_return out;
  }
  auto posting = post_call(
      http, web_api_call(options_, "chat.postMessage",
                         slack::encode_post_message(
                             thread->channel, troupe::channel::markdown_to_slack_mrkdwn(part.text),
                             thread->thread_ts),
                         deadline));
  co_return co_await std::move(posting);
}

asio::awaitable<send_result> slack_adapter::edit(http_client& http, outbound_part part,
                                                 std::string platform_message_id,
                                                 std::chrono::milliseconds deadline) {
  const auto thread = parse_slack_reply_to(part.reply_to);
  if (!thread || platform_message_id.empty()) {
    send_result out;
    out.error =
        fmt::format("'{}' in '{}' is not a Slack message", platform_message_id, part.reply_to);
    co_return out;
  }
  auto updating =
      post_call(http, web_api_call(options_, "chat.update",
                                   slack::encode_update_message(
                                       thread->channel, platform_message_id,
                                       troupe::channel::markdown_to_slack_mrkdwn(part.text)),
                                   deadline));
  auto out = co_await std::move(updating);
  if (out.outcome == send_outcome::sent) {
    out.platform_message_id = platform_message_id;
  }
  co_return out;
}

asio::awaitable<void> slack_adapter::learn_identity(http_client& http) {
  auto backoff = options_.first_backoff;
  while (!task_.stopping()) {
    auto fetching = http.fetch(web_api_call(options_, "auth.test", "{}", options_.call_deadline));
    auto response = co_await std::move(fetching);
    if (task_.stopping()) {
      co_return;
    }
    std::string why;
    std::optional<std::chrono::seconds> retry_after;
    if (response) {
      const auto answer =
          slack::classify_answer(response->status, response->header("retry-after"), response->body);
      auto user = answer.ok() ? auth_user_id(response->body) : std::nullopt;
      if (user) {
        std::lock_guard lock(mutex_);
        bot_user_id_ = std::move(*user);
        log::info("slack channel {}: the bot is {}", options_.channel, bot_user_id_);
        co_return;
      }
      if (!answer.retryable() && !answer.ok()) {
        log::error("slack channel {}: auth.test refused: {} (replies will fail too)",
                   options_.channel, describe(answer));
        co_return;
      }
      why = answer.ok() ? std::string("no user_id in its answer") : describe(answer);
      retry_after = answer.retry_after;
    } else {
      why = response.error().message;
    }
    const auto wait =
        std::max<std::chrono::milliseconds>(backoff, retry_after.value_or(std::chrono::seconds(0)));
    backoff = std::min(backoff * 2, options_.max_backoff);
    log::warn("slack channel {}: auth.test failed ({}), again in {} ms", options_.channel, why,
              wait.count());
    auto pausing = task_.pause(http.get_executor(), wait);
    if (!co_await std::move(pausing)) {
      co_return;
    }
  }
}

void slack_adapter::start(http_client& http, inbound_sink) {
  auto self = shared_from_this();
  task_.start(http.get_executor(), [self, &http] { return self->learn_identity(http); });
}

void slack_adapter::stop(bool wait) {
  task_.stop(wait);
}

} // namespace troupe::net::channel
