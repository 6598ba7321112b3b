#include <array>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "mock_llm_fixture.hpp"

namespace {

struct command_result {
  int status = -1;
  std::string output;
};

command_result run_command(const std::string& command) {
  command_result r;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  while (auto n = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    r.output.append(buffer.data(), n);
  }
  r.status = pclose(pipe);
  return r;
}

} // namespace

TEST_CASE("troupe chat streams a mock-llm answer to stdout on both wires",
          "[net][cli][integration]") {
  troupe::test::mock_llm_fixture mock;
  const std::string base = std::string(TROUPE_BINARY) + " chat --provider-url " + mock.base_url() +
                           " --model m --api-key k ";
  auto openai = run_command(base + "'hello from the cli' 2>&1");
  CHECK(openai.status == 0);
  CHECK(openai.output.find("mock-llm reply 1 to: hello from the cli") != std::string::npos);
  auto claude = run_command(base + "--provider-type claude --no-stream 'second' 2>&1");
  CHECK(claude.status == 0);
  CHECK(claude.output.find("mock-llm reply 2 to: second") != std::string::npos);
  CHECK(mock.stats().openai_requests == 1);
  CHECK(mock.stats().anthropic_requests == 1);
}

TEST_CASE("troupe chat reports a classified provider failure and exits non-zero",
          "[net][cli][integration]") {
  troupe::test::mock_llm_fixture mock;
  // mock-llm reads faults from headers; the CLI sends none, so point it at a path that
  // does not exist to get a 404.
  auto r = run_command(std::string(TROUPE_BINARY) + " chat --provider-url " + mock.base_url() +
                       "/nowhere --model m --api-key k 'x' 2>&1");
  CHECK(r.status != 0);
  CHECK(r.output.find("not_found") != std::string::npos);
}

TEST_CASE("troupe mock-llm refuses a malformed script", "[net][cli]") {
  auto r =
      run_command("echo '{\"fault\":\"explode\"}' > /tmp/troupe_bad_mock_script.jsonl && " +
                  std::string(TROUPE_BINARY) +
                  " mock-llm --listen 127.0.0.1:0 --script /tmp/troupe_bad_mock_script.jsonl 2>&1");
  CHECK(r.status != 0);
  CHECK(r.output.find("bad mock fault 'explode'") != std::string::npos);
}
