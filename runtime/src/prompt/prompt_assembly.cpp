#include "troupe/runtime/prompt/prompt_assembly.hpp"

#include "troupe/runtime/prompt/token_estimate.hpp"

namespace troupe::prompt {

std::vector<history_group> group_history(std::span<const chat_message> history) {
  std::vector<history_group> groups;
  for (std::size_t i = 0; i < history.size(); ++i) {
    const auto tokens = estimate_tokens(history[i]);
    if (history[i].role == chat_role::tool && !groups.empty()) {
      ++groups.back().count;
      groups.back().tokens += tokens;
      continue;
    }
    groups.push_back({i, 1, tokens});
  }
  return groups;
}

assembled_prompt assemble_prompt(const prompt_input& input) {
  assembled_prompt out;
  out.budget_tokens = input.budget.limit();

  static const context_blocks no_blocks;
  auto system = render_system_text(input.system_prompt, input.blocks ? *input.blocks : no_blocks);
  std::size_t total = 0;
  if (!system.empty()) {
    out.messages.push_back(chat_message{chat_role::system, std::move(system), {}, {}, {}});
    total += estimate_tokens(out.messages.back());
  }

  // The pinned message's index; history.size() for none.
  const std::size_t none = input.history.size();
  std::size_t pinned = input.pinned.value_or(none);
  if (pinned >= none) {
    pinned = none;
    for (std::size_t i = none; i-- > 0;) {
      if (input.history[i].role == chat_role::user) {
        pinned = i;
        break;
      }
    }
  }

  const auto groups = group_history(input.history);
  for (const auto& g : groups) {
    total += g.tokens;
  }
  const auto is_pinned = [&](const history_group& g) {
    return pinned >= g.first && pinned < g.first + g.count;
  };
  std::vector<bool> dropped(groups.size(), false);
  const auto drop = [&](std::size_t k) {
    dropped[k] = true;
    total -= groups[k].tokens;
    out.dropped_tokens += groups[k].tokens;
    out.dropped_messages += groups[k].count;
    ++out.dropped_groups;
  };
  // The earlier history: the groups before the pinned one (all of them without one).
  std::size_t earlier_end = groups.size();
  for (std::size_t k = 0; k < groups.size(); ++k) {
    if (is_pinned(groups[k])) {
      earlier_end = k;
      break;
    }
  }
  std::size_t earlier = 0;
  for (std::size_t k = 0; k < earlier_end; ++k) {
    earlier += groups[k].tokens;
  }
  const auto cap = input.budget.history_max_tokens;
  for (std::size_t k = 0; k < earlier_end && cap != 0 && earlier > cap; ++k) {
    earlier -= groups[k].tokens;
    drop(k);
  }
  for (std::size_t k = 0; k < groups.size() && total > out.budget_tokens; ++k) {
    if (!is_pinned(groups[k]) && !dropped[k]) {
      if (k < earlier_end) {
        earlier -= groups[k].tokens;
      }
      drop(k);
    }
  }
  if (out.dropped_groups > 0) {
    // A cut history starts with a user message: an assistant answer (or tool round)
    // whose question was dropped would open the conversation mid-turn.
    for (std::size_t k = 0; k < groups.size(); ++k) {
      if (dropped[k]) {
        continue;
      }
      if (is_pinned(groups[k]) || input.history[groups[k].first].role == chat_role::user) {
        break;
      }
      if (k < earlier_end) {
        earlier -= groups[k].tokens;
      }
      drop(k);
    }
  }

  for (std::size_t k = 0; k < groups.size(); ++k) {
    if (dropped[k]) {
      continue;
    }
    for (std::size_t i = groups[k].first; i < groups[k].first + groups[k].count; ++i) {
      out.messages.push_back(input.history[i]);
    }
  }
  out.estimated_tokens = total;
  out.earlier_tokens = earlier;
  return out;
}

} // namespace troupe::prompt
