// Telegram in webhook mode: troupe registers the channel's route with setWebhook at the fake
// Bot API (fakes/: the one the tests use) when the channel starts, and each update is POSTed
// as Telegram posts it there, with the X-Telegram-Bot-Api-Secret-Token troupe registered;
// replies arrive at the fake through sendMessage. Poll mode (getUpdates) is not driven: its
// messages reach troupe in troupe's own long poll, not in requests the load generator can
// send and time. The channel has `stream_edits` off: one sendMessage per reply (the typing
// indicator, sendChatAction, is not a reply and always on).

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_telegram.hpp"

namespace troupe::bench::detail {

namespace {

constexpr auto token_env = "BENCH_TELEGRAM_BOT_TOKEN";
constexpr auto bot_token = "123456:BENCH-bot-token";
/// Thread `t` is the private chat 100000000 + t with the user of that id.
constexpr std::int64_t first_chat = 100'000'000;

class telegram_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    fake_ = std::make_unique<test::fake_telegram>(bot_token);
    fake_->on_send([&replies](std::string_view text) { replies.take(text); });
    // The troupe started here inherits it (secrets.allowed_env names it).
    ::setenv(token_env, bot_token, 1);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"secrets.allowed_env", fmt::format(R"(["{}"])", token_env)}};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view route) const override {
    return fmt::format(R"({{"name":{},"type":"telegram","agent":{},"mode":"webhook",)"
                       R"("token_env":"{}","api_base":{},"callback_url":{},"stream_edits":false,)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), token_env, json_text(fake_->api_base()),
                       json_text(route));
  }
  expected<void> await_channel(std::chrono::milliseconds limit) const override {
    if (!fake_->wait_for_calls("setWebhook", 1, limit) || fake_->webhook_url().empty()) {
      return fail(errc::timeout,
                  fmt::format("the telegram channel set no webhook at the fake Bot API within "
                              "{} ms",
                              limit.count()));
    }
    return {};
  }
  request_template delivery(const std::string& /*route*/, std::size_t /*i*/, std::size_t thread,
                            const std::string& text) const override {
    test::telegram_incoming m;
    m.chat_id = first_chat + static_cast<std::int64_t>(thread);
    m.from_id = m.chat_id;
    m.from_first_name = "Bench";
    m.text = text;
    // The update as Telegram would hold it (its update_id and message_id), POSTed to the
    // webhook troupe registered (await_channel saw it set).
    auto made = fake_->webhook_request(fake_->push_message(m));
    // webhook_request refuses only when no webhook is set; an empty template would fail as
    // a delivery error, counted in the report.
    return made ? as_template(*made) : request_template{};
  }
  std::string describe() const override {
    return "a telegram channel in webhook mode (updates with the secret token troupe gave "
           "setWebhook, stream_edits off); replies at the fake Bot API (fakes/fake_telegram) "
           "through sendMessage";
  }

private:
  std::unique_ptr<test::fake_telegram> fake_;
};

} // namespace

std::unique_ptr<channel_driver> make_telegram_driver() {
  return std::make_unique<telegram_driver>();
}

} // namespace troupe::bench::detail
