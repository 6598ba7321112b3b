#pragma once

// Runs `troupe bench …` as a shell command for the CLI tests and reads its JSON report.

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <boost/json/parse.hpp>
#include <catch2/catch.hpp>

namespace troupe::test {

struct command_result {
  int status = -1;
  std::string output;
  std::chrono::milliseconds took{0};
};

inline command_result run_command(const std::string& command) {
  command_result r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  while (auto n = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    r.output.append(buffer.data(), n);
  }
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  return r;
}

inline boost::json::object read_report(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto v = boost::json::parse(text.str());
  REQUIRE(v.is_object());
  return v.as_object();
}

/// `troupe bench ` with the binary under test.
inline const std::string bench = std::string(TROUPE_BINARY) + " bench ";

} // namespace troupe::test
