#include "troupe/storage/context_summaries.hpp"

#include <algorithm>
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
    "tokens_before, tokens_after, model, created_at";

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
  return r;
}

/// `messages` grouped into turns: each user message starts one.
std::vector<prompt::stored_turn> turns_of(std::vector<chat_message> messages) {
  std::vector<prompt::stored_turn> out;
  for (auto& m : messages) {
    if (out.empty() || m.role == chat_role::user) {
      out.emplace_back();
    }
    out.back().messages.push_back(std::move(m));
  }
  return out;
}

} // namespace

expected<row_id> insert_context_summary(connection& c, const context_summary_record& r) {
  auto done = c.run("INSERT INTO context_summaries (conversation_id, run_id, summary, "
                    "head_messages, tail_messages, covered_messages, tokens_before, "
                    "tokens_after, model, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    r.conversation_id, r.run_id, r.summary, r.head_messages, r.tail_messages,
                    r.covered_messages, r.tokens_before, r.tokens_after, r.model,
                    r.created_at != 0 ? r.created_at : unix_millis_now());
  if (!done) {
    return tl::unexpected(done.error());
  }
  return c.last_insert_id();
}

write_op insert_context_summary_op(context_summary_record r) {
  return make_write("store context summary",
                    [r = std::move(r)](connection& c) { return insert_context_summary(c, r); });
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

std::vector<chat_message> user_and_answers(std::span<const message_record> rows) {
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
  // With a summary: the kept head and the summary message come first, and the kept tail
  // leads the turns after the summary's run (shaped with them).
  std::vector<chat_message> turns_part;
  if (*summary) {
    const auto& s = **summary;
    const auto first_after = std::find_if(rows->begin(), rows->end(), [&](const message_record& m) {
      return m.run_id && *m.run_id == s.run_id;
    });
    auto before = user_and_answers(std::span(rows->begin(), first_after));
    const auto head = std::min(static_cast<std::size_t>(std::max<std::int64_t>(s.head_messages, 0)),
                               before.size());
    const auto tail = std::min(static_cast<std::size_t>(std::max<std::int64_t>(s.tail_messages, 0)),
                               before.size() - head);
    out.messages.assign(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(head));
    out.messages.push_back(prompt::summary_message(s.summary));
    turns_part.assign(std::make_move_iterator(before.end() - static_cast<std::ptrdiff_t>(tail)),
                      std::make_move_iterator(before.end()));
    auto after = user_and_answers(std::span(first_after, rows->end()));
    turns_part.insert(turns_part.end(), std::make_move_iterator(after.begin()),
                      std::make_move_iterator(after.end()));
    out.summary = std::move(*summary);
  } else {
    turns_part = user_and_answers(*rows);
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
  auto shaped = prompt::shape_loaded_history(turns_of(std::move(turns_part)), budget);
  out.messages.insert(out.messages.end(), std::make_move_iterator(shaped.messages.begin()),
                      std::make_move_iterator(shaped.messages.end()));
  // At most `max_messages`: the oldest turns go first, the head and summary stay.
  if (out.messages.size() > max_messages && out.messages.size() > fixed) {
    const auto extra = std::min(out.messages.size() - max_messages, out.messages.size() - fixed);
    out.messages.erase(out.messages.begin() + static_cast<std::ptrdiff_t>(fixed),
                       out.messages.begin() + static_cast<std::ptrdiff_t>(fixed + extra));
  }
  for (const auto& m : out.messages) {
    out.estimated_tokens += prompt::estimate_tokens(m);
  }
  return out;
}

} // namespace troupe::storage
