// The whole HTTP layer of a node: the system routes, then each /api/v1 resource, then the
// OpenAI-compatible endpoint, over the services the node hands over.

#include "troupe/api/routes.hpp"

#include "console.hpp"
#include "lifecycle.hpp"
#include "state.hpp"
#include "troupe/api/files.hpp"
#include "troupe/api/system.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::api {

expected<void> add_routes(net::router& routes, const actors::node_services& services) {
  const auto& config = *services.config;
  auto secret = load_link_secret(config.data_dir);
  if (!secret) {
    return tl::unexpected(secret.error());
  }
  auto state = std::make_shared<api_state>();
  state->reads = services.reads;
  state->catalog = services.catalog;
  state->store = services.store;
  state->chat = services.chat;
  state->channels = services.channels;
  state->memory = services.memory;
  state->tools = services.tools;
  state->skills = services.skills;
  state->approvals = services.approvals;
  state->config = config.api;
  state->history_messages = config.actors.history_messages;
  state->history_max_tokens = config.actors.history_max_tokens;
  state->declared_providers = config.providers;
  state->data_dir = config.data_dir;
  state->link_secret = std::move(*secret);
  state->secrets = services.secrets;
  state->key_env = key_env_policy(config.secrets.allowed_env);
  state->limiter =
      std::make_shared<rate_limiter>(config.api.rate_per_second, config.api.rate_burst);
  state->address_limits = std::make_shared<address_limiter>(
      config.api.unauthenticated_rate_per_second, config.api.unauthenticated_rate_burst,
      config.api.unauthenticated_max_addresses);
  state->demo = services.demo;
  state->run_blocking = services.run_blocking;
  state->mcp = services.mcp;

  system_route_context system_context;
  system_context.health = services.health;
  system_context.metrics = services.metrics;
  system_context.guard = [state](net::route_handler h) {
    return guard(
        state, api_access::chat,
        [h = std::move(h)](net::request_context& ctx, const api_caller&) { return h(ctx); });
  };
  system_context.metrics_open = config.api.open_metrics;
  add_system_routes(routes, std::move(system_context));
  add_console_routes(routes);

  route_table table(routes, state);
  add_user_routes(table);
  add_token_routes(table);
  add_agent_routes(table);
  add_provider_routes(table);
  add_conversation_routes(table);
  add_file_routes(table);
  add_chat_routes(table);
  add_run_routes(table);
  add_openai_routes(table);
  add_memory_routes(table);
  add_channel_routes(table);
  add_tool_routes(table);
  add_skill_routes(table);
  add_approval_routes(table);
  add_search_engine_routes(table);
  add_mcp_routes(table);
  add_mcp_endpoint(table);
  if (services.background) {
    start_ephemeral_expiry(state, services.background);
  }
  return {};
}

expected<void> prepare_storage(storage::connection& writer, const settings& config) {
  auto admin = bootstrap_admin(writer, config.data_dir);
  if (!admin) {
    return tl::unexpected(admin.error());
  }
  if (*admin) {
    log::warn("created an admin token; it is in {} (readable only by this user)",
              (*admin)->string());
  }
  return {};
}

actors::node_frontend frontend() {
  return {prepare_storage, add_routes};
}

} // namespace troupe::api
