#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "net/mock_llm_fixture.hpp"
#include "storage/storage_fixture.hpp"

using namespace troupe;

namespace {

std::string run_stdout(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  while (auto n = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    out.append(buffer.data(), n);
  }
  status = pclose(pipe);
  return out;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TEST_CASE("troupe chat --agent runs the agent with its tools, answer to stdout, steps to stderr",
          "[integration][agent_chat]") {
  auto rules = mock::parse_mock_script(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"ls","arguments":{}}]}},
    {"match":{"call":2},"reply":{"text":"Your workspace holds notes.txt."}}])");
  REQUIRE(rules);
  mock::mock_llm_options options;
  options.rules = std::move(*rules);
  test::mock_llm_fixture mock(std::move(options));
  storage::testing::temp_dir dir;
  std::filesystem::create_directories(dir.path() / "workspaces" / "helper");
  std::ofstream(dir.path() / "workspaces" / "helper" / "notes.txt") << "hi\n";
  const auto config = dir.path() / "troupe.toml";
  std::ofstream(config)
      << "data_dir = \"" << dir.path().string() << "\"\n\n"
      << "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\n"
      << "base_url = \"" << mock.base_url() << "\"\napi_key = \"k\"\n\n"
      << "[[agents]]\nname = \"helper\"\nprovider = \"mock\"\nmodel = \"m1\"\n"
      << "system_prompt = \"You help.\"\ntools = [\"ls\", \"read\", \"finish\"]\n";
  const auto err = dir.path() / "stderr.txt";
  int status = -1;
  const auto out = run_stdout(std::string(TROUPE_BINARY) + " chat --config " + config.string() +
                                  " --agent helper 'What is in my workspace?' 2>" + err.string(),
                              status);
  CHECK(status == 0);
  CHECK_THAT(out, Catch::Contains("Your workspace holds notes.txt."));
  const auto steps = slurp(err);
  CHECK_THAT(steps, Catch::Contains("[action.started]"));
  CHECK_THAT(steps, Catch::Contains("notes.txt"));
  CHECK_THAT(steps, Catch::Contains("[run.completed]"));
  CHECK(mock.stats().completion_requests == 2);
  // The run, its messages and steps are in the data directory's database.
  auto db = storage::open_writer(storage::database_path(dir.path()), storage::sync_mode::normal);
  REQUIRE(db);
  auto runs = storage::list_runs_with_status(*db, storage::run_status::succeeded);
  REQUIRE(runs);
  REQUIRE(runs->size() == 1);
  auto stored_steps = storage::list_steps(*db, runs->front().id);
  REQUIRE(stored_steps);
  CHECK(stored_steps->size() >= 3);
  auto messages = storage::list_messages(*db, runs->front().conversation_id);
  REQUIRE(messages);
  REQUIRE_FALSE(messages->empty());
  CHECK(messages->back().content == "Your workspace holds notes.txt.");
}

TEST_CASE("troupe chat --agent names an unknown agent", "[integration][agent_chat]") {
  storage::testing::temp_dir dir;
  const auto config = dir.path() / "troupe.toml";
  std::ofstream(config) << "data_dir = \"" << dir.path().string() << "\"\n";
  int status = -1;
  const auto out = run_stdout(std::string(TROUPE_BINARY) + " chat --config " + config.string() +
                                  " --agent nobody hi 2>&1",
                              status);
  CHECK(status != 0);
  CHECK_THAT(out, Catch::Contains("no agent named 'nobody'"));
}

TEST_CASE("troupe chat --agent refuses an agent with an unknown tool, naming the agent",
          "[integration][agent_chat]") {
  storage::testing::temp_dir dir;
  const auto config = dir.path() / "troupe.toml";
  std::ofstream(config) << "data_dir = \"" << dir.path().string() << "\"\n\n"
                        << "[[providers]]\nname = \"p\"\ntype = \"openai-compatible\"\n"
                        << "base_url = \"http://127.0.0.1:9/v1\"\n\n"
                        << "[[agents]]\nname = \"helper\"\nprovider = \"p\"\nmodel = \"m1\"\n"
                        << "tools = [\"teleport\"]\n";
  int status = -1;
  const auto out = run_stdout(std::string(TROUPE_BINARY) + " chat --config " + config.string() +
                                  " --agent helper hi 2>&1",
                              status);
  CHECK(status != 0);
  CHECK_THAT(out, Catch::Contains("helper"));
  CHECK_THAT(out, Catch::Contains("teleport"));
}
