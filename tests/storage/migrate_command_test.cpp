#include <array>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/schema.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

struct command_result {
  int status = -1;
  std::string output;
};

// Runs the troupe binary with `args`, capturing stdout and stderr.
command_result run_troupe(const std::string& args) {
  const std::string command = std::string(TROUPE_BINARY) + " " + args + " 2>&1";
  command_result result;
  std::FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) {
    result.output += buffer.data();
  }
  result.status = ::pclose(pipe);
  return result;
}

} // namespace

TEST_CASE("troupe migrate creates the schema, reports its version and refuses a newer one",
          "[storage][schema][cli]") {
  temp_dir dir;
  const auto data_dir = dir.path() / "data";
  const auto version = std::to_string(latest_schema_version());

  auto first = run_troupe("migrate --data-dir " + data_dir.string());
  CHECK(first.status == 0);
  CHECK_THAT(first.output, Catch::Contains("schema version " + version + " (migrated from 0)"));

  auto second = run_troupe("migrate --data-dir " + data_dir.string());
  CHECK(second.status == 0);
  CHECK_THAT(second.output, Catch::Contains("(up to date)"));

  {
    auto c = must(connection::open(data_dir / "troupe.db"));
    CHECK(must(schema_version(c)) == latest_schema_version());
    must(c.exec("PRAGMA user_version = 77"));
  }
  auto refused = run_troupe("migrate --data-dir " + data_dir.string());
  CHECK(refused.status != 0);
  CHECK_THAT(refused.output, Catch::Contains("schema version 77, newer than this troupe binary"));
}
