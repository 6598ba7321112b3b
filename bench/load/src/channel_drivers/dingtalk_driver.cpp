// DingTalk: robot callbacks signed with timestamp + sign to the channel's route, each with
// a session webhook of the fake platform (fakes/: the one the tests use), where replies
// arrive.

#include <cstdlib>

#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "support/fake_dingtalk.hpp"

namespace troupe::bench::detail {

namespace {

constexpr auto secret_env = "BENCH_DINGTALK_APP_SECRET";

class dingtalk_driver final : public channel_driver {
public:
  expected<void> start(reply_tracker& replies) override {
    fake_ = std::make_unique<test::fake_dingtalk>("dingbenchkey", "bench-dingtalk-secret");
    fake_->on_send([&replies](std::string_view text) { replies.take(text); });
    ::setenv(secret_env, fake_->app_secret().c_str(), 1);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"secrets.allowed_env", fmt::format(R"(["{}"])", secret_env)}};
  }
  std::string channel_body(std::string_view name, std::string_view agent,
                           std::string_view /*route*/) const override {
    return fmt::format(R"({{"name":{},"type":"dingtalk","agent":{},"app_key":"dingbenchkey",)"
                       R"("app_secret_env":"{}","api_base":{},)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(name), json_text(agent), secret_env, json_text(fake_->api_base()));
  }
  request_template delivery(const std::string& route, std::size_t i, std::size_t thread,
                            const std::string& text) const override {
    test::dingtalk_callback_sender sender(route, fake_->app_secret());
    test::dingtalk_callback_sender::message m;
    m.msg_id = fmt::format("bench-msg-{}", i);
    m.text = text;
    m.conversation_id = fmt::format("cidBench{}", thread);
    m.sender_staff_id = fmt::format("bench-staff-{}", thread);
    const auto session = fake_->new_session();
    m.session_webhook = session.url;
    m.session_webhook_expires_ms = session.expires_ms;
    return as_template(
        sender.request(test::dingtalk_callback_sender::callback_body(m, "dingbenchkey"), {}));
  }
  std::string describe() const override {
    return "a dingtalk channel (signed callbacks); replies at the fake DingTalk platform "
           "(fakes/fake_dingtalk) through each message's session webhook";
  }

private:
  std::unique_ptr<test::fake_dingtalk> fake_;
};

} // namespace

std::unique_ptr<channel_driver> make_dingtalk_driver() {
  return std::make_unique<dingtalk_driver>();
}

} // namespace troupe::bench::detail
