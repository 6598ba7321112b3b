#pragma once

// Calling file tools the way the hostile-workspace tests do: each call on a thread of its
// own with a time limit (a call that hangs on a FIFO is freed and reported), and every
// file tool pointed at one path. Used by tests/tools/hostile_files_test.cpp and the
// cases of tests/tools/may_skip/ that need a device node.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/workspace.hpp"

namespace troupe::test {

namespace hostile {

using namespace troupe::tools;
using namespace std::chrono_literals;
namespace asio = boost::asio;

inline const sandbox_runner& shared_sandbox() {
  static const sandbox_runner sandbox;
  return sandbox;
}

inline tool_result call_now(const tool& t, const std::string& args, const std::filesystem::path& ws,
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
inline tool_result call_within(const tool& t, const std::string& args,
                               const std::filesystem::path& ws,
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

inline void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

inline std::string with_path(std::string_view key, std::string_view path,
                             std::string_view more = {}) {
  json_writer w;
  w.begin_object().key(key).value(path);
  if (!more.empty()) {
    w.key("pattern").value(more);
  }
  w.end_object();
  return std::move(w).str();
}

// Every file tool pointed at `name`; each must refuse it saying what it is.
inline void every_tool_refuses(const std::filesystem::path& ws, const std::string& name,
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

} // namespace hostile

} // namespace troupe::test
