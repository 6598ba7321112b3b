// Device nodes in a workspace, which only a process with CAP_MKNOD can make: where
// mknod is refused, each case is reported as skipped (ctest's SKIP_RETURN_CODE), never
// as passed.

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/skip.hpp"
#include "support/troupe_process.hpp"
#include "tools/hostile_calls.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace troupe::test::hostile;
using namespace std::chrono_literals;

namespace {

// Makes a character device with /dev/zero's numbers at `path` (reading it never ends,
// writing it swallows anything); errno's text when mknod refuses.
std::string make_zero_device(const std::filesystem::path& path) {
  if (::mknod(path.c_str(), S_IFCHR | 0666, ::makedev(1, 5)) != 0) {
    return std::strerror(errno);
  }
  return {};
}

// Skips the case unless this process may make device nodes, as a trial in a directory
// of its own (gone before the skip) shows.
void require_mknod() {
  std::string refused;
  {
    troupe::test::temp_dir trial;
    refused = make_zero_device(trial.path() / "zero");
  }
  if (!refused.empty()) {
    troupe::test::skip_test("cannot create a device node here (mknod: " + refused +
                            "; it needs CAP_MKNOD)");
  }
}

} // namespace

TEST_CASE("every file tool refuses a character device, saying what it is", "[tools][hostile]") {
  require_mknod();
  troupe::test::temp_dir dir;
  REQUIRE(make_zero_device(dir.path() / "zero").empty());
  every_tool_refuses(dir.path(), "zero", "a character device");
  CHECK(std::filesystem::is_character_file(dir.path() / "zero"));
}

TEST_CASE("the code interpreter's artifact scan skips a device it is told about",
          "[tools][hostile][sandbox]") {
  require_mknod();
  troupe::test::temp_dir dir;
  REQUIRE(make_zero_device(dir.path() / "dev.txt").empty());
  json_writer w;
  w.begin_object().key("language").value("python");
  w.key("code").value("open('real.csv', 'w').write('a,b\\n1,2\\n')\n"
                      "print('saved dev.txt and real.csv')\n");
  w.end_object();
  const auto started = std::chrono::steady_clock::now();
  auto r = call_within(*make_code_interpreter_tool(), std::move(w).str(), dir.path(), 60s,
                       &shared_sandbox());
  CHECK(std::chrono::steady_clock::now() - started < 30s);
  REQUIRE(r.ok);
  std::vector<std::string> attached;
  for (const auto& a : r.artifacts) {
    attached.push_back(a.path);
  }
  CHECK(attached == std::vector<std::string>{"real.csv"});
  CHECK(std::filesystem::is_character_file(dir.path() / "dev.txt"));
}
