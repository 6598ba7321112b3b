// A conversation's history (issue 16): what the conversation actor keeps between turns —
// trimmed to its limit, each message with the stored rows it stands for, so a later
// compression summary can record the range it covers — and what its next prompt would
// carry (GET …/context): the history and the estimate of every fixed part a run adds
// to it (the system message: the agent's prompt and, once the history holds a
// compression summary, the note that says so; the tool definitions), computed as a run
// computes them.

#include <algorithm>

#include "conversation_state.hpp"
#include "troupe/actors/conversation.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/runtime/prompt/context_blocks.hpp"
#include "troupe/runtime/prompt/token_estimate.hpp"

namespace troupe::actors {

namespace detail {

/// Cuts `history` to `limit` messages, the oldest first; a compression summary and the
/// head before it stay (they stand for everything older). `spans` (parallel) is cut
/// alike.
void trim_history(std::vector<chat_message>& history, std::vector<storage::message_span>& spans,
                  std::size_t limit) {
  spans.resize(history.size());
  if (history.size() <= limit) {
    return;
  }
  auto excess = history.size() - limit;
  std::size_t from = 0;
  const auto summary = std::find_if(history.begin(), history.end(),
                                    [](const chat_message& m) { return prompt::is_summary(m); });
  if (summary != history.end()) {
    from = static_cast<std::size_t>(summary - history.begin()) + 1;
    excess = std::min<std::size_t>(excess, history.size() - from);
  }
  const auto first = static_cast<std::ptrdiff_t>(from);
  const auto last = static_cast<std::ptrdiff_t>(from + excess);
  history.erase(history.begin() + first, history.begin() + last);
  spans.erase(spans.begin() + first, spans.begin() + last);
}

void remember(conversation_self self, chat_message m, storage::message_span span) {
  auto& st = self->state;
  st.history_spans.resize(st.history.size());
  st.history.push_back(std::move(m));
  st.history_spans.push_back(std::move(span));
  trim_history(st.history, st.history_spans, st.spec.history_limit);
}

} // namespace detail

prompt_context_view prompt_context_of(const conversation_spec& spec,
                                      const std::vector<chat_message>& history,
                                      std::string source) {
  prompt_context_view view;
  view.source = std::move(source);
  view.messages = history;
  for (const auto& m : history) {
    view.history_tokens += prompt::estimate_tokens(m);
  }
  prompt::context_blocks blocks;
  (void)blocks.declare(prompt::compression_note_block);
  if (std::any_of(history.begin(), history.end(),
                  [](const chat_message& m) { return prompt::is_summary(m); })) {
    (void)blocks.set(prompt::compression_note_block, std::string(prompt::compression_note()));
  }
  const auto system = prompt::render_system_text(spec.agent.system_prompt, blocks);
  view.system_tokens =
      system.empty() ? 0 : prompt::estimate_tokens(system) + prompt::message_overhead_tokens;
  // The tools a top-level run of this conversation offers.
  run_spec run;
  run.agent = spec.agent;
  run.io = spec.io;
  if (auto tools = offered_tool_definitions(run)) {
    view.tool_tokens = tool_definition_tokens(*tools);
  }
  view.estimated_tokens = view.history_tokens + view.system_tokens + view.tool_tokens;
  if (spec.io.memory && spec.agent.memory && spec.owner_user != 0) {
    view.memory_max_chars = spec.agent.memory_max_chars;
  }
  view.context_window =
      spec.agent.context_window != 0 ? spec.agent.context_window : default_context_window;
  view.compression_trigger_tokens = static_cast<std::size_t>(
      spec.agent.compression.trigger * static_cast<double>(view.context_window));
  return view;
}

} // namespace troupe::actors
