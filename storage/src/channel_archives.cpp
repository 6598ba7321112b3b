#include "troupe/storage/channel_archives.hpp"

#include <simdjson.h>

#include "query.hpp"
#include "troupe/runtime/channel/archive.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

using namespace detail;

namespace {

constexpr std::string_view archive_columns =
    "a.id, a.owner_user_id, a.conversation_id, c.uuid, a.title, a.summary, a.message_count, "
    "a.created_at, a.updated_at";
constexpr std::string_view archive_tables =
    "channel_archives a JOIN conversations c ON c.id = a.conversation_id";

channel_archive_record read_archive(const statement& s) {
  channel_archive_record r;
  r.id = s.int64(0);
  r.owner_user_id = s.int64(1);
  r.conversation_id = s.int64(2);
  r.conversation_uuid = s.text(3);
  r.title = s.text(4);
  r.summary = s.text(5);
  r.message_count = s.int64(6);
  r.created_at = s.int64(7);
  r.updated_at = s.int64(8);
  return r;
}

/// The names of the calls in a stored `tool_calls_json` (an array of {id, name,
/// arguments}); what cannot be read is left out: the summary counts what it can.
std::vector<tool_call> calls_of(const std::string& json) {
  std::vector<tool_call> out;
  if (json.empty()) {
    return out;
  }
  simdjson::dom::parser parser;
  simdjson::dom::array calls;
  if (parser.parse(json).get_array().get(calls) != simdjson::SUCCESS) {
    return out;
  }
  for (auto call : calls) {
    std::string_view name;
    if (call["name"].get_string().get(name) == simdjson::SUCCESS && !name.empty()) {
      tool_call t;
      t.name = std::string(name);
      out.push_back(std::move(t));
    }
  }
  return out;
}

chat_role role_of(std::string_view role) {
  if (role == "assistant") {
    return chat_role::assistant;
  }
  if (role == "system") {
    return chat_role::system;
  }
  if (role == "tool") {
    return chat_role::tool;
  }
  return chat_role::user;
}

} // namespace

expected<channel_archive_record> write_channel_archive(connection& c, row_id conversation_id) {
  auto conversation = find_conversation(c, conversation_id);
  if (!conversation) {
    return tl::unexpected(conversation.error());
  }
  auto rows = list_messages(c, conversation_id, 0);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  std::vector<chat_message> messages;
  messages.reserve(rows->size());
  for (auto& m : *rows) {
    chat_message out;
    out.role = role_of(m.role);
    out.content = std::move(m.content);
    out.tool_calls = calls_of(m.tool_calls_json);
    messages.push_back(std::move(out));
  }
  // The conversation's own title is the channel's ("hooks · t-1"): the archive is named
  // after what the user asked first.
  const auto summary = channel::summarize_archive(messages);
  const auto markdown = channel::render_archive(summary);
  const auto t = now_millis();
  if (auto ok = c.run("INSERT INTO channel_archives (owner_user_id, conversation_id, title, "
                      "summary, message_count, created_at, updated_at) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) "
                      "ON CONFLICT (conversation_id) DO UPDATE SET owner_user_id = ?1, "
                      "title = ?3, summary = ?4, message_count = ?5, updated_at = ?6",
                      conversation->owner_user_id, conversation_id, summary.title, markdown,
                      static_cast<std::int64_t>(rows->size()), t);
      !ok) {
    return tl::unexpected(ok.error());
  }
  return find_channel_archive(c, conversation_id);
}

expected<channel_archive_record> find_channel_archive(connection& c, row_id conversation_id) {
  static const auto sql = select(archive_columns, archive_tables, "WHERE a.conversation_id = ?");
  return query_one<channel_archive_record>(c, "channel archive", sql, read_archive,
                                           conversation_id);
}

expected<std::vector<channel_archive_record>>
list_channel_archives(connection& c, row_id owner_user_id, row_id except, std::int64_t limit) {
  static const auto sql = select(archive_columns, archive_tables,
                                 "WHERE a.owner_user_id = ? AND a.conversation_id != ? "
                                 "ORDER BY a.updated_at DESC, a.id DESC LIMIT ?");
  return query_all<channel_archive_record>(c, sql, read_archive, owner_user_id, except, limit);
}

} // namespace troupe::storage
