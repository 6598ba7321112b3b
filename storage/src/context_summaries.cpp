#include "troupe/storage/context_summaries.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/runtime/prompt/token_estimate.hpp"
#include "troupe/runtime/run_event.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

namespace {

constexpr std::string_view summary_columns =
    "id, conversation_id, run_id, summary, head_messages, tail_messages, covered_messages, "
    "tokens_before, tokens_after, model, created_at, first_message_id, last_message_id, "
    "kept_message_ids";

/// "3,17" from {3, 17}.
std::string id_list(const std::vector<row_id>& ids) {
  std::string out;
  for (const auto id : ids) {
    out += out.empty() ? "" : ",";
    out += std::to_string(id);
  }
  return out;
}

std::vector<row_id> parse_id_list(std::string_view text) {
  std::vector<row_id> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = text.substr(0, comma);
    row_id v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec == std::errc{} && ptr == item.data() + item.size() && v > 0) {
      out.push_back(v);
    }
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return out;
}

context_summary_record read_summary(const statement& s) {
  context_summary_record r;
  r.id = s.int64(0);
  r.conversation_id = s.int64(1);
  r.run_id = s.int64(2);
  r.summary = s.text(3);
  r.head_messages = s.int64(4);
  r.tail_messages = s.int64(5);
  r.covered_messages = s.int64(6);
  r.tokens_before = s.int64(7);
  r.tokens_after = s.int64(8);
  r.model = s.text(9);
  r.created_at = s.int64(10);
  r.first_message_id = s.int64(11);
  r.last_message_id = s.int64(12);
  r.kept_message_ids = parse_id_list(s.text(13));
  return r;
}

/// `messages` grouped into turns: each user message starts one; `ids` (parallel to
/// `messages`) tag each message with its row.
std::vector<prompt::stored_turn> turns_of(std::vector<chat_message> messages,
                                          const std::vector<row_id>& ids) {
  std::vector<prompt::stored_turn> out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    auto& m = messages[i];
    if (out.empty() || m.role == chat_role::user) {
      out.emplace_back();
    }
    out.back().messages.push_back(std::move(m));
    out.back().tags.push_back(i < ids.size() ? ids[i] : 0);
  }
  return out;
}

} // namespace

expected<row_id> insert_context_summary(connection& c, const context_summary_record& r) {
  auto done = c.run(
      "INSERT INTO context_summaries (conversation_id, run_id, summary, head_messages, "
      "tail_messages, covered_messages, tokens_before, tokens_after, model, created_at, "
      "first_message_id, last_message_id, kept_message_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, ?, ?, ?)",
      r.conversation_id, r.run_id, r.summary, r.head_messages, r.tail_messages, r.covered_messages,
      r.tokens_before, r.tokens_after, r.model,
      r.created_at != 0 ? r.created_at : unix_millis_now(), r.first_message_id, r.last_message_id,
      id_list(r.kept_message_ids));
  if (!done) {
    return tl::unexpected(done.error());
  }
  return c.last_insert_id();
}

write_op insert_context_summary_op(context_summary_record r) {
  return make_write("store context summary",
                    [r = std::move(r)](connection& c) { return insert_context_summary(c, r); });
}

write_op insert_context_summary_op(context_summary_record r, std::vector<message_span> covered,
                                   std::vector<message_span> uncovered, message_span summary_span) {
  return make_write(
      "store context summary",
      [r = std::move(r), covered = std::move(covered), uncovered = std::move(uncovered),
       summary_span = std::move(summary_span)](connection& c) -> expected<std::int64_t> {
        // On the writer's thread, after the writes that filled the spans.
        auto record = r;
        row_id first = 0;
        row_id last = 0;
        for (const auto& span : covered) {
          if (!span || span->first == 0) {
            continue;
          }
          first = first == 0 ? span->first : std::min(first, span->first);
          last = std::max(last, std::max(span->last, span->first));
        }
        record.first_message_id = first;
        record.last_message_id = last;
        record.kept_message_ids.clear();
        for (const auto& span : uncovered) {
          if (span && span->first != 0 && span->first == span->last && span->first > first &&
              span->first < last) {
            record.kept_message_ids.push_back(span->first);
          }
        }
        std::sort(record.kept_message_ids.begin(), record.kept_message_ids.end());
        if (summary_span) {
          *summary_span = stored_span{first, last};
        }
        return insert_context_summary(c, record);
      });
}

expected<std::optional<context_summary_record>> latest_context_summary(connection& c,
                                                                       row_id conversation_id) {
  static const auto sql = fmt::format("SELECT {} FROM context_summaries WHERE conversation_id = ? "
                                      "ORDER BY id DESC LIMIT 1",
                                      summary_columns);
  auto st = c.prepare(sql);
  if (!st) {
    return tl::unexpected(st.error());
  }
  if (auto b = st->bind_all(conversation_id); !b) {
    return tl::unexpected(b.error());
  }
  auto row = st->step();
  if (!row) {
    return tl::unexpected(row.error());
  }
  if (!*row) {
    return std::optional<context_summary_record>{};
  }
  return std::optional<context_summary_record>{read_summary(*st)};
}

std::vector<chat_message> user_and_answers(std::span<const message_record> rows,
                                           std::vector<row_id>* ids) {
  std::vector<chat_message> out;
  bool after_compact = false;
  for (const auto& m : rows) {
    // Tool rounds stay out of later prompts: their call/result pairs belong to their run.
    if (!m.tool_calls_json.empty() || m.content.empty()) {
      continue;
    }
    // `/compact` and its answer were about the prompt, not part of the conversation.
    if (m.role == "user" && m.content == "/compact") {
      after_compact = true;
      continue;
    }
    if (std::exchange(after_compact, false) && m.role == "assistant") {
      continue;
    }
    if (m.role == "user") {
      out.push_back(chat_message{chat_role::user, m.content, {}, {}, {}});
    } else if (m.role == "assistant") {
      out.push_back(chat_message{chat_role::assistant, m.content, {}, {}, {}});
    } else {
      continue;
    }
    if (ids) {
      ids->push_back(m.id);
    }
  }
  return out;
}

expected<prompt_history> load_prompt_history(connection& c, row_id conversation_id,
                                             std::size_t max_messages, std::size_t budget_tokens,
                                             std::span<const row_id> excluded_runs) {
  auto summary = latest_context_summary(c, conversation_id);
  if (!summary) {
    return tl::unexpected(summary.error());
  }
  // Without a summary the newest messages are enough (a turn is a few of them); with
  // one, the history before its run is needed for the kept head and tail.
  const auto limit = *summary ? 0 : static_cast<std::int64_t>(max_messages * 4 + 8);
  auto rows = list_messages(c, conversation_id, limit);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  std::erase_if(*rows, [&](const message_record& m) {
    return m.run_id &&
           std::find(excluded_runs.begin(), excluded_runs.end(), *m.run_id) != excluded_runs.end();
  });
  prompt_history out;
  const auto add_fixed = [&out](chat_message m, stored_span span) {
    out.messages.push_back(std::move(m));
    out.spans.push_back(span);
  };
  // With a summary: the kept head and the summary message come first, and what follows
  // the summary leads the turns after it (shaped with them).
  std::vector<chat_message> turns_part;
  std::vector<row_id> turns_ids;
  if (*summary && (*summary)->first_message_id != 0) {
    // By the stored range: before it, in it (covered unless kept), after it.
    const auto& s = **summary;
    std::vector<message_record> before;
    std::vector<message_record> after;
    for (auto& m : *rows) {
      if (m.id < s.first_message_id) {
        before.push_back(std::move(m));
      } else if (m.id > s.last_message_id ||
                 std::binary_search(s.kept_message_ids.begin(), s.kept_message_ids.end(), m.id)) {
        after.push_back(std::move(m));
      }
    }
    std::vector<row_id> before_ids;
    auto head = user_and_answers(before, &before_ids);
    const auto keep =
        std::min(static_cast<std::size_t>(std::max<std::int64_t>(s.head_messages, 0)), head.size());
    for (auto i = head.size() - keep; i < head.size(); ++i) {
      add_fixed(std::move(head[i]), stored_span{before_ids[i], before_ids[i]});
    }
    add_fixed(prompt::summary_message(s.summary),
              stored_span{s.first_message_id, s.last_message_id});
    turns_part = user_and_answers(after, &turns_ids);
    out.summary = std::move(*summary);
  } else if (*summary) {
    // A summary stored before its range was: by its head and tail counts.
    const auto& s = **summary;
    const auto first_after = std::find_if(rows->begin(), rows->end(), [&](const message_record& m) {
      return m.run_id && *m.run_id == s.run_id;
    });
    std::vector<row_id> before_ids;
    auto before = user_and_answers(std::span(rows->begin(), first_after), &before_ids);
    const auto head = std::min(static_cast<std::size_t>(std::max<std::int64_t>(s.head_messages, 0)),
                               before.size());
    const auto tail = std::min(static_cast<std::size_t>(std::max<std::int64_t>(s.tail_messages, 0)),
                               before.size() - head);
    for (std::size_t i = 0; i < head; ++i) {
      add_fixed(std::move(before[i]), stored_span{before_ids[i], before_ids[i]});
    }
    const auto covered_from = head < before_ids.size() ? before_ids[head] : 0;
    const auto covered_to =
        before.size() - tail > head ? before_ids[before.size() - tail - 1] : covered_from;
    add_fixed(prompt::summary_message(s.summary), stored_span{covered_from, covered_to});
    for (auto i = before.size() - tail; i < before.size(); ++i) {
      turns_part.push_back(std::move(before[i]));
      turns_ids.push_back(before_ids[i]);
    }
    std::vector<row_id> after_ids;
    auto after = user_and_answers(std::span(first_after, rows->end()), &after_ids);
    turns_part.insert(turns_part.end(), std::make_move_iterator(after.begin()),
                      std::make_move_iterator(after.end()));
    turns_ids.insert(turns_ids.end(), after_ids.begin(), after_ids.end());
    out.summary = std::move(*summary);
  } else {
    turns_part = user_and_answers(*rows, &turns_ids);
  }
  const auto fixed = out.messages.size();
  std::size_t fixed_tokens = 0;
  for (const auto& m : out.messages) {
    fixed_tokens += prompt::estimate_tokens(m);
  }
  // The budget left by the head and the summary (at least one token: 0 means none).
  const auto budget =
      budget_tokens == 0
          ? 0
          : std::max<std::size_t>(budget_tokens - std::min(budget_tokens, fixed_tokens), 1);
  auto shaped = prompt::shape_loaded_history(turns_of(std::move(turns_part), turns_ids), budget);
  for (std::size_t i = 0; i < shaped.messages.size(); ++i) {
    add_fixed(std::move(shaped.messages[i]), stored_span{shaped.tags[i], shaped.tags[i]});
  }
  // At most `max_messages`: the oldest turns go first, the head and summary stay.
  if (out.messages.size() > max_messages && out.messages.size() > fixed) {
    const auto extra = std::min(out.messages.size() - max_messages, out.messages.size() - fixed);
    out.messages.erase(out.messages.begin() + static_cast<std::ptrdiff_t>(fixed),
                       out.messages.begin() + static_cast<std::ptrdiff_t>(fixed + extra));
    out.spans.erase(out.spans.begin() + static_cast<std::ptrdiff_t>(fixed),
                    out.spans.begin() + static_cast<std::ptrdiff_t>(fixed + extra));
  }
  for (const auto& m : out.messages) {
    out.estimated_tokens += prompt::estimate_tokens(m);
  }
  return out;
}

} // namespace troupe::storage
