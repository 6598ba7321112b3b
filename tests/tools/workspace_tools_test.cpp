#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include <simdjson.h>

#include "support/troupe_process.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/workspace.hpp"

using namespace troupe;
using namespace troupe::tools;
namespace asio = boost::asio;

namespace {

tool_result call(const tool& t, const std::string& args, const std::filesystem::path& ws,
                 const sandbox_runner* sandbox = nullptr) {
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

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

} // namespace

TEST_CASE("workspace paths stay inside the workspace", "[tools][workspace]") {
  troupe::test::temp_dir dir;
  auto ws = workspace::open(dir.path()).value();
  CHECK(ws.relative("a/b/../c.txt").value() == "a/c.txt");
  CHECK(ws.relative("/work/data/x.csv").value() == "data/x.csv");
  CHECK(ws.relative((ws.root() / "y.txt").string()).value() == "y.txt");
  CHECK(ws.relative("./").value() == ".");
  CHECK(ws.relative("../secret").error().code == errc::permission_denied);
  CHECK(ws.relative("a/../../secret").error().code == errc::permission_denied);
  CHECK(ws.relative("/etc/passwd").error().code == errc::permission_denied);
  CHECK(ws.relative("/workspace/x").error().code == errc::permission_denied);
  CHECK_FALSE(ws.relative(""));
}

TEST_CASE("a symlink pointing out of the workspace is refused by every file tool",
          "[tools][workspace]") {
  troupe::test::temp_dir dir;
  std::filesystem::create_directory_symlink("/etc", dir.path() / "etc-link");
  std::filesystem::create_symlink("/etc/hostname", dir.path() / "host-file");
  write(dir.path() / "inside.txt", "fine\n");
  std::filesystem::create_symlink("inside.txt", dir.path() / "inner-link");

  auto read = make_read_tool();
  auto r = call(*read, R"({"file_path":"etc-link/hostname"})", dir.path());
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "permission_denied");
  CHECK_THAT(r.content, Catch::Contains("outside the workspace"));
  CHECK(call(*read, R"({"file_path":"host-file"})", dir.path()).failure_kind ==
        "permission_denied");
  // A symlink that stays inside is fine.
  CHECK_THAT(call(*read, R"({"file_path":"inner-link"})", dir.path()).content,
             Catch::Contains("fine"));

  auto write_tool = make_write_tool();
  auto w = call(*write_tool, R"({"path":"etc-link/evil","content":"x"})", dir.path());
  CHECK(w.failure_kind == "permission_denied");
  CHECK_FALSE(std::filesystem::exists("/etc/evil"));
  CHECK(call(*make_ls_tool(), R"({"path":"etc-link"})", dir.path()).failure_kind ==
        "permission_denied");
  CHECK(
      call(*make_grep_tool(), R"({"pattern":"root","path":"etc-link"})", dir.path()).failure_kind ==
      "permission_denied");
}

TEST_CASE("read returns numbered line ranges", "[tools][workspace]") {
  troupe::test::temp_dir dir;
  std::string text;
  for (int i = 1; i <= 300; ++i) {
    text += "line " + std::to_string(i) + "\n";
  }
  write(dir.path() / "long.txt", text);
  auto r =
      call(*make_read_tool(), R"({"file_path":"long.txt","offset":250,"limit":3})", dir.path());
  REQUIRE(r.ok);
  CHECK_THAT(r.content,
             Catch::Contains(R"(   250\tline 250\n   251\tline 251\n   252\tline 252\n")"));
  CHECK_THAT(r.content, Catch::Contains(R"("total_lines":300)"));
  CHECK_THAT(r.content, Catch::Contains(R"("more":true)"));
  auto missing = call(*make_read_tool(), R"({"file_path":"nope.txt"})", dir.path());
  CHECK(missing.failure_kind == "not_found");
  auto bad = call(*make_read_tool(), R"({"offset":2})", dir.path());
  CHECK(bad.failure_kind == "invalid_arguments");
  CHECK_THAT(bad.content, Catch::Contains("arguments.file_path: is required"));
}

TEST_CASE("write creates parents and reports the file as an artifact", "[tools][workspace]") {
  troupe::test::temp_dir dir;
  auto r =
      call(*make_write_tool(), R"({"path":"out/deep/notes.md","content":"# hi\n"})", dir.path());
  REQUIRE(r.ok);
  REQUIRE(r.artifacts.size() == 1);
  CHECK(r.artifacts[0] == tool_artifact{"out/deep/notes.md", "text/markdown", 5});
  CHECK(std::filesystem::file_size(dir.path() / "out/deep/notes.md") == 5);
  auto appended =
      call(*make_write_tool(), R"({"path":"out/deep/notes.md","content":"more\n","append":true})",
           dir.path());
  CHECK(appended.ok);
  CHECK(std::filesystem::file_size(dir.path() / "out/deep/notes.md") == 10);
}

TEST_CASE("edit needs a unique match unless told to replace all", "[tools][workspace]") {
  troupe::test::temp_dir dir;
  write(dir.path() / "f.txt", "a = 1\nb = 1\n");
  auto edit = make_edit_tool();
  auto ambiguous =
      call(*edit, R"({"file_path":"f.txt","old_string":"= 1","new_string":"= 2"})", dir.path());
  CHECK_FALSE(ambiguous.ok);
  CHECK_THAT(ambiguous.content, Catch::Contains("occurs 2 times"));
  auto unique =
      call(*edit, R"({"file_path":"f.txt","old_string":"a = 1","new_string":"a = 3"})", dir.path());
  CHECK(unique.ok);
  auto all =
      call(*edit, R"({"file_path":"f.txt","old_string":"1","new_string":"9","replace_all":true})",
           dir.path());
  CHECK(all.ok);
  std::ifstream in(dir.path() / "f.txt");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "a = 3\nb = 9\n");
  CHECK(call(*edit, R"({"file_path":"f.txt","old_string":"zzz","new_string":""})", dir.path())
            .failure_kind == "not_found");
}

TEST_CASE("ls, find and grep see the workspace only", "[tools][workspace]") {
  troupe::test::temp_dir dir;
  write(dir.path() / "data/a.csv", "id,total\n1,10\n");
  write(dir.path() / "data/b.csv", "id,total\n2,20\n");
  write(dir.path() / "notes.txt", "TOTAL is what matters\n");
  auto ls = call(*make_ls_tool(), R"({"path":"data"})", dir.path());
  CHECK_THAT(ls.content, Catch::Contains(R"({"name":"a.csv","type":"file","size":14})"));
  auto found = call(*make_find_tool(), R"({"pattern":"*.csv"})", dir.path());
  CHECK_THAT(found.content, Catch::Contains(R"("matches":["data/a.csv","data/b.csv"])"));
  auto grep = call(*make_grep_tool(), R"({"pattern":"total","ignore_case":true,"glob":"*.txt"})",
                   dir.path());
  CHECK_THAT(grep.content, Catch::Contains(R"({"path":"notes.txt","line":1,)"));
  CHECK_THAT(grep.content, Catch::Contains(R"("count":1)"));
  auto bad = call(*make_grep_tool(), R"({"pattern":"(unclosed"})", dir.path());
  CHECK(bad.failure_kind == "invalid_arguments");
}

TEST_CASE("exec runs a command in the sandbox with a timeout", "[tools][workspace][sandbox]") {
  troupe::test::temp_dir dir;
  sandbox_runner sandbox;
  auto ok = call(*make_exec_tool(), R"({"command":"echo hi > f.txt; cat f.txt; id -u"})",
                 dir.path(), &sandbox);
  CHECK(ok.ok);
  CHECK_THAT(ok.content, Catch::Contains(R"("stdout":"hi\n)"));
  CHECK_THAT(ok.content, Catch::Contains(R"("sandboxed":true)"));
  auto slow =
      // A 10 s command under a 1 s timeout: the timeout must stop it.
      call(*make_exec_tool(), R"({"command":"sleep 10","timeout_s":1})", dir.path(), &sandbox);
  CHECK_FALSE(slow.ok);
  CHECK(slow.failure_kind == "timeout");
  auto none = call(*make_exec_tool(), R"({"command":"true"})", dir.path());
  CHECK(none.failure_kind == "policy_blocked");
}
