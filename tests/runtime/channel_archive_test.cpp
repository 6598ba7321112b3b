#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "chat_messages.hpp"
#include "troupe/runtime/channel/archive.hpp"

using namespace troupe;
using namespace troupe::channel;
namespace msg = troupe::test_messages;

namespace {

chat_message calling(std::vector<std::string> tools, std::string text = {}) {
  chat_message m{chat_role::assistant, std::move(text), {}, {}, {}};
  for (std::size_t i = 0; i < tools.size(); ++i) {
    m.tool_calls.push_back({"call-" + std::to_string(i), tools[i], "{}"});
  }
  return m;
}

} // namespace

TEST_CASE("an archive holds the title, goals, tools with counts and recent decisions",
          "[runtime][channel][archive]") {
  const std::vector<chat_message> history{
      {chat_role::system, "You are helpful.", {}, {}, {}},
      msg::user("Plan a trip to Lisbon\nin March, for two"),
      calling({"web_search", "web_search"}),
      msg::result("call-0", "flights…"),
      msg::assistant("Flights on the 7th are cheapest."),
      msg::user("/status"),
      msg::user("Find a hotel near   Alfama"),
      calling({"web_search", "read"}, "Looking at hotels."),
      msg::assistant("Book the Memmo Alfama."),
      msg::user("Plan a trip to Lisbon"),
  };
  const auto summary = summarize_archive(history);
  CHECK(summary.title == "Plan a trip to Lisbon");
  CHECK(summary.goals ==
        std::vector<std::string>{"Plan a trip to Lisbon", "Find a hotel near Alfama"});
  REQUIRE(summary.tools.size() == 2);
  CHECK(summary.tools[0] == std::pair<std::string, std::size_t>{"web_search", 3});
  CHECK(summary.tools[1] == std::pair<std::string, std::size_t>{"read", 1});
  CHECK(summary.decisions == std::vector<std::string>{"Flights on the 7th are cheapest.",
                                                      "Looking at hotels.",
                                                      "Book the Memmo Alfama."});
  CHECK(render_archive(summary) == "# Plan a trip to Lisbon\n"
                                   "\n## Goals\n"
                                   "- Plan a trip to Lisbon\n"
                                   "- Find a hotel near Alfama\n"
                                   "\n## Tools used\n"
                                   "- web_search \xC3\x97 3\n"
                                   "- read \xC3\x97 1\n"
                                   "\n## Recent decisions\n"
                                   "- Flights on the 7th are cheapest.\n"
                                   "- Looking at hotels.\n"
                                   "- Book the Memmo Alfama.\n");
}

TEST_CASE("an archive keeps at most 12 goals and the last 6 decisions, cut at their limits",
          "[runtime][channel][archive]") {
  std::vector<chat_message> history;
  for (int i = 0; i < 20; ++i) {
    history.push_back(msg::user("goal " + std::to_string(i)));
    history.push_back(
        msg::assistant("decision " + std::to_string(i) + " " + std::string(300, 'z')));
  }
  const auto summary = summarize_archive(history);
  REQUIRE(summary.goals.size() == 12);
  CHECK(summary.goals.front() == "goal 0");
  CHECK(summary.goals.back() == "goal 11");
  REQUIRE(summary.decisions.size() == 6);
  CHECK(summary.decisions.front().starts_with("decision 14 "));
  CHECK(summary.decisions.back().starts_with("decision 19 "));
  CHECK(summary.decisions.back().ends_with("\xE2\x80\xA6"));
  // 240 code points: 239 kept and the ellipsis (three bytes).
  CHECK(summary.decisions.back().size() == 239 + 3);
}

TEST_CASE("an archive's title is the given one when there is one", "[runtime][channel][archive]") {
  const std::vector<chat_message> history{msg::user("hello")};
  CHECK(summarize_archive(history, "  Holiday\nplans ").title == "Holiday plans");
  CHECK(summarize_archive(history).title == "hello");
}

TEST_CASE("an empty conversation's archive says none in every section",
          "[runtime][channel][archive]") {
  const auto summary = summarize_archive({});
  CHECK(summary.title == "Untitled conversation");
  CHECK(render_archive(summary) ==
        "# Untitled conversation\n\n## Goals\n- none\n\n## Tools used\n- none\n"
        "\n## Recent decisions\n- none\n");
}

TEST_CASE("an archive is due at 6 messages and every 4 after", "[runtime][channel][archive]") {
  CHECK_FALSE(archive_due(5, 0));
  CHECK(archive_due(6, 0));
  CHECK_FALSE(archive_due(7, 6));
  CHECK_FALSE(archive_due(9, 6));
  CHECK(archive_due(10, 6));
  CHECK(archive_due(11, 6));
  CHECK_FALSE(archive_due(11, 10));
  CHECK(archive_due(14, 10));
  CHECK(archive_due(30, 0));
}
