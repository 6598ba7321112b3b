#include "troupe/net/channel/telegram_adapter.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::net::channel {

namespace asio = boost::asio;

namespace {

/// An answer that came sooner than this with no update did not long-poll.
constexpr auto prompt_answer = std::chrono::seconds(1);

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || at != end || text.empty()) {
    return std::nullopt;
  }
  return value;
}

std::string describe(const telegram::answer& a) {
  return fmt::format("{} ({}): {}", a.error_code, telegram::to_string(a.kind), a.description);
}

send_result to_send_result(const telegram::answer& a, bool transport) {
  send_result out;
  if (a.ok()) {
    out.outcome = send_outcome::sent;
    if (a.message_id) {
      out.platform_message_id = std::to_string(*a.message_id);
    }
    return out;
  }
  out.error = transport ? a.description : describe(a);
  if (transport || a.retryable()) {
    out.outcome = send_outcome::retry;
    if (a.retry_after) {
      out.retry_after = *a.retry_after;
    }
    return out;
  }
  out.outcome = send_outcome::failed;
  return out;
}

/// The callback queries (button presses) of a batch, to answer once they are journaled.
std::vector<std::string> callback_ids(const telegram::update_batch& batch) {
  std::vector<std::string> out;
  for (const auto& m : batch.messages) {
    if (!m.callback_query_id.empty() && !m.from_is_bot) {
      out.push_back(m.callback_query_id);
    }
  }
  return out;
}

} // namespace

std::string telegram_webhook_secret(std::string_view token, std::string_view channel) {
  return to_hex(hmac_sha256(token, channel));
}

std::vector<inbound_message> telegram_inbound(const telegram::update_batch& batch) {
  std::vector<inbound_message> out;
  for (const auto& m : batch.messages) {
    if (m.from_is_bot) {
      continue; // another bot (or a channel post forwarded by one): never a turn
    }
    inbound_message in;
    in.message_id = telegram::message_key(m);
    in.delivery_id = "update:" + std::to_string(m.update_id);
    in.thread = telegram::thread_key(m);
    in.sender = std::to_string(m.from_id != 0 ? m.from_id : m.chat_id);
    in.text = m.text;
    in.reply_to = in.thread;
    out.push_back(std::move(in));
  }
  return out;
}

std::optional<telegram_chat> parse_telegram_reply_to(std::string_view reply_to) {
  telegram_chat out;
  const auto colon = reply_to.find(':');
  const auto chat = parse_int(reply_to.substr(0, colon));
  if (!chat) {
    return std::nullopt;
  }
  out.chat_id = *chat;
  if (colon != std::string_view::npos) {
    out.topic = parse_int(reply_to.substr(colon + 1));
    if (!out.topic) {
      return std::nullopt;
    }
  }
  return out;
}

telegram_adapter::telegram_adapter(telegram_options options)
    : options_(std::move(options)),
      secret_(telegram_webhook_secret(options_.token, options_.channel)) {}

telegram_adapter::~telegram_adapter() {
  task_.stop(false);
}

expected<void> telegram_adapter::verify(const http_request& request) const {
  if (options_.mode != "webhook") {
    return fail(errc::permission_denied,
                "this Telegram channel polls (mode = \"poll\"): it takes no webhook");
  }
  if (!telegram::verify_secret_token(request.header(telegram::secret_token_header), secret_)) {
    return fail(errc::permission_denied, "X-Telegram-Bot-Api-Secret-Token is missing or wrong");
  }
  return {};
}

expected<decoded_request> telegram_adapter::decode(const http_request& request) const {
  auto batch = telegram::decode_webhook_update(request.body);
  if (!batch) {
    return fail(errc::invalid_argument, batch.error().message);
  }
  decoded_request out;
  out.messages = telegram_inbound(*batch);
  // A button press is answered in the webhook's response (Telegram runs a method given
  // there), which stops the button's spinner without a call of its own.
  for (const auto& m : batch->messages) {
    if (!m.callback_query_id.empty()) {
      json_writer w;
      w.begin_object().key("method").value("answerCallbackQuery");
      w.key("callback_query_id").value(m.callback_query_id).end_object();
      out.response_body = std::move(w).str();
    }
  }
  return out;
}

std::vector<std::string> telegram_adapter::split(std::string_view text) const {
  return troupe::channel::split_message(text, troupe::channel::telegram_message_limit);
}

asio::awaitable<telegram_adapter::call_result>
telegram_adapter::call(http_client& http, std::string_view method, std::string body,
                       std::chrono::milliseconds deadline) const {
  auto request = json_post(telegram::method_url(options_.api_base, options_.token, method),
                           std::move(body), deadline);
  // Awaited as a named value: GCC 12 destroys some temporaries of a co_await
  // full-expression twice.
  auto fetching = http.fetch(std::move(request));
  auto response = co_await std::move(fetching);
  call_result out;
  if (!response) {
    out.transport = true;
    out.answer.kind = telegram::answer_kind::malformed;
    out.answer.description = response.error().message;
    co_return out;
  }
  out.answer = telegram::classify_answer(response->status, response->body);
  out.body = std::move(response->body);
  co_return out;
}

asio::awaitable<send_result> telegram_adapter::send(http_client& http, outbound_part part,
                                                    std::chrono::milliseconds deadline) {
  const auto chat = parse_telegram_reply_to(part.reply_to);
  if (!chat) {
    send_result out;
    out.error = fmt::format("'{}' is not a Telegram chat", part.reply_to);
    co_return out;
  }
  telegram::send_message message;
  message.chat_id = chat->chat_id;
  message.topic = chat->topic;
  message.text = troupe::channel::markdown_to_telegram_html(part.text);
  // Buttons only when every answer fits Telegram's 64 bytes of callback data; the text
  // says how to answer either way.
  const bool fits = std::all_of(part.choices.begin(), part.choices.end(),
                                [](const reply_choice& c) { return c.reply.size() <= 64; });
  if (fits) {
    for (const auto& c : part.choices) {
      message.buttons.push_back({c.label, c.reply});
    }
  }
  auto sending = call(http, "sendMessage", telegram::encode_send_message(message), deadline);
  auto result = co_await std::move(sending);
  if (result.answer.kind == telegram::answer_kind::migrated && result.answer.migrate_to_chat_id) {
    // The group became a supergroup: the same part goes to its new id (topics do not move).
    log::info("telegram channel {}: chat {} moved to {}", options_.channel, message.chat_id,
              *result.answer.migrate_to_chat_id);
    message.chat_id = *result.answer.migrate_to_chat_id;
    message.topic.reset();
    auto again = call(http, "sendMessage", telegram::encode_send_message(message), deadline);
    result = co_await std::move(again);
  }
  if (result.answer.kind == telegram::answer_kind::parse_entities) {
    // Telegram refused the HTML: the part as written, as plain text, at once.
    log::warn("telegram channel {}: HTML refused ({}); sent as plain text", options_.channel,
              result.answer.description);
    message.html = false;
    message.text = part.text;
    auto plain = call(http, "sendMessage", telegram::encode_send_message(message), deadline);
    result = co_await std::move(plain);
  }
  co_return to_send_result(result.answer, result.transport);
}

asio::awaitable<send_result> telegram_adapter::edit(http_client& http, outbound_part part,
                                                    std::string platform_message_id,
                                                    std::chrono::milliseconds deadline) {
  const auto chat = parse_telegram_reply_to(part.reply_to);
  const auto message_id = parse_int(platform_message_id);
  if (!chat || !message_id) {
    send_result out;
    out.error =
        fmt::format("'{}' in '{}' is not a Telegram message", platform_message_id, part.reply_to);
    co_return out;
  }
  auto editing =
      call(http, "editMessageText",
           telegram::encode_edit_message_text(
               chat->chat_id, *message_id, troupe::channel::markdown_to_telegram_html(part.text)),
           deadline);
  auto result = co_await std::move(editing);
  if (result.answer.kind == telegram::answer_kind::parse_entities) {
    // As for a new message: the HTML refused, the text as written.
    auto plain = call(http, "editMessageText",
                      telegram::encode_edit_message_text(chat->chat_id, *message_id, part.text,
                                                         /*html=*/false),
                      deadline);
    result = co_await std::move(plain);
  }
  if (result.answer.kind == telegram::answer_kind::not_modified) {
    send_result same;
    same.outcome = send_outcome::sent;
    same.platform_message_id = platform_message_id;
    co_return same;
  }
  auto out = to_send_result(result.answer, result.transport);
  if (out.outcome == send_outcome::sent) {
    out.platform_message_id = platform_message_id;
  }
  co_return out;
}

std::string telegram_adapter::bot_name() const {
  const std::lock_guard lock(name_mutex_);
  return bot_name_;
}

asio::awaitable<void> telegram_adapter::learn_name(http_client& http) {
  auto asking = call(http, "getMe", "{}", options_.call_grace);
  const auto me = co_await std::move(asking);
  if (!me.answer.ok() || me.answer.username.empty()) {
    log::warn("telegram channel {}: getMe failed ({}); commands addressed to any bot are taken",
              options_.channel, me.transport ? me.answer.description : describe(me.answer));
    co_return;
  }
  const std::lock_guard lock(name_mutex_);
  bot_name_ = me.answer.username;
}

asio::awaitable<void> telegram_adapter::typing(http_client& http, std::string reply_to,
                                               std::chrono::milliseconds deadline) {
  const auto chat = parse_telegram_reply_to(reply_to);
  if (!chat) {
    co_return;
  }
  auto calling = call(http, "sendChatAction",
                      telegram::encode_send_chat_action(chat->chat_id, chat->topic), deadline);
  const auto result = co_await std::move(calling);
  if (!result.answer.ok()) {
    log::debug("telegram channel {}: sendChatAction failed: {}", options_.channel,
               result.transport ? result.answer.description : describe(result.answer));
  }
}

asio::awaitable<void> telegram_adapter::poll(http_client& http, inbound_sink sink) {
  // A webhook set earlier (this channel in webhook mode before) makes getUpdates 409.
  {
    auto deleting = call(http, "deleteWebhook", "{}", options_.call_grace);
    const auto deleted = co_await std::move(deleting);
    if (!deleted.answer.ok()) {
      log::warn("telegram channel {}: deleteWebhook failed: {}", options_.channel,
                deleted.answer.description);
    }
  }
  std::int64_t offset = 0;
  auto backoff = options_.first_backoff;
  const auto back_off = [&](std::chrono::milliseconds at_least) {
    const auto wait = std::max(backoff, at_least);
    backoff = std::min(backoff * 2, options_.max_backoff);
    return wait;
  };
  while (!task_.stopping()) {
    const auto began = std::chrono::steady_clock::now();
    auto polling =
        call(http, "getUpdates", telegram::encode_get_updates(offset, options_.poll_timeout),
             options_.poll_timeout + options_.call_grace);
    auto result = co_await std::move(polling);
    if (task_.stopping()) {
      break;
    }
    if (!result.answer.ok()) {
      auto wait = back_off(result.answer.retry_after.value_or(std::chrono::seconds(0)));
      if (result.answer.kind == telegram::answer_kind::unauthorized) {
        wait = options_.max_backoff; // a wrong token: try now and then, quietly
      }
      log::warn("telegram channel {}: getUpdates failed ({}), again in {} ms", options_.channel,
                result.transport ? result.answer.description : describe(result.answer),
                wait.count());
      auto pausing = task_.pause(http.get_executor(), wait);
      if (!co_await std::move(pausing)) {
        break;
      }
      continue;
    }
    auto batch = telegram::decode_get_updates(result.body);
    if (!batch) {
      const auto wait = back_off(std::chrono::milliseconds(0));
      log::warn("telegram channel {}: getUpdates answer unreadable ({}), again in {} ms",
                options_.channel, batch.error().message, wait.count());
      auto pausing = task_.pause(http.get_executor(), wait);
      if (!co_await std::move(pausing)) {
        break;
      }
      continue;
    }
    if (auto messages = telegram_inbound(*batch); !messages.empty()) {
      const auto presses = callback_ids(*batch);
      auto journaling = sink(std::move(messages));
      if (auto journaled = co_await std::move(journaling); !journaled) {
        // Not confirmed: the same updates come again, and the journal drops what it has.
        const auto wait = back_off(std::chrono::milliseconds(0));
        log::warn("telegram channel {}: updates not journaled ({}), again in {} ms",
                  options_.channel, journaled.error().message, wait.count());
        auto pausing = task_.pause(http.get_executor(), wait);
        if (!co_await std::move(pausing)) {
          break;
        }
        continue;
      }
      // Journaled: the pressed buttons' spinners stop (best effort: a press not answered
      // only spins until Telegram gives up on it).
      for (const auto& id : presses) {
        auto answering = call(http, "answerCallbackQuery",
                              telegram::encode_answer_callback_query(id), options_.call_grace);
        if (const auto answered = co_await std::move(answering); !answered.answer.ok()) {
          log::info("telegram channel {}: answerCallbackQuery failed: {}", options_.channel,
                    answered.answer.description);
        }
      }
    }
    // Journaled: the next call's offset confirms the batch to Telegram.
    if (batch->next_offset > 0) {
      offset = batch->next_offset;
      backoff = options_.first_backoff;
    } else if (std::chrono::steady_clock::now() - began < prompt_answer) {
      // Nothing, and at once: the server does not long-poll; do not spin.
      auto pausing = task_.pause(http.get_executor(), back_off(std::chrono::milliseconds(0)));
      if (!co_await std::move(pausing)) {
        break;
      }
    } else {
      backoff = options_.first_backoff;
    }
  }
}

asio::awaitable<void> telegram_adapter::register_webhook(http_client& http) {
  if (options_.webhook_url.empty()) {
    log::error("telegram channel {}: mode = \"webhook\" needs callback_url (the public URL of "
               "its inbound route)",
               options_.channel);
    co_return;
  }
  telegram::webhook_settings settings;
  settings.url = options_.webhook_url;
  settings.secret_token = secret_;
  auto backoff = options_.first_backoff;
  while (!task_.stopping()) {
    auto setting =
        call(http, "setWebhook", telegram::encode_set_webhook(settings), options_.call_grace);
    const auto result = co_await std::move(setting);
    if (result.answer.ok()) {
      log::info("telegram channel {}: webhook set", options_.channel);
      co_return;
    }
    if (!result.transport && !result.answer.retryable()) {
      log::error("telegram channel {}: setWebhook refused: {}", options_.channel,
                 describe(result.answer));
      co_return;
    }
    const auto wait = std::max<std::chrono::milliseconds>(
        backoff, result.answer.retry_after.value_or(std::chrono::seconds(0)));
    backoff = std::min(backoff * 2, options_.max_backoff);
    log::warn("telegram channel {}: setWebhook failed ({}), again in {} ms", options_.channel,
              result.answer.description, wait.count());
    auto pausing = task_.pause(http.get_executor(), wait);
    if (!co_await std::move(pausing)) {
      co_return;
    }
  }
}

asio::awaitable<void> telegram_adapter::run(http_client& http, inbound_sink sink) {
  auto naming = learn_name(http);
  co_await std::move(naming);
  if (task_.stopping()) {
    co_return;
  }
  if (options_.mode == "webhook") {
    auto registering = register_webhook(http);
    co_await std::move(registering);
  } else {
    auto polling = poll(http, std::move(sink));
    co_await std::move(polling);
  }
}

void telegram_adapter::start(http_client& http, inbound_sink sink) {
  auto self = shared_from_this();
  task_.start(http.get_executor(),
              [self, &http, sink = std::move(sink)] { return self->run(http, sink); });
}

void telegram_adapter::stop(bool wait) {
  task_.stop(wait);
}

} // namespace troupe::net::channel
