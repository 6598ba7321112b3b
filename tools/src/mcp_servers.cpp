#include "troupe/tools/mcp_servers.hpp"

#include <future>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "mcp_connection.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::tools {

namespace asio = boost::asio;

namespace {

constexpr std::size_t max_tool_name = 64;

// FNV-1a, for a short stable suffix of a name that had to be cut.
std::uint32_t fnv1a(std::string_view text) {
  std::uint32_t h = 2166136261u;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

asio::awaitable<void> stop_all(std::vector<std::shared_ptr<mcp_servers::connection>> connections,
                               std::shared_ptr<std::promise<void>> done) {
  for (auto& c : connections) {
    auto stopping = c->stop();
    co_await std::move(stopping);
  }
  done->set_value();
}

asio::awaitable<void> stop_one(std::shared_ptr<mcp_servers::connection> c) {
  auto stopping = c->stop();
  co_await std::move(stopping);
}

} // namespace

std::string mcp_tool_name(std::string_view server, std::string_view tool) {
  std::string whole = std::string(server) + std::string(mcp_tool_separator) + std::string(tool);
  std::string out;
  for (const char c : whole) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out.size() > max_tool_name) {
    const auto suffix = fmt::format("_{:08x}", fnv1a(whole));
    out.resize(max_tool_name - suffix.size());
    out += suffix;
  }
  return out;
}

std::shared_ptr<mcp_servers> mcp_servers::make(mcp_servers_options options) {
  return std::make_shared<mcp_servers>(std::move(options));
}

mcp_servers::mcp_servers(mcp_servers_options options)
    : options_(std::move(options)), http_(std::make_unique<net::http_client>(options_.executor)) {}

mcp_servers::~mcp_servers() {
  if (!stopped_) {
    stop(std::chrono::seconds(5));
  }
}

void mcp_servers::apply(std::vector<mcp_server_settings> servers) {
  const std::lock_guard lock(mutex_);
  if (stopped_) {
    return;
  }
  std::vector<std::shared_ptr<connection>> kept;
  std::vector<std::shared_ptr<connection>> added;
  auto old = std::move(connections_);
  for (const auto& s : servers) {
    const auto same =
        std::find_if(old.begin(), old.end(), [&](const auto& c) { return c && c->settings == s; });
    if (same != old.end()) {
      kept.push_back(std::move(*same));
      continue;
    }
    auto c = std::make_shared<connection>(s, options_.executor, *http_, options_);
    kept.push_back(c);
    added.push_back(std::move(c));
  }
  for (auto& c : old) {
    if (!c) {
      continue;
    }
    // Removed or changed: its source goes now (runs that hold a snapshot keep its tools,
    // and their calls fail cleanly), its session once closed.
    options_.resolver->remove_source(c->source->name());
    log::info("MCP server '{}' is removed or changed: closing its connection", c->settings.name);
    asio::co_spawn(options_.executor, stop_one(c), asio::detached);
  }
  for (auto& c : added) {
    if (auto ok = options_.resolver->add_source(c->source); !ok) {
      log::error("MCP server '{}': {}", c->settings.name, ok.error().message);
    }
    c->start();
  }
  connections_ = std::move(kept);
  settings_ = std::move(servers);
}

std::vector<mcp_server_settings> mcp_servers::settings() const {
  const std::lock_guard lock(mutex_);
  return settings_;
}

std::vector<mcp_server_status> mcp_servers::status() const {
  const std::lock_guard lock(mutex_);
  std::vector<mcp_server_status> out;
  for (const auto& c : connections_) {
    out.push_back(c->status());
  }
  return out;
}

void mcp_servers::stop(std::chrono::milliseconds grace) {
  std::vector<std::shared_ptr<connection>> connections;
  {
    const std::lock_guard lock(mutex_);
    if (stopped_) {
      return;
    }
    stopped_ = true;
    connections = std::move(connections_);
    connections_.clear();
  }
  for (const auto& c : connections) {
    options_.resolver->remove_source(c->source->name());
  }
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  asio::co_spawn(options_.executor, stop_all(std::move(connections), done), asio::detached);
  if (finished.wait_for(grace) != std::future_status::ready) {
    log::warn("MCP servers: not every connection closed within {} ms", grace.count());
    // Transfers may still use the client: it is left to the process's end.
    (void)http_.release();
    release_executor();
    return;
  }
  // The client belongs to the executor: it goes there.
  auto client = std::make_shared<std::unique_ptr<net::http_client>>(std::move(http_));
  auto released = std::make_shared<std::promise<void>>();
  auto gone = released->get_future();
  asio::post(options_.executor, [client, released] {
    client->reset();
    released->set_value();
  });
  if (gone.wait_for(grace) != std::future_status::ready) {
    log::warn("MCP servers: the HTTP client was not released within {} ms", grace.count());
  }
  release_executor();
}

void mcp_servers::release_executor() {
  // The executor is a strand of an io_context that may be destroyed before this object
  // (a node's shards go before its last reference to the servers): once stopped, nothing
  // here runs on it, so its reference goes now, while the io_context still exists.
  const std::lock_guard lock(mutex_);
  options_.executor = boost::asio::any_io_executor();
}

} // namespace troupe::tools
