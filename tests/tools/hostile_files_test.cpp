// Hostile workspaces: FIFOs, device nodes and symlinks where a tool expects a file,
// catastrophic and oversized patterns, and a data directory under a private parent.
// Every case must answer quickly with an error that says why, never hang.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "support/troupe_process.hpp"
#include "tools/hostile_calls.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/workspace.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace std::chrono_literals;
namespace asio = boost::asio;

using namespace troupe::test::hostile;

TEST_CASE("every file tool refuses a FIFO at once, saying it is a FIFO", "[tools][hostile]") {
  troupe::test::temp_dir dir;
  REQUIRE(::mkfifo((dir.path() / "p").c_str(), 0666) == 0);
  every_tool_refuses(dir.path(), "p", "a FIFO");
  // The FIFO is still a FIFO: nothing replaced it with a file.
  CHECK(std::filesystem::is_fifo(dir.path() / "p"));
}

TEST_CASE("a symlink inside the workspace to a FIFO is refused as the FIFO it leads to",
          "[tools][hostile]") {
  troupe::test::temp_dir dir;
  REQUIRE(::mkfifo((dir.path() / "p").c_str(), 0666) == 0);
  std::filesystem::create_symlink("p", dir.path() / "link");
  every_tool_refuses(dir.path(), "link", "a FIFO", "a symbolic link");
}

// A device node made in the workspace itself needs CAP_MKNOD: that case is in
// tests/tools/may_skip/device_node_test.cpp, reported skipped where it cannot run.
TEST_CASE("a symlink to /dev/zero is refused as leaving the workspace", "[tools][hostile]") {
  troupe::test::temp_dir dir;
  std::filesystem::create_symlink("/dev/zero", dir.path() / "zero");
  auto r = call_within(*make_read_tool(), with_path("file_path", "zero"), dir.path());
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "permission_denied");
}

TEST_CASE("grep and find walk past a FIFO and a socket in a directory without opening them",
          "[tools][hostile]") {
  troupe::test::temp_dir dir;
  write(dir.path() / "notes" / "a.txt", "needle here\n");
  REQUIRE(::mkfifo((dir.path() / "notes" / "b.txt").c_str(), 0666) == 0);
  auto g = call_within(*make_grep_tool(), with_path("path", "notes", "needle"), dir.path());
  REQUIRE(g.ok);
  CHECK_THAT(g.content, Catch::Contains(R"("path":"notes/a.txt")"));
  CHECK_THAT(g.content, Catch::Contains(R"("count":1)"));
  auto f = call_within(*make_find_tool(), with_path("path", ".", "*.txt"), dir.path());
  REQUIRE(f.ok);
  CHECK_THAT(f.content, Catch::Contains("notes/a.txt") && !Catch::Contains("notes/b.txt"));
  auto l = call_within(*make_ls_tool(), with_path("path", "notes"), dir.path());
  REQUIRE(l.ok);
  CHECK_THAT(l.content, Catch::Contains(R"({"name":"b.txt","type":"fifo","size":0})"));
}

TEST_CASE("the code interpreter's artifact scan skips a FIFO and symlinks it is told about",
          "[tools][hostile][sandbox]") {
  // The same scan past a device node: tests/tools/may_skip/device_node_test.cpp.
  troupe::test::temp_dir dir;
  REQUIRE(::mkfifo((dir.path() / "result.csv").c_str(), 0666) == 0);
  std::filesystem::create_symlink("/etc/passwd", dir.path() / "passwd.txt");
  std::filesystem::create_symlink("result.csv", dir.path() / "inner.csv");
  json_writer w;
  w.begin_object().key("language").value("python");
  w.key("code").value("open('real.csv', 'w').write('a,b\\n1,2\\n')\n"
                      "print('saved result.csv, passwd.txt, inner.csv and real.csv')\n");
  w.end_object();
  auto tool = make_code_interpreter_tool();
  const auto started = std::chrono::steady_clock::now();
  auto r = call_within(*tool, std::move(w).str(), dir.path(), 60s, &shared_sandbox());
  CHECK(std::chrono::steady_clock::now() - started < 30s);
  REQUIRE(r.ok);
  std::vector<std::string> attached;
  for (const auto& a : r.artifacts) {
    attached.push_back(a.path);
  }
  CHECK(attached == std::vector<std::string>{"real.csv"});
  CHECK(std::filesystem::is_fifo(dir.path() / "result.csv"));
}

TEST_CASE("the code interpreter refuses to write an input file over a FIFO",
          "[tools][hostile][sandbox]") {
  troupe::test::temp_dir dir;
  REQUIRE(::mkfifo((dir.path() / "in.csv").c_str(), 0666) == 0);
  json_writer w;
  w.begin_object().key("language").value("python").key("code").value("print(1)");
  w.key("files").begin_array().begin_object().key("path").value("in.csv");
  w.key("content").value("a").end_object().end_array().end_object();
  const auto args = std::move(w).str();
  auto r = call_within(*make_code_interpreter_tool(), args, dir.path(), 30s, &shared_sandbox());
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "permission_denied");
  CHECK_THAT(r.content, Catch::Contains("in.csv is a FIFO"));
}

TEST_CASE("grep answers a catastrophic pattern over a long line at once", "[tools][hostile]") {
  troupe::test::temp_dir dir;
  // (a+)+$ against a run of a's ending in b: exponential for a backtracking engine (a
  // 30-character line took std::regex minutes), linear for RE2.
  write(dir.path() / "short.txt", std::string(30, 'a') + "b\n");
  write(dir.path() / "long.txt", std::string(500'000, 'a') + "b\n");
  const auto started = std::chrono::steady_clock::now();
  auto r = call_within(*make_grep_tool(), R"({"pattern":"(a+)+$"})", dir.path(), 10s);
  CHECK(std::chrono::steady_clock::now() - started < 2s);
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("count":0)"));
  // The same lines do match a pattern that should match them, long line included.
  auto m = call_within(*make_grep_tool(), R"({"pattern":"(a+)+b$"})", dir.path(), 10s);
  REQUIRE(m.ok);
  CHECK_THAT(m.content, Catch::Contains(R"("count":2)"));
}

TEST_CASE("grep refuses a pattern beyond its length or program-size limit, or not RE2",
          "[tools][hostile]") {
  troupe::test::temp_dir dir;
  write(dir.path() / "a.txt", "text\n");
  auto grep = make_grep_tool();
  auto too_long = call_within(*grep, with_path("path", ".", std::string(1001, 'a')), dir.path());
  CHECK(too_long.failure_kind == "invalid_arguments");
  CHECK_THAT(too_long.content, Catch::Contains("1001 bytes; at most 1000"));
  auto too_big = call_within(*grep, with_path("path", ".", "\\pL{1000}"), dir.path());
  CHECK(too_big.failure_kind == "invalid_arguments");
  CHECK_THAT(too_big.content, Catch::Contains("larger than the limit"));
  auto backreference = call_within(*grep, with_path("path", ".", "(a)\\1"), dir.path());
  CHECK(backreference.failure_kind == "invalid_arguments");
  CHECK_THAT(backreference.content, Catch::Contains("RE2 syntax"));
  // Within the limits: found.
  auto fine = call_within(*grep, with_path("path", ".", "t[a-z]{2}t"), dir.path());
  REQUIRE(fine.ok);
  CHECK_THAT(fine.content, Catch::Contains(R"("count":1)"));
}

TEST_CASE("the sandbox reaches a workspace under a private (0700) parent and the tools see "
          "what the code wrote",
          "[tools][hostile][sandbox]") {
  troupe::test::temp_dir top;
  const auto ws = top.path() / "data" / "workspaces" / "c1";
  std::filesystem::create_directories(ws);
  REQUIRE(::chmod(top.path().c_str(), 0700) == 0);
  if (::geteuid() == 0) {
    // As root the sandbox runs as another uid, which could not enter `top` by its path.
    REQUIRE_FALSE(check_sandbox_reach(ws));
  }
  json_writer w;
  w.begin_object().key("language").value("python");
  w.key("code").value("open('made.txt', 'w').write('from the sandbox')\nprint('wrote made.txt')");
  w.end_object();
  auto r =
      call_within(*make_code_interpreter_tool(), std::move(w).str(), ws, 60s, &shared_sandbox());
  INFO(r.content);
  REQUIRE(r.ok);
  REQUIRE(r.artifacts.size() == 1);
  CHECK(r.artifacts[0].path == "made.txt");
  auto read = call_within(*make_read_tool(), R"({"file_path":"made.txt"})", ws);
  REQUIRE(read.ok);
  CHECK_THAT(read.content, Catch::Contains("from the sandbox"));
  // The parent is as private as before.
  struct stat info {};
  REQUIRE(::stat(top.path().c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0700);
}
