#pragma once

// Private to bench/load: OpenClaw's gateway for the channel scenario, started through
// bench/peers/openclaw/channel.mjs (which writes its config, starts `openclaw gateway run` on
// Node 24 and stops it when its stdin closes or it gets SIGTERM).

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include <boost/json/object.hpp>

#include "troupe/runtime/error.hpp"

namespace troupe::bench::detail {

struct openclaw_options {
  /// The directory holding openclaw/ (bench/peers): `--peers` of the channel scenario.
  std::filesystem::path peers_dir;
  /// mock-llm's /v1 URL, the Bot API fake's root and the bot token it accepts.
  std::string mock_base_url;
  std::string api_root;
  std::string bot_token;
  /// How long the gateway may take to start (40-160 s on the shared 2 cores).
  std::chrono::milliseconds start_timeout{600'000};
};

class openclaw_gateway {
public:
  /// Runs channel.mjs with `node` from PATH and waits for its `openclaw-ready {…}` line.
  static expected<std::unique_ptr<openclaw_gateway>> start(const openclaw_options& options);
  ~openclaw_gateway();
  openclaw_gateway(const openclaw_gateway&) = delete;
  openclaw_gateway& operator=(const openclaw_gateway&) = delete;

  /// The gateway process (its helpers are its children); the node helper is its parent.
  pid_t gateway_pid() const noexcept {
    return gateway_pid_;
  }
  /// What channel.mjs reported: pid, startup_ms, versions, config.
  const boost::json::object& ready() const noexcept {
    return ready_;
  }
  /// SIGTERM to channel.mjs (which stops the gateway), then SIGKILL to whatever of the tree
  /// is left after `limit`. The temporary directory (log) is removed.
  void stop(std::chrono::milliseconds limit = std::chrono::seconds(60));
  std::string log_tail() const;

private:
  openclaw_gateway() = default;

  pid_t helper_pid_ = -1;
  /// The helper's stdin: closing it also tells it to stop.
  int stdin_fd_ = -1;
  pid_t gateway_pid_ = -1;
  boost::json::object ready_;
  std::filesystem::path dir_;
  std::filesystem::path log_path_;
  bool stopped_ = false;
};

} // namespace troupe::bench::detail
