#include "channel_drivers/channel_driver.hpp"

#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace troupe::bench::detail {

std::int64_t channel_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

void reply_tracker::take(std::string_view text) {
  const auto at = channel_now_ns();
  static const std::regex tag(R"(bench c([0-9]+))");
  std::match_results<std::string_view::const_iterator> m;
  std::lock_guard lock(mutex_);
  if (!std::regex_search(text.begin(), text.end(), m, tag) ||
      std::stoull(m[1].str()) >= load_.total) {
    ++unrecognised_;
    return;
  }
  const auto i = static_cast<std::size_t>(std::stoull(m[1].str()));
  std::int64_t none = 0;
  if (!load_.replied_ns[i].compare_exchange_strong(none, at)) {
    ++duplicates_;
    return;
  }
  // The thread's previous message must have had its reply already.
  if (i >= load_.threads && load_.replied_ns[i - load_.threads].load() == 0) {
    ++out_of_order_;
  }
  ++answered_;
  changed_.notify_all();
}

bool reply_tracker::wait_for(std::size_t n, std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return answered_ >= n; });
}

std::size_t reply_tracker::answered() const {
  std::lock_guard lock(mutex_);
  return answered_;
}
std::size_t reply_tracker::duplicates() const {
  std::lock_guard lock(mutex_);
  return duplicates_;
}
std::size_t reply_tracker::unrecognised() const {
  std::lock_guard lock(mutex_);
  return unrecognised_;
}
std::size_t reply_tracker::out_of_order() const {
  std::lock_guard lock(mutex_);
  return out_of_order_;
}

request_template as_template(const net::http_client_request& request) {
  request_template t;
  t.method = request.method;
  t.url = request.url;
  t.body = request.body;
  t.headers = request.headers;
  return t;
}

const std::vector<std::string_view>& channel_driver_types() {
  static const std::vector<std::string_view> types{"webhook",   "telegram", "slack",  "wecom",
                                                   "wechat_mp", "whatsapp", "feishu", "dingtalk"};
  return types;
}

expected<std::unique_ptr<channel_driver>> make_channel_driver(std::string_view type) {
  if (type == "webhook" || type.empty()) {
    return make_webhook_driver();
  }
  if (type == "feishu") {
    return make_feishu_driver();
  }
  if (type == "dingtalk") {
    return make_dingtalk_driver();
  }
  if (type == "wecom") {
    return make_wecom_driver();
  }
  if (type == "wechat_mp") {
    return make_wechat_mp_driver();
  }
  if (type == "whatsapp") {
    return make_whatsapp_driver();
  }
  if (type == "slack") {
    return make_slack_driver();
  }
  if (type == "telegram") {
    return make_telegram_driver();
  }
  return fail(errc::invalid_argument,
              fmt::format("--channel-type '{}' is not one the bench drives ({})", type,
                          fmt::join(channel_driver_types(), ", ")));
}

} // namespace troupe::bench::detail
