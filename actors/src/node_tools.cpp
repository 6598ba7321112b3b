// The node's custom tools and web tools (issue 18): the declared ones checked and written
// at start, the `custom` and `web` tool sources built from the tables, and the tools
// facade through which the API changes them while the node runs.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "node_impl.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/custom_tools.hpp"
#include "troupe/tools/custom_tools.hpp"
#include "troupe/tools/web_tools.hpp"

namespace troupe::actors {

namespace {

// Names a custom tool may not take: every tool troupe brings itself.
std::vector<std::string> reserved_tool_names() {
  auto names = tools::known_tool_names();
  for (auto& name : tools::memory_tool_names()) {
    names.push_back(std::move(name));
  }
  names.emplace_back("web_search");
  names.emplace_back("web_fetch");
  return names;
}

/// The tools facade over the node's custom tool set and search engines.
class node_tools_facade final : public tools_facade {
public:
  node_tools_facade(std::shared_ptr<tools::custom_tool_set> custom,
                    std::shared_ptr<tools::search_engine_catalog> engines,
                    std::shared_ptr<const tools::web_tool_options> web,
                    std::function<net::http_client*()> client_here)
      : custom_(std::move(custom)), engines_(std::move(engines)), web_(std::move(web)),
        client_here_(std::move(client_here)) {}

  expected<void> check_tool(const custom_tool_settings& tool) const override {
    return custom_->check(tool);
  }
  expected<void> install_tool(const custom_tool_settings& tool) override {
    auto version = custom_->install(tool);
    if (!version) {
      return tl::unexpected(version.error());
    }
    log::info("custom tool '{}' installed (tool source 'custom' at version {})", tool.name,
              *version);
    return {};
  }
  void remove_tool(const std::string& name) override {
    if (custom_->remove(name)) {
      log::info("custom tool '{}' removed", name);
    }
  }
  void set_search_engines(std::vector<search_engine_settings> engines) override {
    engines_->set(std::move(engines));
  }
  asio::awaitable<expected<std::string>> test_search(search_engine_settings engine,
                                                     std::string query, unsigned limit) override {
    return run_test(web_, client_here_(), std::move(engine), std::move(query), limit);
  }

private:
  static asio::awaitable<expected<std::string>>
  run_test(std::shared_ptr<const tools::web_tool_options> web, net::http_client* http,
           search_engine_settings engine, std::string query, unsigned limit) {
    if (http == nullptr) {
      co_return fail(errc::unavailable, "no HTTP client is running");
    }
    auto key = tools::search_engine_key(engine, *web);
    if (!key) {
      co_return tl::unexpected(key.error());
    }
    // On the client's own executor (a strand off the shards), then back here.
    auto searching =
        asio::co_spawn(http->get_executor(),
                       tools::search_once(*http, std::move(engine), std::move(*key),
                                          std::move(query), limit, web->web.search_timeout),
                       asio::use_awaitable);
    auto hits = co_await std::move(searching);
    if (!hits) {
      co_return tl::unexpected(hits.error());
    }
    json_writer w;
    w.begin_array();
    for (const auto& h : *hits) {
      w.begin_object().key("title").value(h.title).key("url").value(h.url);
      w.key("snippet").value(h.snippet).end_object();
    }
    w.end_array();
    co_return std::move(w).str();
  }

  std::shared_ptr<tools::custom_tool_set> custom_;
  std::shared_ptr<tools::search_engine_catalog> engines_;
  std::shared_ptr<const tools::web_tool_options> web_;
  std::function<net::http_client*()> client_here_;
};

} // namespace

std::vector<std::string> node::impl::extension_tool_names() const {
  std::vector<std::string> names = {"web_search", "web_fetch"};
  for (const auto& t : config.custom_tools) {
    names.push_back(t.name);
  }
  return names;
}

expected<void> node::impl::check_declared_tools() const {
  auto environment = std::make_shared<tools::custom_tool_environment>();
  environment->key_env = key_env_policy(config.secrets.allowed_env);
  const tools::custom_tool_set probe(std::move(environment), reserved_tool_names());
  for (const auto& t : config.custom_tools) {
    if (auto ok = probe.check(t); !ok) {
      return ok;
    }
  }
  return {};
}

expected<void> node::impl::sync_declared_tools(storage::connection& writer) {
  // The agents a declared tool names must exist: the declared ones were written just
  // before, and agents made over the API are in the table too.
  for (const auto& t : config.custom_tools) {
    for (const auto& agent : t.agents) {
      if (!storage::find_agent_by_name(writer, agent)) {
        return fail(errc::invalid_argument,
                    fmt::format("tool '{}': agents: no agent is named '{}'", t.name, agent));
      }
    }
  }
  auto tools_written = storage::sync_declared_custom_tools(writer, config.custom_tools);
  if (!tools_written) {
    return tl::unexpected(tools_written.error());
  }
  auto engines_written = storage::sync_declared_search_engines(writer, config.search_engines);
  if (!engines_written) {
    return tl::unexpected(engines_written.error());
  }
  if (*tools_written > 0 || *engines_written > 0) {
    log::info("config: {} custom tool(s) and {} search engine(s) declared", *tools_written,
              *engines_written);
  }
  return {};
}

expected<void> node::impl::start_extension_tools(tools::tool_resolver& resolver) {
  const key_env_policy policy(config.secrets.allowed_env);
  auto environment = environment_snapshot();

  auto custom_env = std::make_shared<tools::custom_tool_environment>();
  custom_env->environment = environment;
  custom_env->key_env = policy;
  custom_env->pool = blocking;
  custom_tools = std::make_shared<tools::custom_tool_set>(custom_env, reserved_tool_names());
  auto stored =
      db_reads->with([](storage::connection& c) { return storage::list_custom_tools(c); });
  if (!stored) {
    return tl::unexpected(stored.error());
  }
  for (auto& t : *stored) {
    // A stored tool that no longer builds (a variable no longer allowed) is left out, not
    // the node: the log says why, and the API can fix or delete it.
    const auto name = t.name;
    if (auto installed = custom_tools->install(std::move(t)); !installed) {
      log::warn("custom tool '{}' is left out: {}", name, installed.error().message);
    }
  }

  search_engines = std::make_shared<tools::search_engine_catalog>();
  auto engines = db_reads->with(
      [](storage::connection& c) { return storage::list_search_engine_settings(c); });
  if (!engines) {
    return tl::unexpected(engines.error());
  }
  search_engines->set(std::move(*engines));

  auto web = std::make_shared<tools::web_tool_options>();
  web->web = config.web;
  web->engines = search_engines;
  web->environment = std::move(environment);
  web->key_env = policy;

  if (auto added = resolver.add_source(custom_tools->source()); !added) {
    return added;
  }
  if (auto added = resolver.add_source(tools::make_web_tool_source(web)); !added) {
    return added;
  }
  tools_api = std::make_shared<node_tools_facade>(
      custom_tools, search_engines, web, [this]() -> net::http_client* {
        // The calling shard's client; off the shards (or without them), the node's own.
        if (!shard_http.empty()) {
          const auto here = shard_set::current();
          return here && *here < shard_http.size() ? shard_http[*here].get()
                                                   : shard_http.front().get();
        }
        return http.get();
      });
  return {};
}

} // namespace troupe::actors
