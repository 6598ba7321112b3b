#pragma once

// Runs mock-llm on its own io thread for loopback tests, and runs client coroutines to
// completion on a test-local io_context.

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "support/run_until_done.hpp"
#include "troupe/mock/mock_llm_server.hpp"

namespace troupe::test {

/// Words in a mock answer (the mock's tokens are words separated by single spaces).
inline std::size_t count_words(std::string_view text) {
  std::size_t n = text.empty() ? 0 : 1;
  for (char c : text) {
    n += c == ' ' ? 1 : 0;
  }
  return n;
}

namespace asio = boost::asio;

class mock_llm_fixture {
public:
  /// `port` 0: any free port; another: that one (a mock that takes over from one that
  /// was stopped, at the address a troupe's config names).
  explicit mock_llm_fixture(mock::mock_llm_options options = {}, std::uint16_t port = 0) {
    server_ = std::make_unique<mock::mock_llm_server>(io_, std::move(options));
    auto bound = server_->listen({"127.0.0.1", port});
    if (!bound) {
      throw std::runtime_error(bound.error().message);
    }
    port_ = bound->port;
    server_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~mock_llm_fixture() {
    asio::post(io_,
               [this] { server_->stop(std::chrono::milliseconds(50), [this] { io_.stop(); }); });
    thread_.join();
  }
  mock_llm_fixture(const mock_llm_fixture&) = delete;
  mock_llm_fixture& operator=(const mock_llm_fixture&) = delete;

  std::string base_url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
  }
  std::uint16_t port() const {
    return port_;
  }
  mock::mock_llm_stats stats() const {
    return server_->stats();
  }

private:
  asio::io_context io_;
  std::unique_ptr<mock::mock_llm_server> server_;
  std::thread thread_;
  std::uint16_t port_ = 0;
};

/// mock-llm's options with the rules of `script` (a JSON array of rules, mock/README.md);
/// throws, saying why, when the script does not parse.
inline mock::mock_llm_options scripted(std::string_view script) {
  auto rules = mock::parse_mock_script(script);
  if (!rules) {
    throw std::runtime_error("the mock script does not parse: " + rules.error().message);
  }
  mock::mock_llm_options options;
  options.rules = std::move(*rules);
  return options;
}

/// The `[[providers]]` entry of a troupe config named "mock": the OpenAI-compatible API of
/// `mock`.
inline std::string mock_provider_toml(const mock_llm_fixture& mock) {
  return "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
         mock.base_url() + "\"\n";
}

/// `options` with a first rule that answers a user message containing "hold" only after
/// ten minutes: a run still going when a test kills the troupe waiting for it.
inline troupe::mock::mock_llm_options holding(troupe::mock::mock_llm_options options) {
  auto held = troupe::mock::parse_mock_script(
      R"([{"match": {"user": "hold"}, "ttft_ms": 600000, "reply": {"text": "too late"}}])");
  if (held) {
    options.rules.insert(options.rules.begin(), held->begin(), held->end());
  }
  return options;
}

} // namespace troupe::test
