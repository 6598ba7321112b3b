// Whether the sandbox's uid can reach a workspace depends on who troupe runs as: as root
// the sandbox drops to another uid, which a private (0700) parent keeps out; as any other
// user it runs as that user, who reaches its own files. Each case needs one of the two
// and is reported as skipped (ctest's SKIP_RETURN_CODE) under the other, never as passed.

#include <unistd.h>

#include <filesystem>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "support/skip.hpp"
#include "support/troupe_process.hpp"
#include "troupe/tools/sandbox.hpp"

using namespace troupe::tools;
namespace asio = boost::asio;

namespace {

sandbox_result bash(const std::string& script, const std::filesystem::path& ws) {
  asio::io_context io;
  sandbox_runner runner;
  sandbox_result result;
  result.exit_code = -1;
  sandbox_request request{{"/usr/bin/bash", "-c", script}, ws, {}, {}, {}};
  asio::co_spawn(io, runner.run(std::move(request)),
                 [&result](std::exception_ptr ep, sandbox_result r) {
                   if (ep) {
                     std::rethrow_exception(ep);
                   }
                   result = std::move(r);
                 });
  io.run();
  return result;
}

} // namespace

TEST_CASE("the sandbox's uid must be able to reach a workspace, and troupe says when not",
          "[tools][sandbox]") {
  if (::geteuid() != 0) {
    troupe::test::skip_test("not root: the sandbox runs as troupe's own user, which reaches "
                            "its own files, so there is no refusal to check");
  }
  troupe::test::temp_dir top;
  const auto ws = top.path() / "data" / "workspaces";
  std::filesystem::create_directories(ws);
  std::filesystem::permissions(top.path(), std::filesystem::perms::owner_all);
  auto closed = check_sandbox_reach(ws);
  REQUIRE_FALSE(closed);
  CHECK(closed.error().code == troupe::errc::permission_denied);
  CHECK_THAT(closed.error().message,
             Catch::Contains(top.path().string()) && Catch::Contains("chmod o+x"));
  // With search allowed the workspace is reachable, and sandboxed code runs in it.
  std::filesystem::permissions(top.path(), std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  CHECK(check_sandbox_reach(ws));
  auto r = bash("echo reached > here.txt", ws);
  CHECK(r.exit_code == 0);
  CHECK(std::filesystem::exists(ws / "here.txt"));
}

TEST_CASE("not as root, the sandbox reaches a workspace under the user's private parent",
          "[tools][sandbox]") {
  if (::geteuid() == 0) {
    troupe::test::skip_test("root: the sandbox drops to another uid, which the private "
                            "parent keeps out (the case above)");
  }
  troupe::test::temp_dir top;
  const auto ws = top.path() / "data" / "workspaces";
  std::filesystem::create_directories(ws);
  std::filesystem::permissions(top.path(), std::filesystem::perms::owner_all);
  CHECK(check_sandbox_reach(ws));
}
