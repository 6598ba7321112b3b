#include "mcp_connection.hpp"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "troupe/net/mcp/http_transport.hpp"
#include "troupe/net/mcp/stdio_transport.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::tools {

namespace asio = boost::asio;
namespace mcp = net::mcp;
using std::chrono::steady_clock;

namespace {

// A session that stayed up this long resets the restart back-off.
constexpr auto stable_uptime = std::chrono::minutes(1);
// How long a call waits for a server that is (re)starting.
constexpr auto ready_wait = std::chrono::seconds(30);
// The most text of one result a model is given.
constexpr std::size_t max_result_bytes = 64 * 1024;

/// One tool of a server, as agents call it.
class mcp_tool final : public tool {
public:
  mcp_tool(std::weak_ptr<mcp_servers::connection> owner, tool_descriptor descriptor,
           std::string mcp_name)
      : owner_(std::move(owner)), descriptor_(std::move(descriptor)),
        mcp_name_(std::move(mcp_name)) {}

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }

  asio::awaitable<tool_result> invoke(std::string arguments, tool_context) const override {
    auto owner = owner_.lock();
    if (!owner) {
      co_return tool_failure("tool_error",
                             fmt::format("the MCP server of '{}' was removed", descriptor_.name));
    }
    // To the MCP executor and back; the caller's cancellation goes along.
    auto executor = owner->executor;
    auto calling = asio::co_spawn(
        executor, mcp_servers::connection::call(std::move(owner), mcp_name_, std::move(arguments)),
        asio::use_awaitable);
    co_return co_await std::move(calling);
  }

private:
  std::weak_ptr<mcp_servers::connection> owner_;
  tool_descriptor descriptor_;
  std::string mcp_name_;
};

std::string capped(std::string text) {
  if (text.size() > max_result_bytes) {
    const auto dropped = text.size() - max_result_bytes;
    text.resize(max_result_bytes);
    text += fmt::format("\n[troupe: result truncated; {} more bytes were dropped]", dropped);
  }
  return text;
}

} // namespace

mcp_tool_source::mcp_tool_source(std::string server, std::vector<std::string> agents)
    : tools_("mcp:" + server), agents_(std::move(agents)) {}

tool_grant mcp_tool_source::grant_for(std::string_view agent) const {
  if (agents_.empty()) {
    return tool_grant::by_agent_list;
  }
  return std::find(agents_.begin(), agents_.end(), agent) != agents_.end() ? tool_grant::granted
                                                                           : tool_grant::denied;
}

mcp_servers::connection::connection(mcp_server_settings s, asio::any_io_executor ex,
                                    net::http_client& http, const mcp_servers_options& options)
    : settings(std::move(s)),
      source(std::make_shared<mcp_tool_source>(settings.name, settings.agents)),
      executor(std::move(ex)), http_(http), options_(options),
      changed_(std::make_shared<asio::steady_timer>(executor, steady_clock::time_point::max())) {
  status_.name = settings.name;
  status_.state = settings.enabled ? "connecting" : "disabled";
}

void mcp_servers::connection::start() {
  if (!settings.enabled) {
    return;
  }
  asio::co_spawn(executor, supervise(shared_from_this()), asio::detached);
}

mcp_server_status mcp_servers::connection::status() const {
  const std::lock_guard lock(mutex_);
  return status_;
}

void mcp_servers::connection::set_state(std::string state, std::string error) {
  const std::lock_guard lock(mutex_);
  status_.state = std::move(state);
  status_.error = std::move(error);
}

void mcp_servers::connection::wake_all() {
  changed_->cancel();
  changed_ = std::make_shared<asio::steady_timer>(executor, steady_clock::time_point::max());
}

std::shared_ptr<mcp::client> mcp_servers::connection::make_client() {
  std::shared_ptr<mcp::transport> transport;
  if (settings.url.empty()) {
    mcp::stdio_options stdio;
    stdio.name = settings.name;
    stdio.argv.push_back(settings.command);
    stdio.argv.insert(stdio.argv.end(), settings.args.begin(), settings.args.end());
    stdio.env = settings.env;
    transport = mcp::make_stdio_transport(executor, std::move(stdio));
  } else {
    mcp::http_options http;
    http.name = settings.name;
    http.url = settings.url;
    for (const auto& [k, v] : settings.headers) {
      http.headers.push_back({k, v});
    }
    transport = mcp::make_http_transport(http_, std::move(http));
  }
  mcp::client_options options;
  options.name = settings.name;
  options.identity.version = options_.client_version;
  options.elicitation = settings.elicitation == "defaults"
                            ? mcp::elicitation_policy::accept_defaults
                            : mcp::elicitation_policy::decline;
  // The callbacks hold this connection and the client weakly (the client holds them);
  // an event of a client that was replaced meanwhile is ignored.
  auto made = std::make_shared<std::weak_ptr<mcp::client>>();
  std::weak_ptr<connection> weak = weak_from_this();
  options.on_tools_changed = [weak, made] {
    auto self = weak.lock();
    auto c = made->lock();
    if (self && c && self->client_ == c) {
      asio::co_spawn(self->executor, refresh(self, c), asio::detached);
    }
  };
  options.on_closed = [weak, made](const error&) {
    auto self = weak.lock();
    auto c = made->lock();
    if (self && c && self->client_ == c) {
      self->wake_all(); // the supervisor restarts it
    }
  };
  auto client = mcp::client::make(executor, std::move(transport), std::move(options));
  *made = client;
  return client;
}

expected<void> mcp_servers::connection::publish(const std::vector<mcp::tool_info>& tools) {
  std::vector<std::shared_ptr<const tool>> offered;
  std::map<std::string, std::string> names;
  std::vector<std::string> listed;
  for (const auto& t : tools) {
    auto name = mcp_tool_name(settings.name, t.name);
    if (!names.emplace(name, t.name).second) {
      log::warn("MCP server '{}': tool '{}' is offered as '{}', which another of its tools "
                "already is; it is left out",
                settings.name, t.name, name);
      continue;
    }
    tool_descriptor d;
    d.name = name;
    d.description = t.description.empty() ? t.title : t.description;
    if (d.description.empty()) {
      d.description = fmt::format("The tool '{}' of MCP server '{}'", t.name, settings.name);
    }
    d.input_schema = t.input_schema;
    d.concurrency_safe = t.read_only;
    listed.push_back(name);
    offered.push_back(std::make_shared<mcp_tool>(weak_from_this(), std::move(d), t.name));
  }
  auto replaced = source->replace(std::move(offered));
  if (!replaced) {
    return tl::unexpected(replaced.error());
  }
  mcp_names_ = std::move(names);
  const std::lock_guard lock(mutex_);
  status_.tools = std::move(listed);
  return {};
}

asio::awaitable<void> mcp_servers::connection::refresh(std::shared_ptr<connection> self,
                                                       std::shared_ptr<mcp::client> client) {
  // Awaitables are named: GCC 12 destroys some temporaries of a co_await twice.
  auto listing = client->list_tools();
  auto listed = co_await std::move(listing);
  if (self->client_ != client) {
    co_return;
  }
  if (!listed) {
    log::warn("MCP server '{}': its tools changed, but listing them failed: {}",
              self->settings.name, listed.error().message);
    co_return;
  }
  if (auto published = self->publish(*listed); !published) {
    log::warn("MCP server '{}': {}", self->settings.name, published.error().message);
    co_return;
  }
  log::info("MCP server '{}': its tools changed; {} offered now", self->settings.name,
            listed->size());
}

asio::awaitable<void> mcp_servers::connection::supervise(std::shared_ptr<connection> self) {
  auto backoff = self->options_.first_backoff;
  bool ever_ready = false;
  while (!self->stopping_) {
    auto client = self->make_client();
    self->client_ = client;
    std::string why;
    auto connecting = client->connect();
    auto connected = co_await std::move(connecting);
    if (connected && !self->stopping_) {
      auto listing = client->list_tools();
      auto listed = co_await std::move(listing);
      if (listed && !self->stopping_) {
        auto published = self->publish(*listed);
        if (!published) {
          why = published.error().message;
        } else {
          {
            const std::lock_guard lock(self->mutex_);
            self->status_.state = "ready";
            self->status_.error.clear();
            self->status_.protocol_version = connected->protocol_version;
            self->status_.server_name = connected->name;
            self->status_.server_version = connected->version;
            self->status_.pid = client->process_id();
          }
          log::info("MCP server '{}' is ready: {} tool(s)", self->settings.name, listed->size());
          ever_ready = true;
          const auto up_since = steady_clock::now();
          self->wake_all(); // calls waiting for it go on
          // Until it dies or the connection stops.
          while (client->is_open() && !self->stopping_) {
            auto changed = self->changed_;
            co_await changed->async_wait(asio::as_tuple(asio::use_awaitable));
          }
          if (self->stopping_) {
            break;
          }
          if (steady_clock::now() - up_since >= stable_uptime) {
            backoff = self->options_.first_backoff;
          }
          why = "the server went away";
        }
      } else if (!listed) {
        why = listed.error().message;
      }
    } else if (!connected) {
      why = connected.error().message;
    }
    auto closing = client->close();
    co_await std::move(closing);
    if (self->stopping_) {
      break;
    }
    {
      const std::lock_guard lock(self->mutex_);
      self->status_.state = ever_ready ? "restarting" : "failed";
      self->status_.error = why;
      self->status_.pid = 0;
      ++self->status_.restarts;
    }
    log::warn("MCP server '{}': {}; connecting again in {} ms", self->settings.name, why,
              backoff.count());
    self->wake_all();
    asio::steady_timer pause(self->executor, backoff);
    auto changed = self->changed_;
    {
      using namespace asio::experimental::awaitable_operators;
      co_await (pause.async_wait(asio::as_tuple(asio::use_awaitable)) ||
                changed->async_wait(asio::as_tuple(asio::use_awaitable)));
    }
    backoff = std::min(backoff * 2, self->options_.max_backoff);
  }
  if (self->client_) {
    auto closing = self->client_->close();
    co_await std::move(closing);
  }
  self->stopped_ = true;
  self->set_state("stopped");
  self->wake_all();
}

asio::awaitable<void> mcp_servers::connection::stop() {
  auto self = shared_from_this();
  stopping_ = true;
  wake_all();
  if (!settings.enabled) {
    co_return;
  }
  // The supervisor closes the session; wait for it (its close has deadlines).
  while (!stopped_) {
    auto changed = changed_;
    co_await changed->async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<bool> mcp_servers::connection::wait_ready(steady_clock::time_point deadline) {
  using namespace asio::experimental::awaitable_operators;
  while (!(client_ && client_->is_open() && status().state == "ready")) {
    if (stopping_ || !settings.enabled || steady_clock::now() >= deadline) {
      co_return false;
    }
    auto changed = changed_;
    asio::steady_timer limit(executor, deadline);
    co_await (changed->async_wait(asio::as_tuple(asio::use_awaitable)) ||
              limit.async_wait(asio::as_tuple(asio::use_awaitable)));
    const auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      co_return false;
    }
  }
  co_return true;
}

asio::awaitable<tool_result> mcp_servers::connection::call(std::shared_ptr<connection> self,
                                                           std::string tool,
                                                           std::string arguments) {
  co_await asio::this_coro::throw_if_cancelled(false);
  const auto limit = std::chrono::milliseconds(std::chrono::seconds(self->settings.timeout_s));
  const auto start = steady_clock::now();
  if (!co_await self->wait_ready(start + std::min<steady_clock::duration>(ready_wait, limit))) {
    const auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      co_return tool_failure("cancelled", "the call was cancelled");
    }
    const auto st = self->status();
    co_return tool_failure("tool_error",
                           fmt::format("MCP server '{}' is not available ({}{}); try again later",
                                       self->settings.name, st.state,
                                       st.error.empty() ? "" : ": " + st.error));
  }
  auto client = self->client_;
  {
    const std::lock_guard lock(self->mutex_);
    ++self->status_.calls_in_flight;
    ++self->status_.calls_total;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(limit - (steady_clock::now() - start));
  mcp::progress_callback on_progress = [name = self->settings.name,
                                        tool](const mcp::progress_update& u) {
    log::debug("MCP server '{}': {} progress {}{}{}", name, tool, u.progress,
               u.total ? fmt::format("/{}", *u.total) : "",
               u.message.empty() ? "" : " " + u.message);
  };
  auto calling =
      client->call_tool(tool, std::move(arguments), std::max(left, std::chrono::milliseconds(1)),
                        self->options_.max_call_time, std::move(on_progress));
  auto outcome = co_await std::move(calling);
  {
    const std::lock_guard lock(self->mutex_);
    --self->status_.calls_in_flight;
  }
  if (outcome) {
    if (outcome->is_error) {
      co_return tool_failure("tool_error", capped(std::move(outcome->text)));
    }
    tool_result r;
    r.content = capped(std::move(outcome->text));
    co_return r;
  }
  const auto& e = outcome.error();
  switch (e.code) {
    case errc::timeout:
      co_return tool_failure("timeout", e.message);
    case errc::cancelled:
      co_return tool_failure("cancelled", e.message);
    case errc::invalid_argument:
      co_return tool_failure("invalid_arguments", e.message);
    case errc::permission_denied:
      co_return tool_failure("permission_denied", e.message);
    case errc::unavailable:
      if (!client->is_open() && self->settings.url.empty()) {
        co_return tool_failure("tool_error",
                               fmt::format("{}; troupe restarts the server, try again", e.message));
      }
      co_return tool_failure("tool_error", e.message);
    default:
      co_return tool_failure("tool_error", e.message);
  }
}

} // namespace troupe::tools
