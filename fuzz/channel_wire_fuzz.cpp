// Fuzzes what a channel reads from a messaging platform and writes to it: the Telegram
// and Slack decoders and answer classes (net/include/troupe/net/channel/), and the reply
// texts (runtime/include/troupe/runtime/channel/text.hpp, commands.hpp). The first byte
// is the split limit (2 to 257); the rest is the platform's bytes, or a reply's text.
//
// Properties checked: no crash, leak or undefined behaviour on any input; every decoding
// failure is a parse_error with a message; a decoded batch's next offset is above every
// update id it holds; a Slack message that is not ignored has a channel and a ts; every
// part of a split fits the limit, is not blank, and is valid UTF-8 when the text is; the
// Telegram HTML of any text has balanced, properly nested tags, and its Slack mrkdwn
// brackets nothing but links; a command picks an index
// only when it is /continue N.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/net/channel/slack_wire.hpp"
#include "troupe/net/channel/telegram_wire.hpp"
#include "troupe/runtime/channel/commands.hpp"
#include "troupe/runtime/channel/text.hpp"

namespace {

namespace tg = troupe::net::telegram;
namespace slack = troupe::net::slack;
namespace channel = troupe::channel;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t n = lead < 0x80    ? 1
                          : lead >= 0xF5 ? 0
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

bool balanced(std::string_view html) {
  std::vector<std::string_view> open;
  for (auto i = html.find('<'); i != std::string_view::npos; i = html.find('<', i + 1)) {
    const auto end = html.find('>', i);
    if (end == std::string_view::npos) {
      return false;
    }
    auto tag = html.substr(i + 1, end - i - 1);
    const bool closing = !tag.empty() && tag.front() == '/';
    if (closing) {
      tag.remove_prefix(1);
    }
    tag = tag.substr(0, tag.find(' '));
    if (!closing) {
      open.push_back(tag);
    } else if (open.empty() || open.back() != tag) {
      return false;
    } else {
      open.pop_back();
    }
  }
  return open.empty();
}

/// True when every `<` of Slack text starts a link `<scheme…|label>`: no mention or
/// broadcast (`<!channel>`, `<@U1>`) can come from the answer's text.
bool only_links_bracketed(std::string_view mrkdwn) {
  for (auto i = mrkdwn.find('<'); i != std::string_view::npos; i = mrkdwn.find('<', i + 1)) {
    const auto rest = mrkdwn.substr(i + 1);
    const bool link = rest.starts_with("http://") || rest.starts_with("https://") ||
                      rest.starts_with("tg://") || rest.starts_with("mailto:");
    const auto end = rest.find('>');
    if (!link || end == std::string_view::npos ||
        rest.substr(0, end).find('|') == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

template <class T> void check_failure(const troupe::expected<T>& result) {
  if (!result) {
    check(result.error().code == troupe::errc::parse_error);
    check(!result.error().message.empty());
  }
}

void check_batch(const troupe::expected<tg::update_batch>& batch) {
  check_failure(batch);
  if (batch) {
    for (const auto& m : batch->messages) {
      check(batch->next_offset > m.update_id);
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::size_t limit = 2 + data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  check_batch(tg::decode_get_updates(bytes));
  check_batch(tg::decode_webhook_update(bytes));
  for (unsigned status : {200u, 400u, 429u, 502u}) {
    const auto a = tg::classify_answer(status, bytes);
    check(a.kind != tg::answer_kind::rate_limited || a.retry_after.has_value());
    const auto s = slack::classify_answer(status, "3", bytes);
    check(s.kind != slack::answer_kind::rate_limited || s.retry_after.has_value());
  }

  const auto envelope = slack::decode_envelope(bytes, "U0BOT");
  check_failure(envelope);
  if (envelope && envelope->message && !envelope->message->ignored) {
    check(!envelope->message->channel.empty() && !envelope->message->ts.empty());
    check(!slack::thread_key(*envelope->message).empty());
  }
  (void)slack::verify_signature("secret", "1700000000", bytes, bytes,
                                std::chrono::system_clock::time_point{});

  const auto parts = channel::split_message(bytes, limit);
  const bool text_valid = valid_utf8(bytes);
  for (const auto& part : parts) {
    check(channel::message_length(part) <= limit);
    check(part.find_first_not_of(" \t\r\n\f\v") != std::string::npos);
    check(!text_valid || valid_utf8(part));
  }
  check(balanced(channel::markdown_to_telegram_html(bytes)));
  check(only_links_bracketed(channel::markdown_to_slack_mrkdwn(bytes)));

  const auto command = channel::parse_command(bytes, "troupe_bot");
  check(command.index == 0 || command.kind == channel::command_kind::continue_pick);
  return 0;
}
