#pragma once

// Runs a tool call the way a run does, on a test-local io_context with net's HTTP client
// (the shard's client in a node), and a loopback server whose routes record what they got.

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "support/fake_platform.hpp"
#include "support/run_until_done.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/tools/sandbox.hpp"
#include "troupe/tools/tool.hpp"

namespace troupe::test {

/// One call of `tool` with `arguments`; `workspace` and `sandbox` as a run gives them.
inline tools::tool_result call_tool(const tools::tool& tool, std::string arguments,
                                    const std::filesystem::path& workspace = {},
                                    const tools::sandbox_runner* sandbox = nullptr) {
  asio::io_context io;
  net::http_client http(io.get_executor());
  tools::tool_context ctx;
  ctx.workspace = workspace;
  ctx.run_id = "run-1";
  ctx.call_id = "call-1";
  ctx.sandbox = sandbox;
  ctx.http = &http;
  return run_until_done(io, tool.invoke(std::move(arguments), std::move(ctx)));
}

/// How long `f()` took.
template <class F> std::chrono::milliseconds timed(F f) {
  const auto started = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               started);
}

} // namespace troupe::test
