#include "support/fake_telegram.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <deque>
#include <future>
#include <map>
#include <mutex>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

namespace {

constexpr std::int64_t bot_id = 777000;
/// Telegram's limit on a message's text after entity parsing, in UTF-16 code units.
constexpr std::size_t text_limit = 4096;
/// getUpdates waits at most this long, whatever the timeout asked for.
constexpr std::chrono::seconds longest_poll{50};

std::string error_json(unsigned code, std::string_view description,
                       std::optional<unsigned> retry_after = std::nullopt) {
  json_writer w;
  w.begin_object().key("ok").value(false).key("error_code").value(code);
  w.key("description").value(description);
  if (retry_after) {
    w.key("parameters").begin_object().key("retry_after").value(*retry_after).end_object();
  }
  return std::move(w.end_object()).str();
}

http_response error(unsigned code, std::string_view description,
                    std::optional<unsigned> retry_after = std::nullopt) {
  return http_response::json(code, error_json(code, description, retry_after));
}

http_response fault_answer(const telegram_fault& f) {
  switch (f.what) {
    case telegram_fault::kind::rate_limited:
      return error(429, "Too Many Requests: retry after " + std::to_string(f.retry_after),
                   f.retry_after);
    case telegram_fault::kind::server_error:
      return error(500, "Internal Server Error");
    case telegram_fault::kind::parse_entities:
      return error(400, "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte "
                        "offset 0");
    case telegram_fault::kind::blocked:
      return error(403, "Forbidden: bot was blocked by the user");
  }
  return error(500, "Internal Server Error");
}

std::size_t utf16_length(std::string_view text) {
  std::size_t units = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) {
      units += c >= 0xF0 ? 2 : 1;
    }
  }
  return units;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The character an entity at `text[i]` ('&') stands for and its length, if it is one.
std::optional<std::pair<std::string, std::size_t>> entity_at(std::string_view text, std::size_t i) {
  const auto semi = text.find(';', i);
  if (semi == std::string_view::npos || semi - i > 10) {
    return std::nullopt;
  }
  const auto name = text.substr(i + 1, semi - i - 1);
  const std::array<std::pair<std::string_view, std::string_view>, 4> named{
      {{"lt", "<"}, {"gt", ">"}, {"amp", "&"}, {"quot", "\""}}};
  for (const auto& [n, c] : named) {
    if (name == n) {
      return std::pair{std::string(c), semi - i + 1};
    }
  }
  if (name.size() >= 2 && name[0] == '#') {
    const bool hex = name[1] == 'x' || name[1] == 'X';
    const auto digits = name.substr(hex ? 2 : 1);
    std::uint32_t cp = 0;
    if (digits.empty()) {
      return std::nullopt;
    }
    for (char c : digits) {
      const auto v = c >= '0' && c <= '9'          ? c - '0'
                     : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                     : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                   : -1;
      if (v < 0 || cp > 0x10FFFF) {
        return std::nullopt;
      }
      cp = cp * (hex ? 16u : 10u) + static_cast<std::uint32_t>(v);
    }
    if (cp == 0 || cp > 0x10FFFF) {
      return std::nullopt;
    }
    std::string out;
    append_utf8(out, cp);
    return std::pair{out, semi - i + 1};
  }
  return std::nullopt;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

/// A parsed request body (JSON object), or why it is not one.
struct request_json {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  bool ok = false;

  explicit request_json(const std::string& body) {
    simdjson::dom::element root;
    ok = parser.parse(body).get(root) == simdjson::SUCCESS &&
         root.get_object().get(object) == simdjson::SUCCESS;
  }
  std::optional<std::int64_t> integer(std::string_view key) const {
    std::int64_t n = 0;
    if (object.at_key(key).get_int64().get(n) == simdjson::SUCCESS) {
      return n;
    }
    return std::nullopt;
  }
  /// A chat_id: Telegram takes an integer or a string (a numeric id, or "@username" of a
  /// channel, which this fake knows none of).
  std::optional<std::int64_t> chat_id() const {
    if (auto n = integer("chat_id")) {
      return n;
    }
    std::string_view s;
    if (object.at_key("chat_id").get_string().get(s) != simdjson::SUCCESS || s.empty()) {
      return std::nullopt;
    }
    std::int64_t n = 0;
    const auto* end = s.data() + s.size();
    const auto [at, ec] = std::from_chars(s.data(), end, n);
    if (ec != std::errc{} || at != end) {
      return std::nullopt;
    }
    return n;
  }
  std::optional<std::string> text(std::string_view key) const {
    std::string_view s;
    if (object.at_key(key).get_string().get(s) == simdjson::SUCCESS) {
      return std::string(s);
    }
    return std::nullopt;
  }
};

} // namespace

std::optional<std::string> telegram_html_problem(std::string_view text) {
  static constexpr std::array supported{
      "b",   "strong", "i",          "em", "u",        "ins",  "s",   "strike",
      "del", "span",   "tg-spoiler", "a",  "tg-emoji", "code", "pre", "blockquote"};
  std::vector<std::string> open;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '<') {
      continue;
    }
    const auto end = text.find('>', i);
    if (end == std::string_view::npos) {
      return "Unclosed start tag at byte offset " + std::to_string(i);
    }
    auto inside = text.substr(i + 1, end - i - 1);
    if (inside.starts_with('/')) {
      const auto name = lower(inside.substr(1));
      if (open.empty()) {
        return "Unexpected end tag at byte offset " + std::to_string(i);
      }
      if (open.back() != name) {
        return "Unmatched end tag at byte offset " + std::to_string(i) + ", expected \"</" +
               open.back() + ">\", found \"</" + name + ">\"";
      }
      open.pop_back();
    } else {
      const auto name = lower(inside.substr(0, inside.find_first_of(" \t\n/")));
      if (std::find(supported.begin(), supported.end(), name) == supported.end()) {
        return "Unsupported start tag \"" + name + "\" at byte offset " + std::to_string(i);
      }
      open.push_back(name);
    }
    i = end;
  }
  if (!open.empty()) {
    return "Can't find end tag corresponding to start tag \"" + open.back() + "\"";
  }
  return std::nullopt;
}

std::string telegram_visible_text(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '<') {
      const auto end = text.find('>', i);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (text[i] == '&') {
      if (auto e = entity_at(text, i)) {
        out += e->first;
        i += e->second;
      } else {
        out += '&';
        ++i;
      }
    } else {
      out += text[i++];
    }
  }
  return out;
}

struct fake_telegram::state {
  std::string token;
  asio::io_context* io = nullptr;
  call_log log;
  fault_plan<telegram_fault> faults;

  mutable std::mutex mutex;
  mutable std::condition_variable sent_changed;
  std::int64_t next_update_id = 861000001;
  /// message_id of the next inbound message (Telegram numbers them per chat; one counter
  /// keeps them unique here, which is all a channel may rely on).
  std::int64_t next_inbound_message_id = 10;
  /// Every update ever queued, by id.
  std::map<std::int64_t, std::string> updates;
  /// Unconfirmed update ids in order.
  std::deque<std::int64_t> pending;
  std::int64_t confirmed = 0;
  std::map<std::int64_t, std::int64_t> next_message_id;
  std::vector<telegram_sent> sent;
  std::string webhook_url;
  std::string webhook_secret;
  std::function<void(std::string_view)> hook;
  std::function<void(const telegram_sent&)> sent_hook;
  /// setMyCommands' lists by scope type ("default", "all_private_chats", …), as JSON.
  std::map<std::string, std::string> commands;

  // io thread only.
  std::vector<asio::steady_timer*> waiters;
  std::uint64_t poll_generation = 0;
  bool stopping = false;

  void wake_polls() {
    for (auto* t : waiters) {
      t->cancel();
    }
  }
  /// Posts wake_polls to the io thread (from any thread).
  void wake_polls_soon() {
    asio::post(*io, [this] { wake_polls(); });
  }
  std::int64_t queue(std::string fields) {
    std::int64_t id = 0;
    {
      const std::lock_guard lock(mutex);
      id = next_update_id++;
      updates[id] =
          "{\"update_id\":" + std::to_string(id) + (fields.empty() ? "" : ",") + fields + "}";
      pending.push_back(id);
    }
    wake_polls_soon();
    return id;
  }
};

namespace {

using state_ptr = std::shared_ptr<fake_telegram::state>;

std::string bot_user_json() {
  return R"({"id":777000,"is_bot":true,"first_name":"Fake Bot","username":"fake_bot"})";
}

/// The Message object of a sent or edited message.
std::string message_json(const telegram_sent& m, bool edited) {
  json_writer w;
  w.begin_object().key("message_id").value(m.message_id);
  if (m.topic) {
    w.key("message_thread_id").value(*m.topic).key("is_topic_message").value(true);
  }
  w.key("from").raw(bot_user_json());
  w.key("chat")
      .begin_object()
      .key("id")
      .value(m.chat_id)
      .key("type")
      .value(m.chat_id > 0 ? "private" : "supergroup")
      .end_object();
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  w.key("date").value(static_cast<std::int64_t>(now));
  if (edited) {
    w.key("edit_date").value(static_cast<std::int64_t>(now));
  }
  w.key("text").value(m.parse_mode == "HTML" ? telegram_visible_text(m.text) : m.text);
  return std::move(w.end_object()).str();
}

http_response ok_with(std::string result_json, std::string_view description = {}) {
  std::string body = "{\"ok\":true,\"result\":" + result_json;
  if (!description.empty()) {
    json_writer w;
    w.value(description);
    body += ",\"description\":" + w.str();
  }
  return http_response::json(200, body + "}");
}

/// Checks a text to send: empty, too long or (with parse_mode HTML) unparsable texts
/// get Telegram's 400s.
std::optional<http_response> text_problem(const std::string& text, const std::string& mode) {
  if (mode == "HTML") {
    if (auto problem = telegram_html_problem(text)) {
      return error(400, "Bad Request: can't parse entities: " + *problem);
    }
  } else if (!mode.empty()) {
    return error(400, "Bad Request: unsupported parse_mode");
  }
  const auto visible = mode == "HTML" ? telegram_visible_text(text) : text;
  if (visible.find_first_not_of(" \t\r\n") == std::string::npos) {
    return error(400, "Bad Request: message text is empty");
  }
  if (utf16_length(visible) > text_limit) {
    return error(400, "Bad Request: message is too long");
  }
  return std::nullopt;
}

asio::awaitable<http_response> get_updates(const request_json& req, state_ptr st) {
  {
    const std::lock_guard lock(st->mutex);
    if (!st->webhook_url.empty()) {
      co_return error(409, "Conflict: can't use getUpdates method while webhook is active; use "
                           "deleteWebhook to delete the webhook first");
    }
  }
  const auto offset = req.integer("offset").value_or(0);
  const auto limit = std::clamp<std::int64_t>(req.integer("limit").value_or(100), 1, 100);
  const auto timeout = std::min<std::chrono::seconds>(
      std::chrono::seconds(req.integer("timeout").value_or(0)), longest_poll);
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  // A newer getUpdates ends this one with 409, as Telegram does.
  const auto generation = ++st->poll_generation;
  st->wake_polls();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (true) {
    std::vector<std::string> batch;
    {
      const std::lock_guard lock(st->mutex);
      if (offset > 0) {
        st->confirmed = std::max(st->confirmed, offset - 1);
        std::erase_if(st->pending, [&](std::int64_t id) { return id < offset; });
      }
      for (auto id : st->pending) {
        if (static_cast<std::int64_t>(batch.size()) == limit) {
          break;
        }
        if (id >= offset) {
          batch.push_back(st->updates[id]);
        }
      }
    }
    if (generation != st->poll_generation) {
      co_return error(409, "Conflict: terminated by other getUpdates request; make sure that "
                           "only one bot instance is running");
    }
    if (!batch.empty() || st->stopping || std::chrono::steady_clock::now() >= give_up) {
      std::string result = "[";
      for (std::size_t i = 0; i < batch.size(); ++i) {
        result += (i ? "," : "") + batch[i];
      }
      co_return ok_with(result + "]");
    }
    timer.expires_at(give_up);
    st->waiters.push_back(&timer);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    std::erase(st->waiters, &timer);
  }
}

/// The buttons of `reply_markup.inline_keyboard` as (text, callback_data), row after row;
/// nullopt when a button is not as Telegram takes it (no text, or callback_data missing,
/// empty or over 64 bytes).
std::optional<std::vector<std::pair<std::string, std::string>>>
inline_buttons(const request_json& req) {
  std::vector<std::pair<std::string, std::string>> out;
  simdjson::dom::array rows;
  if (req.object.at_key("reply_markup").at_key("inline_keyboard").get_array().get(rows) !=
      simdjson::SUCCESS) {
    return out;
  }
  for (auto row : rows) {
    simdjson::dom::array buttons;
    if (row.get_array().get(buttons) != simdjson::SUCCESS) {
      return std::nullopt;
    }
    for (auto button : buttons) {
      std::string_view text;
      std::string_view data;
      if (button.at_key("text").get_string().get(text) != simdjson::SUCCESS || text.empty() ||
          button.at_key("callback_data").get_string().get(data) != simdjson::SUCCESS ||
          data.empty() || data.size() > 64) {
        return std::nullopt;
      }
      out.emplace_back(std::string(text), std::string(data));
    }
  }
  return out;
}

http_response send_message(const request_json& req, const state_ptr& st) {
  const auto chat = req.chat_id();
  if (!chat) {
    return error(400, "Bad Request: chat_id is empty");
  }
  const auto text = req.text("text");
  if (!text) {
    return error(400, "Bad Request: message text is empty");
  }
  const auto mode = req.text("parse_mode").value_or("");
  if (auto problem = text_problem(*text, mode)) {
    return *problem;
  }
  const auto topic = req.integer("message_thread_id");
  if (topic && *topic == 1) {
    return error(400, "Bad Request: message thread not found");
  }
  auto buttons = inline_buttons(req);
  if (!buttons) {
    return error(400, "Bad Request: BUTTON_DATA_INVALID");
  }
  telegram_sent m;
  {
    const std::lock_guard lock(st->mutex);
    auto& next = st->next_message_id.try_emplace(*chat, 100).first->second;
    m = {*chat, topic, next++, *text, mode, 0};
    m.buttons = std::move(*buttons);
    st->sent.push_back(m);
  }
  st->sent_changed.notify_all();
  if (st->hook) {
    st->hook(m.text);
  }
  if (st->sent_hook) {
    st->sent_hook(m);
  }
  return ok_with(message_json(m, false));
}

http_response edit_message_text(const request_json& req, const state_ptr& st) {
  const auto chat = req.chat_id();
  const auto id = req.integer("message_id");
  const auto text = req.text("text");
  if (!chat || !id) {
    return error(400, "Bad Request: message to edit not found");
  }
  if (!text) {
    return error(400, "Bad Request: message text is empty");
  }
  const auto mode = req.text("parse_mode").value_or("");
  if (auto problem = text_problem(*text, mode)) {
    return *problem;
  }
  telegram_sent m;
  {
    const std::lock_guard lock(st->mutex);
    auto it = std::find_if(st->sent.begin(), st->sent.end(), [&](const telegram_sent& s) {
      return s.chat_id == *chat && s.message_id == *id;
    });
    if (it == st->sent.end()) {
      return error(400, "Bad Request: message to edit not found");
    }
    if (it->text == *text && it->parse_mode == mode) {
      return error(400, "Bad Request: message is not modified: specified new message content and "
                        "reply markup are exactly the same as a current content and reply "
                        "markup of the message");
    }
    it->text = *text;
    it->parse_mode = mode;
    ++it->edits;
    m = *it;
  }
  st->sent_changed.notify_all();
  return ok_with(message_json(m, true));
}

http_response set_webhook(const request_json& req, const state_ptr& st) {
  const auto url = req.text("url").value_or("");
  const auto secret = req.text("secret_token").value_or("");
  const bool secret_ok =
      secret.size() <= 256 && std::all_of(secret.begin(), secret.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
      });
  if (!secret_ok) {
    return error(400, "Bad Request: secret token contains unallowed characters");
  }
  if (!url.empty() && !url.starts_with("http://") && !url.starts_with("https://")) {
    return error(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook");
  }
  {
    const std::lock_guard lock(st->mutex);
    st->webhook_url = url;
    st->webhook_secret = secret;
  }
  return ok_with("true", url.empty() ? "Webhook was deleted" : "Webhook was set");
}

http_response delete_webhook(const state_ptr& st) {
  const std::lock_guard lock(st->mutex);
  const bool had = !st->webhook_url.empty();
  st->webhook_url.clear();
  st->webhook_secret.clear();
  return ok_with("true", had ? "Webhook was deleted" : "Webhook is already deleted");
}

http_response delete_message(const request_json& req, const state_ptr& st) {
  const auto chat = req.chat_id();
  const auto id = req.integer("message_id");
  if (!chat) {
    return error(400, "Bad Request: chat_id is empty");
  }
  if (!id) {
    return error(400, "Bad Request: message identifier is not specified");
  }
  const std::lock_guard lock(st->mutex);
  auto it = std::find_if(st->sent.begin(), st->sent.end(), [&](const telegram_sent& m) {
    return m.chat_id == *chat && m.message_id == *id;
  });
  if (it == st->sent.end() || it->deleted) {
    return error(400, "Bad Request: message to delete not found");
  }
  it->deleted = true;
  return ok_with("true");
}

/// The scope key of a (set|delete|get)MyCommands call: its scope's type, "default" without.
std::string commands_scope(const request_json& req) {
  std::string_view type;
  if (req.object.at_pointer("/scope/type").get_string().get(type) == simdjson::SUCCESS) {
    return std::string(type);
  }
  return "default";
}

/// setMyCommands: at most 100 commands, each 1-32 characters of a-z, 0-9 and _, with a
/// description of 1-256 characters, as Telegram checks them.
http_response set_my_commands(const request_json& req, const state_ptr& st) {
  simdjson::dom::array list;
  if (req.object.at_key("commands").get_array().get(list) != simdjson::SUCCESS) {
    return error(400, "Bad Request: parameter \"commands\" is required");
  }
  if (list.size() > 100) {
    return error(400, "Bad Request: too many commands specified");
  }
  for (auto c : list) {
    std::string_view command;
    std::string_view description;
    if (c.at_key("command").get_string().get(command) != simdjson::SUCCESS || command.empty() ||
        command.size() > 32 || !std::all_of(command.begin(), command.end(), [](char ch) {
          return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
        })) {
      return error(400, "Bad Request: BOT_COMMAND_INVALID");
    }
    if (c.at_key("description").get_string().get(description) != simdjson::SUCCESS ||
        description.empty() || utf16_length(description) > 256) {
      return error(400, "Bad Request: command description is empty or too long");
    }
  }
  const std::lock_guard lock(st->mutex);
  st->commands[commands_scope(req)] = simdjson::to_string(list);
  return ok_with("true");
}

asio::awaitable<http_response> answer(const std::string& method, const std::string& body,
                                      state_ptr st) {
  if (auto fault = st->faults.take(method)) {
    co_return fault_answer(*fault);
  }
  const request_json req(body.empty() ? std::string("{}") : body);
  if (!req.ok) {
    co_return error(400, "Bad Request: request body is not a JSON object");
  }
  if (method == "getUpdates") {
    co_return co_await get_updates(req, st);
  }
  if (method == "sendMessage") {
    co_return send_message(req, st);
  }
  if (method == "editMessageText") {
    co_return edit_message_text(req, st);
  }
  if (method == "sendChatAction") {
    if (!req.chat_id()) {
      co_return error(400, "Bad Request: chat_id is empty");
    }
    if (!req.text("action")) {
      co_return error(400, "Bad Request: action is empty");
    }
    co_return ok_with("true");
  }
  if (method == "setWebhook") {
    co_return set_webhook(req, st);
  }
  if (method == "deleteWebhook") {
    co_return delete_webhook(st);
  }
  if (method == "getMe") {
    co_return ok_with(bot_user_json());
  }
  if (method == "answerCallbackQuery") {
    if (!req.text("callback_query_id")) {
      co_return error(400, "Bad Request: query is too old and response timeout expired or "
                           "query ID is invalid");
    }
    co_return ok_with("true");
  }
  if (method == "deleteMessage") {
    co_return delete_message(req, st);
  }
  if (method == "setMyCommands") {
    co_return set_my_commands(req, st);
  }
  if (method == "deleteMyCommands") {
    const std::lock_guard lock(st->mutex);
    st->commands.erase(commands_scope(req));
    co_return ok_with("true");
  }
  if (method == "getMyCommands") {
    const std::lock_guard lock(st->mutex);
    const auto it = st->commands.find(commands_scope(req));
    co_return ok_with(it == st->commands.end() ? "[]" : it->second);
  }
  co_return error(404, "Not Found");
}

asio::awaitable<http_response> handle(request_context& ctx, state_ptr st) {
  const auto bot = std::string(ctx.param("bot"));
  auto method = std::string(ctx.param("method"));
  auto request = ctx.request();
  http_response r;
  if (!bot.starts_with("bot") || bot.substr(3) != st->token) {
    r = error(401, "Unauthorized");
  } else {
    r = co_await answer(method, request.body, st);
  }
  st->log.add({std::move(method), std::move(request.headers), std::move(request.body), r.status,
               r.body, std::chrono::steady_clock::now()});
  co_return r;
}

} // namespace

fake_telegram::fake_telegram(std::string token) : state_(std::make_shared<state>()) {
  state_->token = std::move(token);
  net::router routes;
  auto st = state_;
  routes.add(http_method::post, "/{bot}/{method}",
             [st](request_context& ctx) { return handle(ctx, st); });
  routes.add(http_method::get, "/{bot}/{method}",
             [st](request_context& ctx) { return handle(ctx, st); });
  server_ = std::make_unique<loopback_server>(std::move(routes), "fake-telegram", [st] {
    st->stopping = true;
    st->wake_polls();
  });
  state_->io = &server_->io();
}

fake_telegram::~fake_telegram() {
  server_.reset();
}

std::string fake_telegram::api_base() const {
  return server_->origin();
}
const std::string& fake_telegram::token() const noexcept {
  return state_->token;
}
std::uint16_t fake_telegram::port() const noexcept {
  return server_->port();
}

std::int64_t fake_telegram::push_message(const telegram_incoming& m) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::int64_t message_id = 0;
  {
    const std::lock_guard lock(state_->mutex);
    message_id = state_->next_inbound_message_id++;
  }
  json_writer w;
  w.begin_object().key("message_id").value(message_id);
  if (m.topic) {
    w.key("message_thread_id").value(*m.topic).key("is_topic_message").value(true);
  }
  w.key("from")
      .begin_object()
      .key("id")
      .value(m.from_id)
      .key("is_bot")
      .value(m.from_is_bot)
      .key("first_name")
      .value(m.from_first_name)
      .end_object();
  const auto type = !m.chat_type.empty() ? m.chat_type : m.chat_id > 0 ? "private" : "supergroup";
  w.key("chat").begin_object().key("id").value(m.chat_id).key("type").value(type).end_object();
  w.key("date").value(static_cast<std::int64_t>(now)).key("text").value(m.text);
  return state_->queue("\"message\":" + std::move(w.end_object()).str());
}

std::int64_t fake_telegram::press_button(const telegram_sent& sent, std::string_view callback_data,
                                         std::int64_t from_id) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::int64_t press = 0;
  {
    const std::lock_guard lock(state_->mutex);
    press = state_->next_inbound_message_id++;
  }
  json_writer w;
  // Telegram's callback query ids are opaque strings; the chat_instance names the chat.
  w.begin_object().key("id").value("cbq-" + std::to_string(press));
  w.key("from")
      .begin_object()
      .key("id")
      .value(from_id)
      .key("is_bot")
      .value(false)
      .key("first_name")
      .value("Test")
      .end_object();
  w.key("message").begin_object().key("message_id").value(sent.message_id);
  if (sent.topic) {
    w.key("message_thread_id").value(*sent.topic).key("is_topic_message").value(true);
  }
  w.key("from").raw(bot_user_json());
  const auto type = sent.chat_id > 0 ? "private" : "supergroup";
  w.key("chat").begin_object().key("id").value(sent.chat_id).key("type").value(type).end_object();
  w.key("date").value(static_cast<std::int64_t>(now)).key("text").value(sent.text).end_object();
  w.key("chat_instance").value("ci-" + std::to_string(sent.chat_id));
  w.key("data").value(callback_data);
  return state_->queue("\"callback_query\":" + std::move(w.end_object()).str());
}

std::int64_t fake_telegram::push_update(std::string fields_json) {
  return state_->queue(std::move(fields_json));
}

std::int64_t fake_telegram::repeat_update(std::int64_t update_id) {
  std::string fields;
  {
    const std::lock_guard lock(state_->mutex);
    const auto& body = state_->updates.at(update_id);
    // `{"update_id":N,` … `}` → the fields after the id.
    const auto comma = body.find(',');
    fields = comma == std::string::npos ? "" : body.substr(comma + 1, body.size() - comma - 2);
  }
  return state_->queue(std::move(fields));
}

std::string fake_telegram::update_json(std::int64_t update_id) const {
  const std::lock_guard lock(state_->mutex);
  return state_->updates.at(update_id);
}

void fake_telegram::on_send(std::function<void(std::string_view)> hook) {
  const std::lock_guard lock(state_->mutex);
  state_->hook = std::move(hook);
}

void fake_telegram::on_sent(std::function<void(const telegram_sent&)> hook) {
  const std::lock_guard lock(state_->mutex);
  state_->sent_hook = std::move(hook);
}

void fake_telegram::fail(std::string method, telegram_fault fault, std::size_t times) {
  state_->faults.add(std::move(method), fault, times);
}
void fake_telegram::fail_always(std::string method, telegram_fault fault) {
  fail(std::move(method), fault, fault_plan<telegram_fault>::always);
}
void fake_telegram::clear_faults() {
  state_->faults.clear();
}

std::vector<recorded_call> fake_telegram::calls() const {
  return state_->log.all();
}
std::vector<recorded_call> fake_telegram::calls(std::string_view method) const {
  return state_->log.of(method);
}
bool fake_telegram::wait_for_calls(std::string_view method, std::size_t n,
                                   std::chrono::milliseconds deadline) const {
  return state_->log.wait_for(method, n, deadline);
}

std::vector<telegram_sent> fake_telegram::sent() const {
  const std::lock_guard lock(state_->mutex);
  return state_->sent;
}
std::vector<telegram_sent> fake_telegram::sent_to(std::int64_t chat_id) const {
  const std::lock_guard lock(state_->mutex);
  std::vector<telegram_sent> out;
  std::copy_if(state_->sent.begin(), state_->sent.end(), std::back_inserter(out),
               [&](const telegram_sent& s) { return s.chat_id == chat_id; });
  return out;
}
bool fake_telegram::wait_for_sent(std::size_t n, std::chrono::milliseconds deadline) const {
  std::unique_lock lock(state_->mutex);
  return state_->sent_changed.wait_for(lock, deadline, [&] { return state_->sent.size() >= n; });
}

std::size_t fake_telegram::waiting_polls() const {
  // The waiters belong to the io thread: ask it.
  std::promise<std::size_t> count;
  auto answer = count.get_future();
  asio::post(server_->io(), [&] { count.set_value(state_->waiters.size()); });
  return answer.get();
}

std::int64_t fake_telegram::confirmed_through() const {
  const std::lock_guard lock(state_->mutex);
  return state_->confirmed;
}
std::string fake_telegram::webhook_url() const {
  const std::lock_guard lock(state_->mutex);
  return state_->webhook_url;
}
std::string fake_telegram::webhook_secret() const {
  const std::lock_guard lock(state_->mutex);
  return state_->webhook_secret;
}

expected<net::http_client_response>
fake_telegram::deliver_webhook(std::int64_t update_id, std::chrono::milliseconds deadline) const {
  auto request = webhook_request(update_id, deadline);
  if (!request) {
    return tl::unexpected(request.error());
  }
  return blocking_fetch(std::move(*request));
}

expected<net::http_client_request>
fake_telegram::webhook_request(std::int64_t update_id, std::chrono::milliseconds deadline) const {
  net::http_client_request request;
  request.method = http_method::post;
  {
    const std::lock_guard lock(state_->mutex);
    if (state_->webhook_url.empty()) {
      return troupe::fail(errc::invalid_argument, "fake telegram: no webhook is set");
    }
    request.url = state_->webhook_url;
    request.body = state_->updates.at(update_id);
    request.headers.push_back({"Content-Type", "application/json"});
    if (!state_->webhook_secret.empty()) {
      request.headers.push_back({"X-Telegram-Bot-Api-Secret-Token", state_->webhook_secret});
    }
  }
  request.deadlines.connect = deadline;
  request.deadlines.first_byte = deadline;
  request.deadlines.total = deadline;
  return request;
}

} // namespace troupe::test
