#pragma once

// A `troupe serve` child process on a fresh data directory for API integration tests,
// with its admin token, and small helpers to read raw HTTP answers.

#include <csignal>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "support/raw_http.hpp"
#include "support/troupe_process.hpp"

namespace troupe::test {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return std::move(out).str();
}

// The first "key":"value" (string) or "key":123 (number) in a JSON text.
inline std::string json_field(const std::string& body, const std::string& key) {
  const std::regex pattern("\"" + key + R"re(":("([^"]*)"|(-?[0-9]+)|true|false|null))re");
  std::smatch m;
  if (!std::regex_search(body, m, pattern)) {
    return {};
  }
  return m[2].matched ? m[2].str() : m[3].matched ? m[3].str() : m[1].str();
}

// A `troupe serve` on a fresh data dir, with optional [api] settings.
class api_server {
public:
  /// `api_toml`: keys of the [api] table; `more_toml`: further tables (written first).
  explicit api_server(const std::string& api_toml = {}, const std::string& more_toml = {}) {
    const auto config = dir_.path() / "troupe.toml";
    std::ofstream(config) << "listen = \"127.0.0.1:0\"\ndata_dir = \"" << data_dir().string()
                          << "\"\n"
                          << more_toml << "\n"
                          << (api_toml.empty() ? "" : "[api]\n" + api_toml);
    start();
    admin_ = read_file(data_dir() / "admin.token");
    while (!admin_.empty() && admin_.back() == '\n') {
      admin_.pop_back();
    }
  }
  ~api_server() {
    process_->signal(SIGTERM);
    const auto code = process_->wait_exit();
    if (std::uncaught_exceptions() == 0) {
      // A clean stop, and nothing from the sanitizers in the ASan build.
      CHECK(code == 0);
      CHECK_THAT(process_->output(),
                 !Catch::Contains("Sanitizer") && !Catch::Contains("runtime error"));
    }
  }

  /// Stops the server with `signo` (SIGTERM: a clean stop, checked; SIGKILL: a crash)
  /// and starts a new one on the same config and data directory (a new port);
  /// `meanwhile` runs after the old one exited and before the new one starts.
  void restart(int signo = SIGTERM, const std::function<void()>& meanwhile = {}) {
    process_->signal(signo);
    const auto code = process_->wait_exit();
    if (signo == SIGTERM) {
      CHECK(code == 0);
    }
    if (meanwhile) {
      meanwhile();
    }
    start();
  }

  std::filesystem::path data_dir() const {
    return dir_.path() / "data";
  }
  std::uint16_t port() const {
    return port_;
  }
  const std::string& admin() const {
    return admin_;
  }
  troupe_process& process() {
    return *process_;
  }

  /// A raw exchange; `token` empty sends no Authorization header.
  std::string call(std::string_view method, std::string_view target, const std::string& token,
                   std::string_view body = {}, std::string extra = {}) const {
    if (!token.empty()) {
      extra += "Authorization: Bearer " + token + "\r\n";
    }
    if (!body.empty()) {
      extra += "Content-Type: application/json\r\n";
    }
    return http_exchange(port_, method, target, body, extra);
  }

  /// Creates a user and a token of `scope` for it; returns the token.
  std::string user_token(const std::string& name, const std::string& scope = "user",
                         const std::string& agent_id = {}) const {
    auto user = call("POST", "/api/v1/users", admin_, R"({"name":")" + name + R"("})");
    REQUIRE(status_of(user) == 201);
    std::string body = R"({"name":"t","user_id":)" + json_field(body_of(user), "id") +
                       R"(,"scope":")" + scope + "\"";
    if (!agent_id.empty()) {
      body += R"(,"agent_id":)" + agent_id;
    }
    body += "}";
    auto token = call("POST", "/api/v1/tokens", admin_, body);
    REQUIRE(status_of(token) == 201);
    return json_field(body_of(token), "token");
  }

private:
  void start() {
    process_ = std::make_unique<troupe_process>(
        std::vector<std::string>{"serve", "--config", (dir_.path() / "troupe.toml").string()});
    port_ = process_->wait_for_port().value_or(0);
  }

  temp_dir dir_;
  std::unique_ptr<troupe_process> process_;
  std::uint16_t port_ = 0;
  std::string admin_;
};

inline std::string header_value(const std::string& response, const std::string& name) {
  const std::regex pattern("\r\n" + name + ": ([^\r]*)\r\n", std::regex::icase);
  std::smatch m;
  return std::regex_search(response, m, pattern) ? m[1].str() : std::string{};
}

} // namespace troupe::test
