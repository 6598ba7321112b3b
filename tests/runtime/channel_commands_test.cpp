#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include "troupe/runtime/channel/commands.hpp"

using namespace troupe::channel;
using namespace std::chrono;

namespace {

archive_entry entry(std::string title, int month, int day, int hour, int minute) {
  const sys_days date = year{2026} / month / day;
  return {std::move(title), date + hours(hour) + minutes(minute) + seconds(42)};
}

} // namespace

TEST_CASE("every slash command is recognised with its kind", "[runtime][channel]") {
  CHECK(parse_command("/new").kind == command_kind::new_conversation);
  CHECK(parse_command("/reset").kind == command_kind::new_conversation);
  CHECK(parse_command("/continue").kind == command_kind::continue_list);
  CHECK(parse_command("/archives").kind == command_kind::archives);
  CHECK(parse_command("/stop").kind == command_kind::stop);
  CHECK(parse_command("/status").kind == command_kind::status);
  CHECK(parse_command("/help").kind == command_kind::help);
  CHECK(parse_command("/compact").kind == command_kind::compact);
  CHECK(parse_command("/reset").name == "reset");
}

TEST_CASE("/continue with a number picks that archive", "[runtime][channel]") {
  const auto c = parse_command("  /continue   3 \n");
  CHECK(c.kind == command_kind::continue_pick);
  CHECK(c.index == 3);
  CHECK(c.argument == "3");
}

TEST_CASE("/continue with something that is not a positive number picks index 0",
          "[runtime][channel]") {
  for (const auto* text : {"/continue 0", "/continue -2", "/continue two", "/continue 3.5",
                           "/continue 99999999999999999999999"}) {
    const auto c = parse_command(text);
    CHECK(c.kind == command_kind::continue_pick);
    CHECK(c.index == 0);
  }
}

TEST_CASE("an unknown slash word and ordinary text go to the model", "[runtime][channel]") {
  CHECK(parse_command("/weather in Paris").kind == command_kind::none);
  CHECK(parse_command("/newer").kind == command_kind::none);
  CHECK(parse_command("please /new").kind == command_kind::none);
  CHECK(parse_command("/").kind == command_kind::none);
  CHECK(parse_command("").kind == command_kind::none);
  CHECK(parse_command("hello").name.empty());
}

TEST_CASE("a Telegram group command addressed to the bot is accepted", "[runtime][channel]") {
  const auto c = parse_command("/continue@Troupe_Bot 2", "troupe_bot");
  CHECK(c.kind == command_kind::continue_pick);
  CHECK(c.index == 2);
  CHECK(c.addressee == "Troupe_Bot");
  CHECK(parse_command("/help@any_bot").kind == command_kind::help);
}

TEST_CASE("a Telegram group command addressed to another bot is not ours", "[runtime][channel]") {
  CHECK(parse_command("/new@other_bot", "troupe_bot").kind == command_kind::none);
}

TEST_CASE("command words are matched without regard to case", "[runtime][channel]") {
  CHECK(parse_command("/NEW").kind == command_kind::new_conversation);
  CHECK(parse_command("/Help").name == "help");
}

TEST_CASE("the archive listing shows number, title and UTC date and time", "[runtime][channel]") {
  const std::vector<archive_entry> entries{entry("Trip to Lisbon", 3, 7, 9, 5),
                                           entry("Tax\nreturn  2025", 12, 31, 23, 59)};
  CHECK(format_archive_list(entries) == "1. Trip to Lisbon \xE2\x80\x94 03-07 09:05\n"
                                        "2. Tax return 2025 \xE2\x80\x94 12-31 23:59\n"
                                        "Resume one with /continue N (1 to 2).");
}

TEST_CASE("the archive listing stops at ten entries", "[runtime][channel]") {
  std::vector<archive_entry> entries;
  for (int i = 0; i < 14; ++i) {
    entries.push_back(entry("chat " + std::to_string(i), 1, 1 + i, 0, 0));
  }
  const auto text = format_archive_list(entries);
  CHECK(text.find("10. chat 9 \xE2\x80\x94 01-10 00:00\n") != std::string::npos);
  CHECK(text.find("11.") == std::string::npos);
  CHECK(text.ends_with("(1 to 10)."));
}

TEST_CASE("the archive listing names untitled archives and cuts long titles",
          "[runtime][channel]") {
  const std::vector<archive_entry> entries{entry("  ", 5, 1, 12, 0),
                                           entry(std::string(100, 'x'), 5, 2, 12, 0)};
  const auto text = format_archive_list(entries);
  CHECK(text.starts_with("1. Untitled \xE2\x80\x94 05-01 12:00\n"));
  CHECK(text.find("2. " + std::string(59, 'x') + "\xE2\x80\xA6 \xE2\x80\x94 05-02") !=
        std::string::npos);
}

TEST_CASE("an empty archive listing says there is none", "[runtime][channel]") {
  CHECK(format_archive_list({}).starts_with("No archived conversations yet."));
}

TEST_CASE("/continue N out of range says which numbers exist", "[runtime][channel]") {
  CHECK(continue_out_of_range("7", 3) ==
        "There is no archive 7: pick a number from 1 to 3. /continue lists them.");
  CHECK(continue_out_of_range("two", 1) ==
        "There is no archive two: the only one is 1. /continue lists it.");
  CHECK(continue_out_of_range("1", 0) ==
        "There is no archive 1: there are no archived conversations yet.");
}

TEST_CASE("the help text lists every command", "[runtime][channel]") {
  const auto help = help_text();
  for (const auto* word : {"/new", "/reset", "/continue", "/continue N", "/archives", "/stop",
                           "/status", "/compact", "/help", "/approve ID", "/deny ID"}) {
    CHECK(help.find(word) != std::string_view::npos);
  }
  CHECK(to_string(command_kind::continue_pick) == "continue_pick");
  CHECK(resumed_text("Trip") ==
        "Resumed \xE2\x80\x9CTrip\xE2\x80\x9D. Carry on where you left off.");
}

TEST_CASE("/approve and /deny name the approval they decide", "[runtime][channel][approval]") {
  const auto approve = parse_command("/approve 5f0c-aa  ");
  CHECK(approve.kind == command_kind::approve);
  CHECK(approve.argument == "5f0c-aa");
  const auto deny = parse_command("/Deny@troupe_bot 5f0c-aa", "troupe_bot");
  CHECK(deny.kind == command_kind::deny);
  CHECK(deny.argument == "5f0c-aa");
  CHECK(parse_command("/deny@other_bot 5f0c-aa", "troupe_bot").kind == command_kind::none);
  CHECK(parse_command("/approve").argument.empty());
  CHECK(parse_command("/approved 1").kind == command_kind::none);
  CHECK(to_string(command_kind::approve) == "approve");
  CHECK(to_string(command_kind::deny) == "deny");
}

TEST_CASE("an approval request names the tool, its arguments, the reason and both answers",
          "[runtime][channel][approval]") {
  const auto text = approval_request_text("id-1", "notify", "{\"who\":\n\"team\"}",
                                          "every call needs approval", 600);
  CHECK(text ==
        "Approval needed: the agent wants to run notify with {\"who\": \"team\"}.\n"
        "Why it asks: every call needs approval.\n"
        "Reply /approve id-1 to let it run, or /deny id-1 to refuse (without an answer within "
        "600 s it is refused).");
  const std::string long_arguments(1000, 'x');
  CHECK(approval_request_text("i", "t", long_arguments, "", 0).size() < 500);
  CHECK(approval_answer_text(approval_answer::approved, "i", "notify") ==
        "Approved: notify runs now.");
  CHECK(approval_answer_text(approval_answer::denied, "i", "notify") ==
        "Denied: notify will not run.");
  CHECK(approval_answer_text(approval_answer::unknown, "abc") ==
        "No approval abc waits for you here.");
  CHECK_THAT(approval_answer_text(approval_answer::unknown, ""), Catch::Contains("/approve ID"));
  CHECK(approval_answer_text(approval_answer::decided, "abc", "notify", "expired") ==
        "Approval abc was decided already (expired).");
}
