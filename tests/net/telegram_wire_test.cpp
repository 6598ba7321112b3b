#include <catch2/catch.hpp>

#include <string>

#include <simdjson.h>

#include "troupe/net/channel/telegram_wire.hpp"

using namespace troupe;
using namespace troupe::net::telegram;

namespace {

/// A getUpdates answer as Telegram sends it: a private text message, an edit, a photo
/// without text, a forum topic message in a supergroup and a callback query.
constexpr std::string_view updates_answer = R"({"ok":true,"result":[
  {"update_id":861000001,"message":{"message_id":17,"from":{"id":4211,"is_bot":false,
   "first_name":"Ada","last_name":"Lovelace","username":"ada","language_code":"en"},
   "chat":{"id":4211,"first_name":"Ada","type":"private"},"date":1764680000,"text":"hello bot"}},
  {"update_id":861000002,"edited_message":{"message_id":17,"from":{"id":4211,"is_bot":false,
   "first_name":"Ada"},"chat":{"id":4211,"type":"private"},"date":1764680000,
   "edit_date":1764680009,"text":"hello bot!"}},
  {"update_id":861000003,"message":{"message_id":18,"from":{"id":4211,"is_bot":false,
   "first_name":"Ada"},"chat":{"id":4211,"type":"private"},"date":1764680010,
   "photo":[{"file_id":"x","file_unique_id":"y","width":90,"height":90}]}},
  {"update_id":861000004,"message":{"message_id":5501,"message_thread_id":5490,
   "is_topic_message":true,"from":{"id":99,"is_bot":false,"username":"grace"},
   "chat":{"id":-1001234567890123,"title":"Team","is_forum":true,"type":"supergroup"},
   "date":1764680020,"text":"/status@troupe_bot"}},
  {"update_id":861000005,"callback_query":{"id":"42","from":{"id":4211,"is_bot":false,
   "first_name":"Ada"},"chat_instance":"1","data":"x"}}
]})";

} // namespace

TEST_CASE("a getUpdates answer decodes into its text messages", "[net][telegram]") {
  const auto batch = decode_get_updates(updates_answer);
  REQUIRE(batch);
  REQUIRE(batch->messages.size() == 2);
  CHECK(batch->skipped == 3);
  CHECK(batch->next_offset == 861000006);

  const auto& dm = batch->messages[0];
  CHECK(dm.update_id == 861000001);
  CHECK(dm.chat_id == 4211);
  CHECK(dm.chat_type == "private");
  CHECK_FALSE(dm.topic.has_value());
  CHECK(dm.message_id == 17);
  CHECK(dm.from_id == 4211);
  CHECK(dm.from_name == "Ada Lovelace");
  CHECK(dm.from_username == "ada");
  CHECK_FALSE(dm.from_is_bot);
  CHECK(dm.text == "hello bot");
  CHECK(dm.date == 1764680000);
  CHECK(thread_key(dm) == "4211");

  const auto& topic = batch->messages[1];
  CHECK(topic.chat_id == -1001234567890123);
  CHECK(topic.topic == 5490);
  CHECK(topic.from_name == "grace");
  CHECK(thread_key(topic) == "-1001234567890123:5490");
  CHECK(message_key(dm) == "4211:17");
  CHECK(message_key(topic) == "-1001234567890123:5501");
}

TEST_CASE("an empty getUpdates answer has no offset", "[net][telegram]") {
  const auto batch = decode_get_updates(R"({"ok":true,"result":[]})");
  REQUIRE(batch);
  CHECK(batch->messages.empty());
  CHECK(batch->next_offset == 0);
}

TEST_CASE("malformed getUpdates answers are errors that say what is wrong", "[net][telegram]") {
  const auto fails_with = [](std::string_view body, std::string_view words) {
    const auto batch = decode_get_updates(body);
    REQUIRE_FALSE(batch);
    CHECK(batch.error().code == errc::parse_error);
    INFO(batch.error().message);
    CHECK(batch.error().message.find(words) != std::string::npos);
  };
  fails_with("", "not valid JSON");
  fails_with(R"({"ok":true,"result":[{"update_id":1,)", "not valid JSON");
  fails_with("[1,2]", "not a JSON object");
  fails_with(R"({"ok":true,"result":{}})", "no result array");
  fails_with(R"({"ok":true,"result":[3]})", "not an object");
  fails_with(R"({"ok":true,"result":[{"update_id":"7"}]})", "no integer update_id");
  fails_with(R"({"ok":false,"error_code":409,"description":"Conflict"})", "is not ok");
}

TEST_CASE("a message with a wrongly typed field is skipped, not misread", "[net][telegram]") {
  const auto batch = decode_get_updates(
      R"({"ok":true,"result":[{"update_id":9,"message":{"message_id":"1","chat":{"id":1},"text":"x"}},
         {"update_id":10,"message":{"message_id":2,"chat":{"id":1},"text":7}}]})");
  REQUIRE(batch);
  CHECK(batch->messages.empty());
  CHECK(batch->skipped == 2);
  CHECK(batch->next_offset == 11);
}

TEST_CASE("a webhook update decodes like one getUpdates entry", "[net][telegram]") {
  const auto batch = decode_webhook_update(
      R"({"update_id":5,"message":{"message_id":3,"from":{"id":8,"is_bot":true,"first_name":"Other"},
         "chat":{"id":-42,"type":"group"},"date":1,"text":"ping"}})");
  REQUIRE(batch);
  REQUIRE(batch->messages.size() == 1);
  CHECK(batch->messages[0].from_is_bot);
  CHECK(batch->messages[0].chat_type == "group");
  CHECK(batch->next_offset == 6);
  CHECK_FALSE(decode_webhook_update("{\"update_id\":5"));
  const auto edit =
      decode_webhook_update(R"({"update_id":6,"edited_message":{"message_id":3,"text":"x"}})");
  REQUIRE(edit);
  CHECK(edit->messages.empty());
  CHECK(edit->skipped == 1);
}

namespace {

simdjson::dom::element parsed(simdjson::dom::parser& parser, const std::string& json) {
  simdjson::dom::element e;
  REQUIRE(parser.parse(json).get(e) == simdjson::SUCCESS);
  return e;
}

} // namespace

TEST_CASE("sendMessage bodies carry chat, topic, text and parse mode", "[net][telegram]") {
  simdjson::dom::parser parser;
  const auto body = encode_send_message({-1001, 77, "a <b>\"x\"</b>", true, 12, true});
  const auto e = parsed(parser, body);
  CHECK(int64_t(e["chat_id"]) == -1001);
  CHECK(int64_t(e["message_thread_id"]) == 77);
  CHECK(std::string_view(e["text"]) == "a <b>\"x\"</b>");
  CHECK(std::string_view(e["parse_mode"]) == "HTML");
  CHECK(int64_t(e["reply_parameters"]["message_id"]) == 12);
  CHECK(bool(e["link_preview_options"]["is_disabled"]));

  const auto plain = encode_send_message({5, general_topic, "hi", false, {}, false});
  CHECK(plain == R"({"chat_id":5,"text":"hi"})");
}

TEST_CASE("a press of an inline button decodes as its sender's message with the button's data",
          "[net][telegram]") {
  // A callback query on a message troupe sent in a forum topic; and one whose message is
  // too old for Telegram to include (no chat to answer in): skipped.
  const auto batch = decode_get_updates(R"({"ok":true,"result":[
    {"update_id":7001,"callback_query":{"id":"4382bfdwdsb323b2d9","from":{"id":4211,
     "is_bot":false,"first_name":"Ada"},"message":{"message_id":120,"message_thread_id":5490,
     "is_topic_message":true,"from":{"id":1,"is_bot":true,"first_name":"troupe"},
     "chat":{"id":-1001234,"type":"supergroup"},"date":1764680000,"text":"Approval needed"},
     "chat_instance":"-88","data":"/approve 5d1f"}},
    {"update_id":7002,"callback_query":{"id":"99","from":{"id":4211,"is_bot":false,
     "first_name":"Ada"},"chat_instance":"-88","data":"/deny 5d1f"}}
  ]})");
  REQUIRE(batch);
  REQUIRE(batch->messages.size() == 1);
  CHECK(batch->skipped == 1);
  CHECK(batch->next_offset == 7003);
  const auto& press = batch->messages[0];
  CHECK(press.callback_query_id == "4382bfdwdsb323b2d9");
  CHECK(press.text == "/approve 5d1f");
  CHECK(press.from_id == 4211);
  CHECK(press.chat_id == -1001234);
  CHECK(press.topic == 5490);
  CHECK(press.message_id == 120);
  CHECK(thread_key(press) == "-1001234:5490");
  // Every press is its own message (two presses share the message with the buttons).
  CHECK(message_key(press) == "callback:4382bfdwdsb323b2d9");
}

TEST_CASE("sendMessage carries inline buttons, and answerCallbackQuery its query",
          "[net][telegram]") {
  send_message m;
  m.chat_id = 5;
  m.text = "Approval needed";
  m.html = false;
  m.buttons = {{"Approve", "/approve 5d1f"}, {"Deny", "/deny 5d1f"}};
  CHECK(encode_send_message(m) ==
        R"({"chat_id":5,"text":"Approval needed","reply_markup":{"inline_keyboard":[[)"
        R"({"text":"Approve","callback_data":"/approve 5d1f"},)"
        R"({"text":"Deny","callback_data":"/deny 5d1f"}]]}})");
  CHECK(encode_answer_callback_query("42") == R"({"callback_query_id":"42"})");
  CHECK(encode_answer_callback_query("42", "Done") ==
        R"({"callback_query_id":"42","text":"Done"})");
}

TEST_CASE("sendChatAction keeps the General topic that sendMessage omits", "[net][telegram]") {
  CHECK(encode_send_chat_action(5, general_topic) ==
        R"({"chat_id":5,"message_thread_id":1,"action":"typing"})");
  CHECK(encode_send_chat_action(5, std::nullopt) == R"({"chat_id":5,"action":"typing"})");
}

TEST_CASE("editMessageText, setWebhook and getUpdates bodies", "[net][telegram]") {
  CHECK(encode_edit_message_text(5, 9, "more") ==
        R"({"chat_id":5,"message_id":9,"text":"more","parse_mode":"HTML"})");
  CHECK(encode_set_webhook({"https://x.example/hook", "s3cr3t_-", 40, {"message"}, true}) ==
        R"({"url":"https://x.example/hook","secret_token":"s3cr3t_-","max_connections":40,)"
        R"("allowed_updates":["message"],"drop_pending_updates":true})");
  CHECK(encode_get_updates(0, std::chrono::seconds(30)) ==
        R"({"timeout":30,"limit":100,"allowed_updates":["message","callback_query"]})");
  CHECK(encode_get_updates(861000006, std::chrono::seconds(0), 500) ==
        R"({"offset":861000006,"timeout":0,"limit":100,)"
        R"("allowed_updates":["message","callback_query"]})");
  CHECK(method_url("https://api.telegram.org/", "123:ABC", "getUpdates") ==
        "https://api.telegram.org/bot123:ABC/getUpdates");
}

TEST_CASE("Bot API answers are classified", "[net][telegram]") {
  const auto sent = classify_answer(
      200, R"({"ok":true,"result":{"message_id":31,"chat":{"id":5,"type":"private"},"text":"x"}})");
  CHECK(sent.ok());
  CHECK(sent.message_id == 31);

  const auto limited = classify_answer(
      429, R"({"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7",)"
           R"("parameters":{"retry_after":7}})");
  CHECK(limited.kind == answer_kind::rate_limited);
  CHECK(limited.retry_after == std::chrono::seconds(7));
  CHECK(limited.retryable());

  const auto entities = classify_answer(
      400, R"({"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: )"
           R"(Unsupported start tag \"foo\" at byte offset 3"})");
  CHECK(entities.kind == answer_kind::parse_entities);
  CHECK_FALSE(entities.retryable());

  CHECK(classify_answer(400, R"({"ok":false,"error_code":400,"description":"Bad Request: message )"
                             R"(is not modified: specified new message content is the same"})")
            .kind == answer_kind::not_modified);
  const auto migrated = classify_answer(
      400, R"({"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded",)"
           R"("parameters":{"migrate_to_chat_id":-1009}})");
  CHECK(migrated.kind == answer_kind::migrated);
  CHECK(migrated.migrate_to_chat_id == -1009);
  CHECK(classify_answer(409, R"({"ok":false,"error_code":409,"description":"Conflict: can't use )"
                             R"(getUpdates method while webhook is active"})")
            .kind == answer_kind::conflict);
  CHECK(
      classify_answer(401, R"({"ok":false,"error_code":401,"description":"Unauthorized"})").kind ==
      answer_kind::unauthorized);
  const auto blocked = classify_answer(
      403,
      R"({"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"})");
  CHECK(blocked.kind == answer_kind::permanent);
  CHECK(blocked.description == "Forbidden: bot was blocked by the user");
  CHECK(classify_answer(502, "<html>Bad Gateway</html>").kind == answer_kind::server_error);
  CHECK(classify_answer(500, R"({"ok":false,"error_code":500,"description":"Internal"})").kind ==
        answer_kind::server_error);
  const auto cut = classify_answer(200, R"({"ok":tr)");
  CHECK(cut.kind == answer_kind::malformed);
  CHECK(cut.retryable());
  CHECK(to_string(answer_kind::parse_entities) == "parse_entities");
}

TEST_CASE("webhook secret tokens are checked for shape and compared exactly", "[net][telegram]") {
  CHECK(valid_secret_token("abc_DEF-123"));
  CHECK_FALSE(valid_secret_token(""));
  CHECK_FALSE(valid_secret_token("has space"));
  CHECK_FALSE(valid_secret_token(std::string(257, 'a')));
  CHECK(valid_secret_token(std::string(256, 'a')));
  CHECK(verify_secret_token("abc_DEF-123", "abc_DEF-123"));
  CHECK_FALSE(verify_secret_token("abc_DEF-124", "abc_DEF-123"));
  CHECK_FALSE(verify_secret_token("abc_DEF-12", "abc_DEF-123"));
  CHECK_FALSE(verify_secret_token("", ""));
}
