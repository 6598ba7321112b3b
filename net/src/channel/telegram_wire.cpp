#include "troupe/net/channel/telegram_wire.hpp"

#include <algorithm>

#include "channel/platform_wire.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::telegram {

namespace {

using namespace channel_json;

/// The sender's display name: first and last name, else the username.
std::string display_name(dom::object from) {
  auto name = text_member(from, "first_name");
  if (const auto last = text_member(from, "last_name"); !last.empty()) {
    name += name.empty() ? last : " " + last;
  }
  return name.empty() ? text_member(from, "username") : name;
}

void read_sender(dom::object from, inbound_message& m) {
  m.from_id = int_member(from, "id").value_or(0);
  m.from_name = display_name(from);
  m.from_username = text_member(from, "username");
  m.from_is_bot = bool_member(from, "is_bot").value_or(false);
}

/// Adds a callback query (a press of an inline button) with `data` as a message of its
/// sender in the chat of the message that carried the button; else a skip.
void add_callback_query(std::int64_t update_id, dom::object query, update_batch& batch) {
  const auto id = string_member(query, "id");
  const auto data = string_member(query, "data");
  const auto message = object_member(query, "message");
  const auto chat = message ? object_member(*message, "chat") : std::nullopt;
  const auto chat_id = chat ? int_member(*chat, "id") : std::nullopt;
  const auto from = object_member(query, "from");
  if (!id || id->empty() || !data || !chat_id || !from) {
    ++batch.skipped;
    return;
  }
  inbound_message m;
  m.update_id = update_id;
  m.callback_query_id = std::string(*id);
  m.chat_id = *chat_id;
  m.chat_type = text_member(*chat, "type");
  m.message_id = int_member(*message, "message_id").value_or(0);
  m.text = std::string(*data);
  m.date = int_member(*message, "date").value_or(0);
  if (bool_member(*message, "is_topic_message").value_or(false)) {
    m.topic = int_member(*message, "message_thread_id");
  }
  read_sender(*from, m);
  batch.messages.push_back(std::move(m));
}

/// Adds one Update to `batch`: its message when it is a text message or a button press,
/// else a skip.
expected<void> add_update(dom::object update, update_batch& batch, std::string_view what) {
  const auto id = int_member(update, "update_id");
  if (!id) {
    return fail(errc::parse_error, std::string(what) + ": an update has no integer update_id");
  }
  batch.next_offset = std::max(batch.next_offset, *id + 1);
  if (const auto query = object_member(update, "callback_query")) {
    add_callback_query(*id, *query, batch);
    return {};
  }
  // Only `message` is a new turn: `edited_message` reuses a message_id (an edit).
  const auto message = object_member(update, "message");
  const auto text = message ? string_member(*message, "text") : std::nullopt;
  const auto chat = message ? object_member(*message, "chat") : std::nullopt;
  const auto chat_id = chat ? int_member(*chat, "id") : std::nullopt;
  const auto message_id = message ? int_member(*message, "message_id") : std::nullopt;
  if (!text || !chat_id || !message_id) {
    ++batch.skipped;
    return {};
  }
  inbound_message m;
  m.update_id = *id;
  m.chat_id = *chat_id;
  m.chat_type = text_member(*chat, "type");
  m.message_id = *message_id;
  m.text = std::string(*text);
  m.date = int_member(*message, "date").value_or(0);
  if (bool_member(*message, "is_topic_message").value_or(false)) {
    m.topic = int_member(*message, "message_thread_id");
  }
  if (const auto from = object_member(*message, "from")) {
    read_sender(*from, m);
  }
  batch.messages.push_back(std::move(m));
  return {};
}

void write_topic(json_writer& w, std::optional<std::int64_t> topic, bool keep_general) {
  if (topic && (keep_general || *topic != general_topic)) {
    w.key("message_thread_id").value(*topic);
  }
}

void write_allowed_updates(json_writer& w, const std::vector<std::string>& allowed) {
  w.key("allowed_updates").begin_array();
  for (const auto& kind : allowed) {
    w.value(kind);
  }
  w.end_array();
}

bool contains(std::string_view text, std::string_view needle) {
  return std::search(text.begin(), text.end(), needle.begin(), needle.end(), [](char a, char b) {
           const auto lower = [](char c) {
             return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
           };
           return lower(a) == lower(b);
         }) != text.end();
}

} // namespace

expected<update_batch> decode_get_updates(std::string_view body) {
  constexpr std::string_view what = "getUpdates answer";
  auto doc = document::parse_object(body, what);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  if (!bool_member(doc->root(), "ok").value_or(false)) {
    return fail(errc::parse_error, "getUpdates answer: is not ok: " + excerpt(body));
  }
  const auto result = array_member(doc->root(), "result");
  if (!result) {
    return fail(errc::parse_error, "getUpdates answer: has no result array");
  }
  update_batch batch;
  for (auto value : *result) {
    dom::object update;
    if (value.get_object().get(update) != simdjson::SUCCESS) {
      return fail(errc::parse_error, "getUpdates answer: an update is not an object");
    }
    if (auto added = add_update(update, batch, what); !added) {
      return tl::unexpected(added.error());
    }
  }
  return batch;
}

expected<update_batch> decode_webhook_update(std::string_view body) {
  constexpr std::string_view what = "webhook update";
  auto doc = document::parse_object(body, what);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  update_batch batch;
  if (auto added = add_update(doc->root(), batch, what); !added) {
    return tl::unexpected(added.error());
  }
  return batch;
}

std::string thread_key(std::int64_t chat_id, std::optional<std::int64_t> topic) {
  auto key = std::to_string(chat_id);
  if (topic) {
    key += ':' + std::to_string(*topic);
  }
  return key;
}

std::string message_key(const inbound_message& m) {
  if (!m.callback_query_id.empty()) {
    return "callback:" + m.callback_query_id;
  }
  return std::to_string(m.chat_id) + ':' + std::to_string(m.message_id);
}

const std::vector<std::string>& channel_updates() {
  static const std::vector<std::string> kinds{"message", "callback_query"};
  return kinds;
}

std::string method_url(std::string_view api_base, std::string_view token, std::string_view method) {
  return join_url(api_base, "bot" + std::string(token) + "/" + std::string(method));
}

std::string encode_send_message(const send_message& m) {
  json_writer w;
  w.begin_object().key("chat_id").value(m.chat_id);
  write_topic(w, m.topic, false);
  w.key("text").value(m.text);
  if (m.html) {
    w.key("parse_mode").value("HTML");
  }
  if (m.reply_to) {
    w.key("reply_parameters")
        .begin_object()
        .key("message_id")
        .value(*m.reply_to)
        .key("allow_sending_without_reply")
        .value(true)
        .end_object();
  }
  if (m.disable_link_preview) {
    w.key("link_preview_options").begin_object().key("is_disabled").value(true).end_object();
  }
  if (!m.buttons.empty()) {
    w.key("reply_markup").begin_object().key("inline_keyboard").begin_array().begin_array();
    for (const auto& b : m.buttons) {
      w.begin_object().key("text").value(b.text).key("callback_data").value(b.callback_data);
      w.end_object();
    }
    w.end_array().end_array().end_object();
  }
  return std::move(w.end_object()).str();
}

std::string encode_answer_callback_query(std::string_view callback_query_id,
                                         std::string_view text) {
  json_writer w;
  w.begin_object().key("callback_query_id").value(callback_query_id);
  if (!text.empty()) {
    w.key("text").value(text);
  }
  return std::move(w.end_object()).str();
}

std::string encode_send_chat_action(std::int64_t chat_id, std::optional<std::int64_t> topic,
                                    std::string_view action) {
  json_writer w;
  w.begin_object().key("chat_id").value(chat_id);
  write_topic(w, topic, true);
  w.key("action").value(action);
  return std::move(w.end_object()).str();
}

std::string encode_edit_message_text(std::int64_t chat_id, std::int64_t message_id,
                                     std::string_view text, bool html) {
  json_writer w;
  w.begin_object().key("chat_id").value(chat_id).key("message_id").value(message_id);
  w.key("text").value(text);
  if (html) {
    w.key("parse_mode").value("HTML");
  }
  return std::move(w.end_object()).str();
}

std::string encode_set_webhook(const webhook_settings& s) {
  json_writer w;
  w.begin_object().key("url").value(s.url);
  if (!s.secret_token.empty()) {
    w.key("secret_token").value(s.secret_token);
  }
  if (s.max_connections > 0) {
    w.key("max_connections").value(s.max_connections);
  }
  write_allowed_updates(w, s.allowed_updates);
  w.key("drop_pending_updates").value(s.drop_pending_updates);
  return std::move(w.end_object()).str();
}

std::string encode_get_updates(std::int64_t offset, std::chrono::seconds timeout, unsigned limit,
                               const std::vector<std::string>& allowed_updates) {
  json_writer w;
  w.begin_object();
  if (offset > 0) {
    w.key("offset").value(offset);
  }
  w.key("timeout").value(static_cast<std::int64_t>(timeout.count()));
  w.key("limit").value(std::clamp(limit, 1u, 100u));
  write_allowed_updates(w, allowed_updates);
  return std::move(w.end_object()).str();
}

std::string_view to_string(answer_kind k) noexcept {
  switch (k) {
    case answer_kind::ok:
      return "ok";
    case answer_kind::rate_limited:
      return "rate_limited";
    case answer_kind::parse_entities:
      return "parse_entities";
    case answer_kind::not_modified:
      return "not_modified";
    case answer_kind::migrated:
      return "migrated";
    case answer_kind::conflict:
      return "conflict";
    case answer_kind::unauthorized:
      return "unauthorized";
    case answer_kind::server_error:
      return "server_error";
    case answer_kind::permanent:
      return "permanent";
    case answer_kind::malformed:
      return "malformed";
  }
  return "malformed";
}

answer classify_answer(unsigned http_status, std::string_view body) {
  answer out;
  out.error_code = http_status;
  auto doc = document::parse_object(body, "Bot API answer");
  const auto ok = doc ? bool_member(doc->root(), "ok") : std::nullopt;
  if (!ok) {
    // Not the Bot API's shape: a proxy's error page, a cut body. The status still tells
    // a server failure from anything else.
    out.kind = http_status >= 500 ? answer_kind::server_error : answer_kind::malformed;
    out.description = doc ? "Bot API answer: has no boolean ok: " + excerpt(body)
                          : doc.error().message + ": " + excerpt(body);
    return out;
  }
  const auto root = doc->root();
  out.description = text_member(root, "description");
  if (*ok) {
    out.kind = answer_kind::ok;
    if (const auto result = object_member(root, "result")) {
      out.message_id = int_member(*result, "message_id");
      out.username = text_member(*result, "username");
    }
    return out;
  }
  if (const auto code = int_member(root, "error_code"); code && *code > 0 && *code < 1000) {
    out.error_code = static_cast<unsigned>(*code);
  }
  if (const auto parameters = object_member(root, "parameters")) {
    if (const auto seconds = int_member(*parameters, "retry_after"); seconds && *seconds >= 0) {
      out.retry_after = std::chrono::seconds(*seconds);
    }
    out.migrate_to_chat_id = int_member(*parameters, "migrate_to_chat_id");
  }
  const auto status = out.error_code;
  if (status == 429 || out.retry_after) {
    out.kind = answer_kind::rate_limited;
    if (!out.retry_after) {
      out.retry_after = std::chrono::seconds(1);
    }
  } else if (out.migrate_to_chat_id) {
    out.kind = answer_kind::migrated;
  } else if (status == 400 && contains(out.description, "can't parse entities")) {
    out.kind = answer_kind::parse_entities;
  } else if (status == 400 && contains(out.description, "message is not modified")) {
    out.kind = answer_kind::not_modified;
  } else if (status == 409) {
    out.kind = answer_kind::conflict;
  } else if (status == 401 || status == 404) {
    out.kind = answer_kind::unauthorized;
  } else if (status >= 500) {
    out.kind = answer_kind::server_error;
  } else {
    out.kind = answer_kind::permanent;
  }
  return out;
}

bool valid_secret_token(std::string_view token) noexcept {
  if (token.empty() || token.size() > 256) {
    return false;
  }
  return std::all_of(token.begin(), token.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

bool verify_secret_token(std::string_view header_value, std::string_view secret) noexcept {
  if (secret.empty()) {
    return false;
  }
  return constant_time_equal(header_value, secret);
}

} // namespace troupe::net::telegram
