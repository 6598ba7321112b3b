#include "troupe/runtime/prompt/compression.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "troupe/runtime/prompt/token_estimate.hpp"

namespace troupe::prompt {

namespace {

/// Bytes of the first `chars` code points of `text` (a stray byte counts as one).
std::size_t prefix_bytes(std::string_view text, std::size_t chars) noexcept {
  std::size_t i = 0;
  std::size_t n = 0;
  // ASCII, eight bytes (characters) at a time.
  while (n + 8 <= chars && i + 8 <= text.size()) {
    std::uint64_t word = 0;
    std::memcpy(&word, text.data() + i, sizeof word);
    if ((word & 0x8080808080808080ULL) != 0) {
      break;
    }
    i += 8;
    n += 8;
  }
  for (; i < text.size() && n < chars; ++n) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t length = c < 0x80           ? 1
                         : (c >> 5) == 0x6  ? 2
                         : (c >> 4) == 0xE  ? 3
                         : (c >> 3) == 0x1E ? 4
                                            : 1;
    if (i + length > text.size()) {
      length = 1;
    }
    i += length;
  }
  return i;
}

/// Code points of `text` (a stray byte counts as one): every byte but a continuation
/// byte (10xxxxxx) starts a character. Eight bytes at a time.
std::size_t char_count(std::string_view text) noexcept {
  constexpr std::uint64_t high_bits = 0x8080808080808080ULL;
  std::size_t n = 0;
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, text.data() + i, sizeof word);
    // A continuation byte has bit 7 set and bit 6 clear (bit 6 shifted onto bit 7).
    const auto continuation = word & ~(word << 1) & high_bits;
    n += continuation == 0 ? 8 : 8 - static_cast<std::size_t>(std::popcount(continuation));
  }
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++n;
    }
  }
  return n;
}

/// What follows the kept text of a pruned tool output (see `cut_text`).
constexpr std::string_view pruned_marker = " …[tool output pruned cut:";

/// `text` cut to `chars` characters, with a marker saying how many more there were.
/// Reads the text past the cut once (to count it); shorter text is returned as it is.
std::string cut_text(std::string_view text, std::size_t chars, std::string_view what) {
  const auto kept = prefix_bytes(text, chars);
  if (kept == text.size()) {
    return std::string(text);
  }
  const auto more = char_count(text.substr(kept));
  auto out = std::string(text.substr(0, kept));
  out += fmt::format(" …[{} cut: {} more characters]", what, more);
  return out;
}

constexpr std::array<std::string_view, 7> sections = {
    "Goal",
    "Constraints And Preferences",
    "Progress",
    "Key Decisions",
    "Relevant Files",
    "Next Steps",
    "Critical Context",
};

constexpr std::string_view summariser_prompt =
    "You compress the earlier part of a conversation between a user and an AI agent, so "
    "that the agent can go on without those messages. Write the summary as these markdown "
    "sections, in this order:\n"
    "## Goal\n"
    "## Constraints And Preferences\n"
    "## Progress\n"
    "### Completed\n"
    "### In Progress\n"
    "### Blocked\n"
    "## Key Decisions\n"
    "## Relevant Files\n"
    "## Next Steps\n"
    "## Critical Context\n"
    "Keep names, numbers, paths, commands, errors and the user's stated preferences exactly "
    "as written. Write \"None\" under a section that has nothing. Answer with the summary "
    "only.";

constexpr std::string_view update_prompt =
    "\n\nThe conversation was summarised before: the previous summary is given in "
    "<previous_summary>. Update that summary with the newer messages in <messages>: keep "
    "what still holds, move finished work to Completed, add new decisions, files and "
    "facts, and drop only what the newer messages make obsolete. Do not summarise the "
    "summary itself; answer with the whole updated summary.";

/// One message as the summariser reads it.
std::string summary_line(const chat_message& m) {
  std::string out;
  switch (m.role) {
    case chat_role::user:
      out = "[user] ";
      break;
    case chat_role::assistant:
      out = "[assistant] ";
      break;
    case chat_role::tool:
      out = fmt::format("[tool result{}{}] ", m.name.empty() ? "" : " of ", m.name);
      break;
    case chat_role::system:
      out = "[system] ";
      break;
  }
  if (m.role == chat_role::tool) {
    out += prune_tool_output(m.content);
  } else {
    out += cut_text(m.content, summary_input_message_chars, "message");
  }
  for (const auto& c : m.tool_calls) {
    out += fmt::format("\n  called {}({})", c.name,
                       cut_text(c.arguments, pruned_tool_output_chars, "arguments"));
  }
  return out;
}

/// Whether message `i` of `history` is an assistant message whose tool calls all have
/// results right after it; `end` gets the index past its group.
bool complete_group(std::span<const chat_message> history, std::size_t i, std::size_t& end) {
  end = i + 1;
  while (end < history.size() && history[end].role == chat_role::tool) {
    ++end;
  }
  for (const auto& c : history[i].tool_calls) {
    bool answered = false;
    for (std::size_t k = i + 1; k < end && !answered; ++k) {
      answered = history[k].tool_call_id == c.id;
    }
    if (!answered) {
      return false;
    }
  }
  return true;
}

} // namespace

compression_plan plan_compression(const compression_input& input) {
  compression_plan plan;
  const auto& history = input.history;
  const auto n = history.size();
  const auto& s = input.settings;
  // Each message is estimated once; the rest of the plan reads these.
  plan.message_tokens.reserve(n);
  std::size_t total = input.fixed_tokens;
  for (const auto& m : history) {
    plan.message_tokens.push_back(estimate_tokens(m));
    total += plan.message_tokens.back();
  }
  plan.estimated_tokens = total;
  plan.pruned_tokens = total;
  plan.trigger_tokens =
      static_cast<std::size_t>(s.trigger * static_cast<double>(input.context_window));

  // Head: widened forward over the tool results of its last group.
  std::size_t head = std::min(s.protect_head, n);
  while (head < n && head > 0 && history[head].role == chat_role::tool) {
    ++head;
  }
  // Tail: widened backward to the start of its first group.
  std::size_t tail = n > s.protect_tail ? n - s.protect_tail : 0;
  while (tail > head && tail < n && history[tail].role == chat_role::tool) {
    --tail;
  }
  tail = std::max(tail, head);
  plan.head_end = head;
  plan.tail_begin = tail;
  // The pinned message (a run's objective) inside the middle stays, after the summary: a
  // long run's own earlier tool rounds are compressed around it.
  if (input.pinned && *input.pinned >= head && *input.pinned < tail) {
    plan.kept = *input.pinned;
  }

  if (n <= s.protect_head + s.protect_tail + s.min_middle) {
    plan.skipped = fmt::format("{} messages: compression needs more than {} (head {} + tail {} "
                               "+ middle {})",
                               n, s.protect_head + s.protect_tail + s.min_middle, s.protect_head,
                               s.protect_tail, s.min_middle);
    return plan;
  }
  if (plan.covered() < s.min_middle) {
    plan.skipped =
        fmt::format("the middle holds {} messages, fewer than {}", plan.covered(), s.min_middle);
    return plan;
  }
  if (!input.force && total < plan.trigger_tokens) {
    plan.skipped =
        fmt::format("the prompt's estimate {} is under the trigger {}", total, plan.trigger_tokens);
    return plan;
  }
  for (std::size_t i = head; i < tail; ++i) {
    const auto& m = history[i];
    if (is_summary(m)) {
      plan.previous_summary = i;
    }
    if (m.role != chat_role::tool) {
      continue;
    }
    const auto kept = prefix_bytes(m.content, pruned_tool_output_chars);
    // Short, or pruned already (by an earlier round): nothing to cut.
    if (kept == m.content.size() ||
        std::string_view(m.content).substr(kept).starts_with(pruned_marker)) {
      continue;
    }
    // The estimate of the pruned message, without copying the message.
    const auto cut = prune_tool_output(m.content);
    plan.pruned_tokens -= plan.message_tokens[i] - estimate_tokens(m, cut);
    plan.prune.push_back(i);
  }
  plan.summarise = input.force || plan.pruned_tokens >= plan.trigger_tokens;
  return plan;
}

std::string prune_tool_output(std::string_view text) {
  return cut_text(text, pruned_tool_output_chars, "tool output pruned");
}

void apply_pruning(std::vector<chat_message>& history, const compression_plan& plan) {
  for (const auto i : plan.prune) {
    if (i < history.size()) {
      history[i].content = prune_tool_output(history[i].content);
    }
  }
}

bool is_summary(const chat_message& message) noexcept {
  return std::string_view(message.content).starts_with(summary_marker);
}

std::string_view summary_text(const chat_message& message) noexcept {
  std::string_view text = message.content;
  if (!text.starts_with(summary_marker)) {
    return text;
  }
  text.remove_prefix(summary_marker.size());
  while (!text.empty() && (text.front() == '\n' || text.front() == ' ')) {
    text.remove_prefix(1);
  }
  return text;
}

chat_message summary_message(std::string_view summary) {
  return chat_message{chat_role::user, fmt::format("{}\n{}", summary_marker, summary), {}, {}, {}};
}

std::string_view compression_note() noexcept {
  return "Earlier turns of this conversation were compressed: the message that starts with "
         "[Context Compression Summary] stands for them. Treat it as an accurate account of "
         "what was said and done before; the newer messages follow it in full.";
}

std::span<const std::string_view> summary_sections() noexcept {
  return sections;
}

completion_request summary_request(std::span<const chat_message> history,
                                   const compression_plan& plan, std::string model,
                                   std::size_t context_window) {
  completion_request request;
  request.model = std::move(model);
  request.stream = false;
  request.temperature = 0.3;
  const auto end = std::min(plan.tail_begin, history.size());
  std::size_t content_tokens = 0;
  const bool estimated = plan.message_tokens.size() == history.size();
  for (std::size_t i = plan.head_end; i < end; ++i) {
    content_tokens += estimated ? plan.message_tokens[i] : estimate_tokens(history[i]);
  }
  const auto wanted = std::clamp<std::size_t>(content_tokens / 5, 2000, 4000);
  const auto max_tokens = std::min(wanted, context_window / 4);
  request.max_tokens = static_cast<std::uint32_t>(max_tokens);

  std::string system(summariser_prompt);
  std::string previous;
  if (plan.previous_summary && *plan.previous_summary < history.size()) {
    system += update_prompt;
    previous = fmt::format("<previous_summary>\n{}\n</previous_summary>\n\n",
                           summary_text(history[*plan.previous_summary]));
  }
  // What the summariser may read: the window less its answer, the instructions, the
  // previous summary and some framing; the newest messages are kept first.
  constexpr std::size_t framing_tokens = 32;
  const auto fixed = estimate_tokens(system) + estimate_tokens(previous) + max_tokens +
                     framing_tokens + 2 * message_overhead_tokens;
  const auto room = context_window > fixed ? context_window - fixed : 0;
  std::vector<std::string> lines;
  std::size_t used = 0;
  std::size_t left_out = 0;
  for (std::size_t i = end; i-- > plan.head_end;) {
    if (plan.previous_summary && i == *plan.previous_summary) {
      continue;
    }
    auto line = summary_line(history[i]);
    if (plan.kept && i == *plan.kept) {
      // The objective stays in the prompt after the summary: the summary need not repeat
      // it, only say what was done for it.
      line.insert(0, "[the current request, kept in full after the summary] ");
    }
    const auto cost = estimate_tokens(line) + 1;
    if (used + cost > room) {
      left_out = i + 1 - plan.head_end;
      break;
    }
    used += cost;
    lines.push_back(std::move(line));
  }
  std::string user = previous;
  user += "<messages>\n";
  if (left_out > 0) {
    user += fmt::format("({} older messages do not fit and are left out)\n", left_out);
  }
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    user += *it;
    user += '\n';
  }
  user += "</messages>";
  request.messages.push_back(chat_message{chat_role::system, std::move(system), {}, {}, {}});
  request.messages.push_back(chat_message{chat_role::user, std::move(user), {}, {}, {}});
  return request;
}

std::vector<chat_message> compressed_history(std::span<const chat_message> history,
                                             const compression_plan& plan,
                                             std::string_view summary) {
  std::vector<chat_message> out;
  const auto head = std::min(plan.head_end, history.size());
  const auto tail = std::min(std::max(plan.tail_begin, head), history.size());
  out.reserve(head + 2 + (history.size() - tail));
  out.insert(out.end(), history.begin(), history.begin() + static_cast<std::ptrdiff_t>(head));
  out.push_back(summary_message(summary));
  if (plan.kept && *plan.kept < history.size()) {
    out.push_back(history[*plan.kept]);
  }
  out.insert(out.end(), history.begin() + static_cast<std::ptrdiff_t>(tail), history.end());
  return out;
}

std::optional<std::size_t> compressed_index(const compression_plan& plan, std::size_t i) {
  if (i < plan.head_end) {
    return i;
  }
  const std::size_t kept = plan.kept ? 1 : 0;
  if (plan.kept && i == *plan.kept) {
    return plan.head_end + 1;
  }
  if (i >= plan.tail_begin) {
    return plan.head_end + 1 + kept + (i - plan.tail_begin);
  }
  return std::nullopt;
}

loaded_history shape_loaded_history(std::span<const stored_turn> turns, std::size_t budget_tokens,
                                    const load_shape& shape) {
  std::vector<std::vector<chat_message>> shaped(turns.size());
  std::vector<std::vector<std::int64_t>> shaped_tags(turns.size());
  std::vector<std::size_t> tokens(turns.size(), 0);
  for (std::size_t t = 0; t < turns.size(); ++t) {
    const auto age = turns.size() - 1 - t;
    const std::span<const chat_message> messages = turns[t].messages;
    const auto tag_of = [&](std::size_t i) -> std::int64_t {
      return i < turns[t].tags.size() ? turns[t].tags[i] : 0;
    };
    auto& out = shaped[t];
    auto& out_tags = shaped_tags[t];
    if (age >= shape.full_turns + shape.truncated_turns) {
      // Older: the question and the final answer only.
      std::optional<std::size_t> question;
      std::optional<std::size_t> answer;
      for (std::size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        if (m.role == chat_role::user && !question) {
          question = i;
        } else if (m.role == chat_role::assistant && m.tool_calls.empty() && !m.content.empty()) {
          answer = i;
        }
      }
      for (const auto& i : {question, answer}) {
        if (i) {
          out.push_back(messages[*i]);
          out_tags.push_back(tag_of(*i));
        }
      }
    } else {
      const bool truncate = age >= shape.full_turns;
      for (std::size_t i = 0; i < messages.size();) {
        const auto& m = messages[i];
        if (m.role == chat_role::tool) {
          ++i; // a result without its call
          continue;
        }
        std::size_t end = i + 1;
        if (!m.tool_calls.empty() && !complete_group(messages, i, end)) {
          i = end;
          continue;
        }
        for (std::size_t k = i; k < end; ++k) {
          auto copy = messages[k];
          if (truncate) {
            copy.content = copy.role == chat_role::tool
                               ? prune_tool_output(copy.content)
                               : cut_text(copy.content, shape.truncated_chars, "message");
          }
          out.push_back(std::move(copy));
          out_tags.push_back(tag_of(k));
        }
        i = end;
      }
    }
    for (const auto& m : out) {
      tokens[t] += estimate_tokens(m);
    }
  }
  std::size_t total = 0;
  for (const auto v : tokens) {
    total += v;
  }
  std::size_t first = 0;
  while (budget_tokens != 0 && total > budget_tokens && first + 1 < turns.size()) {
    total -= tokens[first];
    ++first;
  }
  loaded_history result;
  for (std::size_t t = first; t < turns.size(); ++t) {
    for (std::size_t i = 0; i < shaped[t].size(); ++i) {
      result.messages.push_back(std::move(shaped[t][i]));
      result.rows.push_back(turns[t].row);
      result.tags.push_back(shaped_tags[t][i]);
    }
  }
  return result;
}

} // namespace troupe::prompt
