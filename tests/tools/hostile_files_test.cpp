// Hostile workspaces: FIFOs, device nodes and symlinks where a tool expects a file,
// catastrophic and oversized patterns, and a data directory under a private parent.
// Every case must answer quickly with an error that says why, never hang.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/workspace.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

const sandbox_runner& shared_sandbox() {
  static const sandbox_runner sandbox;
  return sandbox;
}

tool_result call_now(const tool& t, const std::string& args, const std::filesystem::path& ws,
                     const sandbox_runner* sandbox) {
  asio::io_context io;
  tool_result result;
  asio::co_spawn(io, t.invoke(args, {ws, "run-1", "call-1", sandbox}),
                 [&result](std::exception_ptr ep, tool_result r) {
                   if (ep) {
                     std::rethrow_exception(ep);
                   }
                   result = std::move(r);
                 });
  io.run();
  return result;
}

// Runs the call on a thread of its own and waits at most `limit` for it. A call that
// hangs on a FIFO is freed by opening the FIFOs' other ends (so the test binary can end)
// and reported as a failure.
tool_result call_within(const tool& t, const std::string& args, const std::filesystem::path& ws,
                        std::chrono::milliseconds limit = 10s,
                        const sandbox_runner* sandbox = nullptr) {
  std::packaged_task<tool_result()> task([&] { return call_now(t, args, ws, sandbox); });
  auto answer = task.get_future();
  std::thread runner(std::move(task));
  if (answer.wait_for(limit) != std::future_status::ready) {
    FAIL_CHECK(t.descriptor().name << " " << args << " did not answer within " << limit.count()
                                   << " ms");
    for (const auto& e : std::filesystem::directory_iterator(ws)) {
      if (e.is_fifo()) {
        const int rd = ::open(e.path().c_str(), O_RDONLY | O_NONBLOCK);
        const int wr = ::open(e.path().c_str(), O_WRONLY | O_NONBLOCK);
        ::close(wr);
        ::close(rd);
      }
    }
  }
  runner.join();
  return answer.get();
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string with_path(std::string_view key, std::string_view path, std::string_view more = {}) {
  json_writer w;
  w.begin_object().key(key).value(path);
  if (!more.empty()) {
    w.key("pattern").value(more);
  }
  w.end_object();
  return std::move(w).str();
}

// Every file tool pointed at `name`; each must refuse it saying what it is.
void every_tool_refuses(const std::filesystem::path& ws, const std::string& name,
                        const std::string& what, const std::string& what_for_write = {}) {
  struct attempt {
    std::shared_ptr<const tool> t;
    std::string args;
  };
  json_writer edit;
  edit.begin_object().key("file_path").value(name).key("old_string").value("x");
  edit.key("new_string").value("y").end_object();
  json_writer write_args;
  write_args.begin_object().key("path").value(name).key("content").value("x").end_object();
  struct attempt_with_answer {
    attempt a;
    std::string what;
  };
  const std::vector<attempt_with_answer> attempts = {
      {{make_read_tool(), with_path("file_path", name)}, what},
      // write never follows a final symlink: it refuses the link itself.
      {{make_write_tool(), std::move(write_args).str()},
       what_for_write.empty() ? what : what_for_write},
      {{make_edit_tool(), std::move(edit).str()}, what},
      {{make_ls_tool(), with_path("path", name)}, what},
      {{make_find_tool(), with_path("path", name, "*")}, what},
      {{make_grep_tool(), with_path("path", name, "x")}, what},
  };
  for (const auto& [a, expected_what] : attempts) {
    INFO(a.t->descriptor().name << " on " << name);
    const auto started = std::chrono::steady_clock::now();
    auto r = call_within(*a.t, a.args, ws);
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    CHECK_FALSE(r.ok);
    CHECK(r.failure_kind == "permission_denied");
    CHECK_THAT(r.content,
               Catch::Contains("not a ") && Catch::Contains(name + " is " + expected_what));
  }
}

} // namespace

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

TEST_CASE("every file tool refuses a character device, saying what it is", "[tools][hostile]") {
  troupe::test::temp_dir dir;
  // /dev/zero's numbers: reading it would never end, writing it would swallow anything.
  if (::mknod((dir.path() / "zero").c_str(), S_IFCHR | 0666, ::makedev(1, 5)) != 0) {
    WARN("cannot create a device node here (needs CAP_MKNOD); checking /dev/zero via a "
         "symlink instead, which must be refused as leaving the workspace");
    std::filesystem::create_symlink("/dev/zero", dir.path() / "zero");
    auto r = call_within(*make_read_tool(), with_path("file_path", "zero"), dir.path());
    CHECK(r.failure_kind == "permission_denied");
    return;
  }
  every_tool_refuses(dir.path(), "zero", "a character device");
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

TEST_CASE("the code interpreter's artifact scan skips a FIFO, a device and symlinks it is "
          "told about",
          "[tools][hostile][sandbox]") {
  troupe::test::temp_dir dir;
  REQUIRE(::mkfifo((dir.path() / "result.csv").c_str(), 0666) == 0);
  const bool device =
      ::mknod((dir.path() / "dev.txt").c_str(), S_IFCHR | 0666, ::makedev(1, 5)) == 0;
  std::filesystem::create_symlink("/etc/passwd", dir.path() / "passwd.txt");
  std::filesystem::create_symlink("result.csv", dir.path() / "inner.csv");
  json_writer w;
  w.begin_object().key("language").value("python");
  w.key("code").value("open('real.csv', 'w').write('a,b\\n1,2\\n')\n"
                      "print('saved result.csv, dev.txt, passwd.txt, inner.csv and real.csv')\n");
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
  if (device) {
    CHECK(std::filesystem::is_character_file(dir.path() / "dev.txt"));
  }
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
