#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "troupe/runtime/channel/text.hpp"

using namespace troupe::channel;

namespace {

/// True when `text` is valid UTF-8 (every sequence whole).
bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t n = lead < 0x80    ? 1
                          : lead >= 0xF0 ? 4
                          : lead >= 0xE0 ? 3
                          : lead >= 0xC2 ? 2
                                         : 0;
    if (n == 0 || i + n > text.size()) {
      return false;
    }
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) {
        return false;
      }
    }
    i += n;
  }
  return true;
}

/// Letters and digits of `text`, in order: what a split must neither lose nor repeat.
std::string content_of(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    for (char c : p) {
      if (c != ' ' && c != '\n' && c != '`') {
        out += c;
      }
    }
  }
  return out;
}

std::string content_of(std::string_view text) {
  return content_of(std::vector<std::string>{std::string(text)});
}

void check_parts(const std::vector<std::string>& parts, std::size_t limit) {
  for (const auto& p : parts) {
    CHECK(!p.empty());
    CHECK(p.find_first_not_of(" \n\t") != std::string::npos);
    CHECK(message_length(p) <= limit);
    CHECK(valid_utf8(p));
  }
}

} // namespace

TEST_CASE("a message within the limit is one part", "[runtime][channel][split]") {
  CHECK(split_message("hello there", 20) == std::vector<std::string>{"hello there"});
  CHECK(split_message("", 20).empty());
  CHECK(split_message(" \n\n \n", 20).empty());
}

TEST_CASE("a long message is split at a paragraph break before a line break",
          "[runtime][channel][split]") {
  const std::string text = "first paragraph\nstill first\n\nsecond paragraph\nline two";
  const auto parts = split_message(text, 40);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0] == "first paragraph\nstill first");
  CHECK(parts[1] == "second paragraph\nline two");
}

TEST_CASE("without a paragraph break a message is split at a line break",
          "[runtime][channel][split]") {
  const auto parts = split_message("alpha beta gamma\ndelta epsilon", 20);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0] == "alpha beta gamma");
  CHECK(parts[1] == "delta epsilon");
}

TEST_CASE("a single long line is split between words", "[runtime][channel][split]") {
  const auto parts = split_message("one two three four five six seven", 10);
  check_parts(parts, 10);
  CHECK(parts == std::vector<std::string>{"one two", "three four", "five six", "seven"});
}

TEST_CASE("a word longer than the limit is cut between code points", "[runtime][channel][split]") {
  // "é" is two bytes, "😀" four bytes and two UTF-16 units.
  std::string word;
  for (int i = 0; i < 30; ++i) {
    word += i % 2 ? "\xC3\xA9" : "\xF0\x9F\x98\x80";
  }
  const auto parts = split_message(word, 7);
  check_parts(parts, 7);
  std::string joined;
  for (const auto& p : parts) {
    joined += p;
  }
  CHECK(joined == word);
}

TEST_CASE("message length counts UTF-16 units as Telegram does", "[runtime][channel][split]") {
  CHECK(message_length("abc") == 3);
  CHECK(message_length("\xC3\xA9t\xC3\xA9") == 3);
  CHECK(message_length("\xF0\x9F\x98\x80") == 2);
  CHECK(telegram_message_limit == 4000);
  CHECK(slack_message_limit == 3500);
}

TEST_CASE("a code block that fits in a part is not split", "[runtime][channel][split]") {
  const std::string block = "```\nline one\n\nline three\n```";
  const std::string text = "intro text here\n\n" + block + "\n\nafter";
  CHECK(split_message(text, 40) ==
        std::vector<std::string>{"intro text here", block + "\n\nafter"});
  const auto parts = split_message(text, 30);
  check_parts(parts, 30);
  REQUIRE(parts.size() == 3);
  CHECK(parts[1] == block);
}

TEST_CASE("a code block longer than a part is closed and reopened in each part",
          "[runtime][channel][split]") {
  std::string text = "```python\n";
  for (int i = 0; i < 40; ++i) {
    text += "print(" + std::to_string(i) + ")\n";
  }
  text += "```\nDone.";
  const auto parts = split_message(text, 100);
  check_parts(parts, 100);
  REQUIRE(parts.size() >= 4);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    CHECK(parts[i].starts_with("```python\n"));
    CHECK(parts[i].ends_with("\n```"));
  }
  CHECK(parts.back().ends_with("Done."));
  CHECK(content_of(parts).find("print(39)") != std::string::npos);
  // Nothing lost or repeated beyond the fence lines added.
  std::string code;
  for (const auto& p : parts) {
    auto body = std::string_view(p);
    if (body.starts_with("```python\n")) {
      body.remove_prefix(10);
    }
    if (auto close = body.find("\n```"); close != std::string_view::npos) {
      body = body.substr(0, close);
    }
    code += std::string(body) + "\n";
  }
  for (int i = 0; i < 40; ++i) {
    const auto line = "print(" + std::to_string(i) + ")\n";
    CHECK(code.find(line) == code.rfind(line));
    CHECK(code.find(line) != std::string::npos);
  }
}

TEST_CASE("splitting keeps every word of a long mixed text once and in order",
          "[runtime][channel][split]") {
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += "w" + std::to_string(i) + (i % 7 == 6 ? "\n" : " ") + (i % 23 == 22 ? "\n" : "");
    if (i % 50 == 49) {
      text += "```\ncode" + std::to_string(i) + "\n```\n";
    }
  }
  for (std::size_t limit : {std::size_t{25}, std::size_t{64}, std::size_t{500}}) {
    const auto parts = split_message(text, limit);
    check_parts(parts, limit);
    CHECK(content_of(parts) == content_of(text));
  }
}

TEST_CASE("a tiny limit still makes progress and loses nothing", "[runtime][channel][split]") {
  const std::string text = "```\nabc def\n```";
  const auto parts = split_message(text, 3);
  check_parts(parts, 3);
  CHECK(content_of(parts) == content_of(text));
  CHECK(!split_message("x", 0).empty());
}

TEST_CASE("a 100,000-character answer splits into Telegram-sized parts",
          "[runtime][channel][split]") {
  std::string text;
  while (text.size() < 100'000) {
    text += "A sentence of an answer that goes on. ";
    if (text.size() % 7 == 0) {
      text += "\n\n";
    }
  }
  const auto parts = split_message(text, telegram_message_limit);
  check_parts(parts, telegram_message_limit);
  CHECK(parts.size() >= 25);
  CHECK(parts.size() <= 27);
}

TEST_CASE("markdown emphasis, code and links become Telegram HTML", "[runtime][channel][html]") {
  CHECK(markdown_to_telegram_html("**bold** and *it* and __b2__ and _i2_") ==
        "<b>bold</b> and <i>it</i> and <b>b2</b> and <i>i2</i>");
  CHECK(markdown_to_telegram_html("~~gone~~ `a < b`") == "<s>gone</s> <code>a &lt; b</code>");
  CHECK(markdown_to_telegram_html("see [the *docs*](https://x.io/a?b=1&c=2) now") ==
        "see <a href=\"https://x.io/a?b=1&amp;c=2\">the <i>docs</i></a> now");
  CHECK(markdown_to_telegram_html("***both***") == "<b><i>both</i></b>");
  CHECK(markdown_to_telegram_html("*a **b** c*") == "<i>a <b>b</b> c</i>");
}

TEST_CASE("markdown headings become bold lines", "[runtime][channel][html]") {
  CHECK(markdown_to_telegram_html("# Title\ntext") == "<b>Title</b>\ntext");
  CHECK(markdown_to_telegram_html("#hashtag") == "#hashtag");
}

TEST_CASE("fenced code becomes pre with its language", "[runtime][channel][html]") {
  CHECK(markdown_to_telegram_html("before\n```python\nif a < b:\n    x = 1 & 2\n```\nafter") ==
        "before\n<pre><code class=\"language-python\">if a &lt; b:\n    x = 1 &amp; 2</code>"
        "</pre>\nafter");
  CHECK(markdown_to_telegram_html("```\n**not bold**\n```") == "<pre>**not bold**</pre>");
}

TEST_CASE("an unclosed fence runs to the end and is closed", "[runtime][channel][html]") {
  CHECK(markdown_to_telegram_html("```sh\necho hi\n") ==
        "<pre><code class=\"language-sh\">echo hi\n</code></pre>");
}

TEST_CASE("html special characters in text are escaped", "[runtime][channel][html]") {
  CHECK(markdown_to_telegram_html("<script> & \"quotes\"") == "&lt;script&gt; &amp; \"quotes\"");
  CHECK(escape_telegram_html("a<b>&") == "a&lt;b&gt;&amp;");
}

TEST_CASE("markers without a partner stay literal", "[runtime][channel][html]") {
  CHECK(markdown_to_telegram_html("2 * 3 = 6 and **unclosed") == "2 * 3 = 6 and **unclosed");
  CHECK(markdown_to_telegram_html("snake_case_name and file_name.py") ==
        "snake_case_name and file_name.py");
  CHECK(markdown_to_telegram_html("`unclosed code") == "`unclosed code");
  CHECK(markdown_to_telegram_html("[x](javascript:alert(1))") == "[x](javascript:alert(1))");
  CHECK(markdown_to_telegram_html("\\*not italic\\*") == "*not italic*");
  CHECK(markdown_to_telegram_html("* list item\n* other") == "* list item\n* other");
}

namespace {

/// True when the tags of `html` are balanced and properly nested.
bool balanced(std::string_view html) {
  std::vector<std::string> open;
  for (auto i = html.find('<'); i != std::string_view::npos; i = html.find('<', i + 1)) {
    const auto end = html.find('>', i);
    if (end == std::string_view::npos) {
      return false;
    }
    auto tag = html.substr(i + 1, end - i - 1);
    const bool closing = tag.starts_with('/');
    if (closing) {
      tag.remove_prefix(1);
    }
    tag = tag.substr(0, tag.find(' '));
    if (!closing) {
      open.emplace_back(tag);
    } else if (open.empty() || open.back() != tag) {
      return false;
    } else {
      open.pop_back();
    }
  }
  return open.empty();
}

} // namespace

TEST_CASE("converted markdown never has unbalanced tags", "[runtime][channel][html]") {
  const std::vector<std::string> inputs{"**a *b** c*",
                                        "*a **b* c**",
                                        "__a_ b__ _c",
                                        "[**x](http://a.b) y**",
                                        "~~a **b~~ c**",
                                        "```\n<b>\n",
                                        "`a **b` c**",
                                        "***",
                                        "*_*_*_*_**__~~`",
                                        "[a](http://x)[b]",
                                        "_a *b_ c* [d](e)",
                                        "# **h",
                                        "**" + std::string(50, '*') + "x",
                                        "a**b**c__d__e",
                                        "[[x](http://y)](http://z)"};
  for (const auto& in : inputs) {
    INFO(in);
    CHECK(balanced(markdown_to_telegram_html(in)));
  }
}

TEST_CASE("a long line of unmatched markers converts in linear time", "[runtime][channel][html]") {
  std::string text;
  for (int i = 0; i < 20'000; ++i) {
    text += "*a _b ~~c ";
  }
  const auto html = markdown_to_telegram_html(text);
  CHECK(html.size() >= text.size());
  CHECK(balanced(html));
}

TEST_CASE("random texts split into fitting parts that keep every character and convert to "
          "balanced html",
          "[runtime][channel][split][html]") {
  const std::vector<std::string> pieces{"word",    "x",        " ",
                                        "\n",      "\n\n",     "```\n",
                                        "```js\n", "\xC3\xA9", "\xF0\x9F\x98\x80",
                                        "**",      "_",        "*",
                                        "~~y",     "`c`",      "[a](https://b.c)",
                                        "<&>",     "   "};
  std::uint64_t state = 17;
  const auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const auto length = next() % 120;
    for (std::uint64_t i = 0; i < length; ++i) {
      text += pieces[next() % pieces.size()];
    }
    const auto limit = 2 + next() % 60;
    INFO("limit " << limit << " text: " << text);
    const auto parts = split_message(text, limit);
    check_parts(parts, limit);
    // A code block cut in two gains its fence lines (```, info string "js") again.
    const auto without_fences = [](std::string t) {
      std::erase_if(t, [](char c) { return c == 'j' || c == 's'; });
      return t;
    };
    CHECK(without_fences(content_of(parts)) == without_fences(content_of(text)));
    CHECK(balanced(markdown_to_telegram_html(text)));
  }
}

TEST_CASE("single_line joins lines and collapses white space", "[runtime][channel]") {
  CHECK(single_line("  a\n\tb   c \r\n") == "a b c");
  CHECK(single_line(" \n ").empty());
}

TEST_CASE("markdown becomes Slack mrkdwn with &, < and > escaped", "[runtime][channel][slack]") {
  CHECK(markdown_to_slack_mrkdwn("**bold**, *it*, ~~gone~~ and `a<b`") ==
        "*bold*, _it_, ~gone~ and `a&lt;b`");
  CHECK(markdown_to_slack_mrkdwn("# Plan\nsee [the docs](https://x.io/?a=1&b=2)") ==
        "*Plan*\nsee <https://x.io/?a=1&amp;b=2|the docs>");
  CHECK(markdown_to_slack_mrkdwn("```python\nif a < b:\n    pass\n```\ndone") ==
        "```\nif a &lt; b:\n    pass\n```\ndone");
  // Text that Slack would read as a mention or a broadcast stays text.
  CHECK(markdown_to_slack_mrkdwn("ping <!channel> and <@U123> & co") ==
        "ping &lt;!channel&gt; and &lt;@U123&gt; &amp; co");
  CHECK(markdown_to_slack_mrkdwn("[a|b](https://x.io)") == "<https://x.io|a/b>");
  CHECK(markdown_to_slack_mrkdwn("snake_case_name 2 * 3") == "snake_case_name 2 * 3");
}
