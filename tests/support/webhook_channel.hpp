#pragma once

// The generic webhook channel "hooks" as the channel integration tests declare it (a
// mock-llm provider, the agent "helper" answering, replies to a callback receiver), and
// a platform delivery to its inbound webhook.

#include <cstdint>
#include <string>

#include "support/raw_http.hpp"

namespace troupe::test {

inline constexpr const char* webhook_channel_token = "hook-secret-1";

/// The provider "mock" at `mock_base_url`, the agent "helper" with `tools` (a TOML
/// array) and the channel "hooks" replying to `callback_url`, with `channel_keys` (TOML
/// lines) added to the channel.
inline std::string webhook_channel_config(const std::string& mock_base_url,
                                          const std::string& callback_url,
                                          const std::string& tools = R"(["finish"])",
                                          unsigned timeout_s = 60,
                                          const std::string& channel_keys = {}) {
  return "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
         mock_base_url + "\"\n[[agents]]\nname = \"helper\"\nprovider = \"mock\"\n" +
         "model = \"mock-llm\"\ntools = " + tools + "\ntimeout_s = " + std::to_string(timeout_s) +
         "\n[[channels]]\nname = \"hooks\"\ntype = \"webhook\"\nagent = \"helper\"\ntoken = \"" +
         webhook_channel_token + "\"\ncallback_url = \"" + callback_url + "\"\n" + channel_keys;
}

/// One message POSTed to the channel "hooks" on `port`: the raw HTTP answer.
inline std::string deliver_webhook(std::uint16_t port, const std::string& thread,
                                   const std::string& sender, const std::string& message_id,
                                   const std::string& text,
                                   const std::string& token = webhook_channel_token) {
  const std::string body = R"({"thread":")" + thread + R"(","sender":")" + sender +
                           R"(","message_id":")" + message_id + R"(","text":")" + text + R"("})";
  return http_exchange(port, "POST", "/api/v1/webhooks/channels/hooks", body,
                       "Content-Type: application/json\r\nX-Webhook-Token: " + token + "\r\n");
}

} // namespace troupe::test
