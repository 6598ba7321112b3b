#include "troupe/runtime/channel/commands.hpp"

#include <array>
#include <charconv>

#include <fmt/format.h>

#include "harness/text.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/harness/evidence_ledger.hpp"

namespace troupe::channel {

namespace {

/// Longest title a listing line shows, in code points.
constexpr std::size_t listed_title_runes = 60;

struct command_word {
  std::string_view word;
  command_kind kind;
};

constexpr std::array command_words{
    command_word{"new", command_kind::new_conversation},
    command_word{"reset", command_kind::new_conversation},
    command_word{"continue", command_kind::continue_list},
    command_word{"archives", command_kind::archives},
    command_word{"stop", command_kind::stop},
    command_word{"status", command_kind::status},
    command_word{"help", command_kind::help},
    command_word{"compact", command_kind::compact},
    command_word{"approve", command_kind::approve},
    command_word{"deny", command_kind::deny},
};

bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

char lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowered(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    c = lower(c);
  }
  return out;
}

/// A positive decimal number that fills `text`, or 0.
std::size_t positive_number(std::string_view text) noexcept {
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return 0;
  }
  return n;
}

/// `title` on one line, cut at the listing's width.
std::string one_line_title(std::string_view title) {
  const auto flat = single_line(title);
  if (flat.empty()) {
    return "Untitled";
  }
  return harness::summarize(flat, listed_title_runes);
}

} // namespace

std::string_view to_string(command_kind k) noexcept {
  switch (k) {
    case command_kind::none:
      return "none";
    case command_kind::new_conversation:
      return "new_conversation";
    case command_kind::continue_list:
      return "continue_list";
    case command_kind::continue_pick:
      return "continue_pick";
    case command_kind::archives:
      return "archives";
    case command_kind::stop:
      return "stop";
    case command_kind::status:
      return "status";
    case command_kind::help:
      return "help";
    case command_kind::compact:
      return "compact";
    case command_kind::approve:
      return "approve";
    case command_kind::deny:
      return "deny";
  }
  return "none";
}

command parse_command(std::string_view text, std::string_view bot_name) {
  command out;
  text = harness::detail::trim(text);
  if (text.size() < 2 || text.front() != '/') {
    return out;
  }
  std::size_t end = 1;
  while (end < text.size() && !is_space(text[end])) {
    ++end;
  }
  auto word = text.substr(1, end - 1);
  std::string_view addressee;
  if (const auto at = word.find('@'); at != std::string_view::npos) {
    addressee = word.substr(at + 1);
    word = word.substr(0, at);
  }
  const auto name = lowered(word);
  const auto argument = harness::detail::trim(text.substr(end));
  for (const auto& known : command_words) {
    if (known.word != name) {
      continue;
    }
    if (!addressee.empty() && !bot_name.empty() && lowered(addressee) != lowered(bot_name)) {
      return out;
    }
    out.kind = known.kind;
    out.name = name;
    out.addressee = std::string(addressee);
    out.argument = std::string(argument);
    if (out.kind == command_kind::continue_list && !argument.empty()) {
      out.kind = command_kind::continue_pick;
      out.index = positive_number(argument);
    }
    return out;
  }
  return out;
}

std::string format_archive_list(std::span<const archive_entry> entries) {
  if (entries.empty()) {
    return "No archived conversations yet. /new archives the current one and starts afresh.";
  }
  std::string out;
  const auto listed = std::min(entries.size(), max_listed_archives);
  for (std::size_t i = 0; i < listed; ++i) {
    using namespace std::chrono;
    const auto at = floor<minutes>(entries[i].updated_at);
    const auto day = floor<days>(at);
    const year_month_day date{day};
    const hh_mm_ss clock{at - day};
    fmt::format_to(std::back_inserter(out), "{}. {} \xE2\x80\x94 {:02}-{:02} {:02}:{:02}\n", i + 1,
                   one_line_title(entries[i].title), static_cast<unsigned>(date.month()),
                   static_cast<unsigned>(date.day()), clock.hours().count(),
                   clock.minutes().count());
  }
  out += listed == 1 ? "Resume it with /continue 1."
                     : fmt::format("Resume one with /continue N (1 to {}).", listed);
  return out;
}

std::string continue_out_of_range(std::string_view argument, std::size_t listed) {
  const auto shown = harness::summarize(harness::detail::trim(argument), 20);
  if (listed == 0) {
    return fmt::format("There is no archive {}: there are no archived conversations yet.", shown);
  }
  if (listed == 1) {
    return fmt::format("There is no archive {}: the only one is 1. /continue lists it.", shown);
  }
  return fmt::format("There is no archive {}: pick a number from 1 to {}. /continue lists them.",
                     shown, listed);
}

std::string_view help_text() noexcept {
  return "Commands:\n"
         "/new or /reset \xE2\x80\x94 archive this conversation and start a fresh one\n"
         "/continue \xE2\x80\x94 list archived conversations\n"
         "/continue N \xE2\x80\x94 resume archived conversation N\n"
         "/archives \xE2\x80\x94 list archived conversations\n"
         "/stop \xE2\x80\x94 cancel the answer in progress\n"
         "/status \xE2\x80\x94 what this conversation is doing\n"
         "/compact \xE2\x80\x94 summarise the conversation so far to free context\n"
         "/approve ID \xE2\x80\x94 let the agent run the tool call that waits for you\n"
         "/deny ID \xE2\x80\x94 refuse that tool call\n"
         "/help \xE2\x80\x94 this list\n"
         "Anything else goes to the agent.";
}

std::string_view new_conversation_text() noexcept {
  return "Started a new conversation. The previous one is archived: /continue lists it.";
}

std::string resumed_text(std::string_view title) {
  return fmt::format("Resumed \xE2\x80\x9C{}\xE2\x80\x9D. Carry on where you left off.",
                     one_line_title(title));
}

std::string approval_request_text(std::string_view id, std::string_view tool,
                                  std::string_view arguments, std::string_view reason,
                                  std::int64_t timeout_s) {
  const auto shown = harness::summarize(single_line(arguments), 300);
  std::string out = fmt::format("Approval needed: the agent wants to run {} with {}.", tool, shown);
  if (!reason.empty()) {
    out += fmt::format("\nWhy it asks: {}.", single_line(reason));
  }
  out += fmt::format("\nReply /approve {} to let it run, or /deny {} to refuse", id, id);
  if (timeout_s > 0) {
    out += fmt::format(" (without an answer within {} s it is refused)", timeout_s);
  }
  out += ".";
  return out;
}

std::string approval_answer_text(approval_answer answer, std::string_view id, std::string_view tool,
                                 std::string_view status) {
  const auto shown = harness::summarize(single_line(id), 40);
  switch (answer) {
    case approval_answer::approved:
      return fmt::format("Approved: {} runs now.", tool);
    case approval_answer::denied:
      return fmt::format("Denied: {} will not run.", tool);
    case approval_answer::unknown:
      return shown.empty() ? std::string("Name the approval: /approve ID or /deny ID, with the ID "
                                         "its request gave.")
                           : fmt::format("No approval {} waits for you here.", shown);
    case approval_answer::decided:
      return fmt::format("Approval {} was decided already ({}).", shown, status);
  }
  return {};
}

} // namespace troupe::channel
