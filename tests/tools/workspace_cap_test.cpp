// tools.workspace_max_bytes: a write or an edit that would take the workspace past its cap
// fails with a tool error saying so, and leaves the workspace as it was.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/troupe_process.hpp"
#include "troupe/tools/builtin_tools.hpp"

using namespace troupe;
using namespace troupe::tools;
namespace asio = boost::asio;

namespace {

tool_result call_capped(const tool& t, const std::string& args, const std::filesystem::path& ws,
                        std::uint64_t cap) {
  asio::io_context io;
  tool_result result;
  tool_context ctx{ws, "run-1", "call-1", nullptr};
  ctx.workspace_max_bytes = cap;
  asio::co_spawn(io, t.invoke(args, ctx), [&result](std::exception_ptr ep, tool_result r) {
    if (ep) {
      std::rethrow_exception(ep);
    }
    result = std::move(r);
  });
  io.run();
  return result;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string text_of(std::size_t n) {
  return std::string(n, 'x');
}

} // namespace

TEST_CASE("a write that would take the workspace past its cap fails and writes nothing",
          "[tools][workspace][cap]") {
  troupe::test::temp_dir dir;
  std::filesystem::create_directories(dir.path() / "old");
  std::ofstream(dir.path() / "old" / "a.txt") << text_of(60);
  auto write = make_write_tool();
  // 60 + 40 = 100: exactly the cap is fine.
  auto fits = call_capped(*write, R"({"path":"b.txt","content":")" + text_of(40) + R"("})",
                          dir.path(), 100);
  CHECK(fits.ok);
  // One byte more is not.
  auto over = call_capped(*write, R"({"path":"c.txt","content":"y"})", dir.path(), 100);
  CHECK_FALSE(over.ok);
  CHECK(over.failure_kind == "limit_exceeded");
  CHECK_THAT(over.content, Catch::Contains("tools.workspace_max_bytes") &&
                               Catch::Contains("would hold 101 bytes") &&
                               Catch::Contains("cap of 100"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "c.txt"));
  // Appending counts the bytes added; overwriting counts the file's old bytes as freed.
  CHECK_FALSE(
      call_capped(*write, R"({"path":"b.txt","content":"z","append":true})", dir.path(), 100).ok);
  CHECK(slurp(dir.path() / "b.txt") == text_of(40));
  auto smaller = call_capped(*write, R"({"path":"old/a.txt","content":")" + text_of(59) + R"("})",
                             dir.path(), 100);
  CHECK(smaller.ok);
  // No cap: anything goes.
  CHECK(call_capped(*write, R"({"path":"big.txt","content":")" + text_of(500) + R"("})", dir.path(),
                    0)
            .ok);
}

TEST_CASE("an edit that would take the workspace past its cap fails and leaves the file",
          "[tools][workspace][cap]") {
  troupe::test::temp_dir dir;
  std::ofstream(dir.path() / "notes.md") << "short line\n";
  auto edit = make_edit_tool();
  auto grown = call_capped(*edit,
                           R"({"file_path":"notes.md","old_string":"short","new_string":")" +
                               text_of(100) + R"("})",
                           dir.path(), 50);
  CHECK_FALSE(grown.ok);
  CHECK(grown.failure_kind == "limit_exceeded");
  CHECK(slurp(dir.path() / "notes.md") == "short line\n");
  // Shrinking is always fine, even while the workspace stays over the cap.
  auto shrunk = call_capped(
      *edit, R"({"file_path":"notes.md","old_string":"short","new_string":"shor"})", dir.path(), 5);
  CHECK(shrunk.ok);
  CHECK(slurp(dir.path() / "notes.md") == "shor line\n");
}
