// Slack: Events API deliveries (event_callback with a `message` event) POSTed as Slack
// posts them to the app's Request URL, the channel's route, signed with the v0 signature
// (X-Slack-Signature over the timestamp and body under the signing secret); replies arrive
// at the fake Web API (fakes/: the one the tests use) through chat.postMessage with the bot
// token, in the message's thread. The channel has `stream_edits` off: one post per reply.

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_slack.hpp"

namespace troupe::bench::detail {

namespace {

constexpr auto bot_token_env = "BENCH_SLACK_BOT_TOKEN";
constexpr auto signing_env = "BENCH_SLACK_SIGNING_SECRET";
constexpr auto bot_token = "xoxb-bench-bot-token";
constexpr auto signing_secret = "bench-slack-signing-secret";
constexpr auto slack_channel = "C0BENCH";

class slack_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    fake_ = std::make_unique<test::fake_slack>(bot_token, "U0BENCHBOT");
    fake_->on_send([&replies](std::string_view text) { replies.take(text); });
    // The troupe started here inherits them (secrets.allowed_env names them).
    ::setenv(bot_token_env, bot_token, 1);
    ::setenv(signing_env, signing_secret, 1);
    // Message timestamps (ts) count from now, so every run's are new.
    base_seconds_ = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    return {};
  }
  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"secrets.allowed_env", fmt::format(R"(["{}", "{}"])", bot_token_env, signing_env)}};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view /*route*/) const override {
    return fmt::format(R"({{"name":{},"type":"slack","agent":{},"bot_token_env":"{}",)"
                       R"("signing_secret_env":"{}","api_base":{},"stream_edits":false,)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), bot_token_env, signing_env,
                       json_text(fake_->api_base()));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    // Slack's thread is <channel>:<thread_ts>: thread `thread` is a thread of C0BENCH whose
    // root ts lies a second before the messages' own (unique, as Slack's ts are).
    test::slack_event_sender sender(signing_secret, route);
    test::slack_event_sender::message m;
    m.event_id = fmt::format("Ev0BENCH{:010}", i);
    m.channel = slack_channel;
    m.user = fmt::format("U0BENCH{:07}", thread);
    m.text = text;
    m.ts = fmt::format("{}.{:06}", base_seconds_ + static_cast<std::int64_t>(i / 1'000'000),
                       i % 1'000'000);
    m.thread_ts =
        fmt::format("{}.{:06}", base_seconds_ - 1 - static_cast<std::int64_t>(thread / 1'000'000),
                    thread % 1'000'000);
    return as_template(sender.request(test::slack_event_sender::event_body(m), {}));
  }
  std::string describe() const override {
    return "a slack channel (Events API deliveries signed with v0 X-Slack-Signature, "
           "stream_edits off); replies at the fake Slack Web API (fakes/fake_slack) through "
           "chat.postMessage with the bot token";
  }

private:
  std::unique_ptr<test::fake_slack> fake_;
  std::int64_t base_seconds_ = 0;
};

} // namespace

std::unique_ptr<channel_driver> make_slack_driver() {
  return std::make_unique<slack_driver>();
}

} // namespace troupe::bench::detail
