#include "troupe/actors/stored_journal.hpp"

#include <algorithm>
#include <utility>

#include "troupe/actors/run_journal.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors {

namespace {

constexpr std::string_view replay_marker = R"("replayed_from":"database")";

/// `data` (a JSON object) with the replay marker as its last member.
std::string marked(std::string_view data) {
  std::string out(data);
  if (out.size() < 2 || out.back() != '}') {
    return out;
  }
  const bool empty = out.find_first_not_of(" \t\r\n", 1) == out.size() - 1;
  out.insert(out.size() - 1,
             (empty ? std::string() : std::string(",")) + std::string(replay_marker));
  return out;
}

/// The run's final answer: its last assistant message without tool calls.
std::string final_answer(storage::connection& c, const storage::run_record& row) {
  std::string content;
  auto messages = storage::list_messages(c, row.conversation_id);
  if (messages) {
    for (const auto& m : *messages) {
      if (m.run_id && *m.run_id == row.id && m.role == "assistant" && m.tool_calls_json.empty()) {
        content = m.content;
      }
    }
  }
  return content;
}

std::string done_data(storage::connection& c, const storage::run_record& row,
                      const std::string& conversation_id) {
  json_writer w;
  w.begin_object().key("run_id").value(row.uuid);
  w.key("conversation_id").value(conversation_id);
  w.key("status").value(storage::to_string(row.status));
  w.key("content").value(final_answer(c, row));
  if (!row.error.empty()) {
    w.key("error").value(row.error);
  }
  w.key("replayed_from").value("database").end_object();
  return std::move(w).str();
}

/// What the rows keep of a run whose entries were never stored: status, steps, answer.
std::vector<std::pair<std::string, std::string>> rows_replay(storage::connection& c,
                                                             const storage::run_record& row,
                                                             const std::string& conversation_id) {
  std::vector<std::pair<std::string, std::string>> entries;
  {
    json_writer w;
    w.begin_object().key("run_id").value(row.uuid).key("type").value("run.status");
    w.key("status").value(storage::to_string(row.status)).end_object();
    entries.emplace_back("run", std::move(w).str());
  }
  if (auto steps = storage::list_steps(c, row.id)) {
    for (const auto& s : *steps) {
      json_writer w;
      w.begin_object().key("run_id").value(row.uuid).key("seq").value(s.seq);
      w.key("kind").value(s.kind).key("name").value(s.name).key("status").value(s.status);
      w.end_object();
      entries.emplace_back(s.kind == "harness" ? "harness" : "step", std::move(w).str());
    }
  }
  entries.emplace_back("done", done_data(c, row, conversation_id));
  entries.emplace_back("", "[DONE]");
  return entries;
}

std::string error_data(const storage::run_record& row) {
  json_writer w;
  w.begin_object().key("run_id").value(row.uuid);
  w.key("status").value(storage::to_string(row.status));
  w.key("message").value(row.error.empty()
                             ? std::string("the run's last events were not stored (the process "
                                           "stopped before they were)")
                             : row.error);
  w.end_object();
  return std::move(w).str();
}

} // namespace

expected<std::vector<journal_entry>>
stored_journal(storage::connection& c, const std::string& run_uuid, std::uint64_t after_seq) {
  auto row = storage::find_run_by_uuid(c, run_uuid);
  if (!row) {
    return tl::unexpected(row.error());
  }
  std::string conversation_id;
  if (auto conversation = storage::find_conversation(c, row->conversation_id)) {
    conversation_id = conversation->uuid;
  }
  auto stored = storage::list_run_events(c, row->id, 0);
  if (!stored) {
    return tl::unexpected(stored.error());
  }
  std::vector<journal_entry> out;
  if (stored->empty()) {
    // Numbered after the client's id: whatever it saw, it gets the end and no id twice.
    const auto entries = rows_replay(c, *row, conversation_id);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      out.push_back(make_journal_entry(after_seq + i + 1, entries[i].first, entries[i].second,
                                       i + 1 == entries.size()));
    }
    return out;
  }
  const auto& last = stored->back();
  const bool complete = last.event.empty() && last.data == "[DONE]";
  for (const auto& e : *stored) {
    const auto seq = static_cast<std::uint64_t>(e.seq);
    if (seq <= after_seq) {
      continue;
    }
    const bool is_last = complete && &e == &last;
    out.push_back(e.event == "done" ? make_journal_entry(seq, e.event, marked(e.data), is_last)
                                    : make_journal_entry(seq, e.event, e.data, is_last));
  }
  if (complete) {
    if (out.empty()) {
      // Nothing after the client's id: the end, with nothing to send.
      journal_entry end;
      end.seq = after_seq;
      end.last = true;
      out.push_back(std::move(end));
    }
    return out;
  }
  // The end never reached the database: it comes from the run row, numbered after every
  // id the client or the database has seen.
  auto next = std::max(static_cast<std::uint64_t>(last.seq), after_seq) + 1;
  if (row->status != storage::run_status::succeeded) {
    out.push_back(make_journal_entry(next++, "error", error_data(*row)));
  }
  out.push_back(make_journal_entry(next++, "done", done_data(c, *row, conversation_id)));
  out.push_back(make_journal_entry(next, "", "[DONE]", true));
  return out;
}

} // namespace troupe::actors
