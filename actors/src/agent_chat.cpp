#include "troupe/actors/agent_chat.hpp"

#include <algorithm>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/actors/run.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/net/provider_wire.hpp"
#include "troupe/storage/catalog_sync.hpp"
#include "troupe/storage/data_dir.hpp"
#include "troupe/storage/database.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/tools/builtin_tools.hpp"
#include "troupe/tools/control_tools.hpp"
#include "troupe/tools/custom_tools.hpp"
#include "troupe/tools/tool_resolver.hpp"
#include "troupe/tools/web_tools.hpp"

namespace troupe::actors {

namespace {

/// What the printer has shown, so that the final answer is not printed twice.
struct printed {
  std::mutex mutex;
  std::string candidate;
  bool ended = false;
};

void write_out(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

/// Prints candidate text to stdout and everything else, briefly, to stderr.
run_event_sink::behavior_type printer(homed<run_event_sink::base>* /*self*/,
                                      std::shared_ptr<printed> shown) {
  return {[shown](event_atom, run_event& e) {
    std::lock_guard lock(shown->mutex);
    switch (e.type) {
      case run_event_type::model_delta: {
        simdjson::dom::parser parser;
        simdjson::padded_string buffer(e.data_json);
        simdjson::dom::element root;
        std::string_view text;
        if (parser.parse(buffer).get(root) != simdjson::SUCCESS ||
            root["text"].get_string().get(text) != simdjson::SUCCESS) {
          return;
        }
        shown->candidate += text;
        write_out(text);
        break;
      }
      case run_event_type::model_correction:
        shown->candidate.clear();
        fmt::print(stderr, "\n[correction] the answer above was rejected by the harness: {}\n",
                   e.data_json);
        break;
      case run_event_type::run_completed:
      case run_event_type::run_failed:
      case run_event_type::run_cancelled:
        shown->ended = true;
        fmt::print(stderr, "[{}]\n", e.type_name());
        break;
      default:
        fmt::print(stderr, "[{}] {}\n", e.type_name(), e.data_json);
        break;
    }
  }};
}

/// The rows a CLI run is stored under: user "cli", the declared agent (synced by name),
/// a new conversation and a queued run.
struct stored_run {
  storage::row_id conversation = 0;
  storage::row_id run = 0;
  std::string uuid;
};

expected<stored_run> prepare_rows(storage::connection& c, const agent_settings& agent,
                                  const std::vector<provider_settings>& providers,
                                  const std::vector<agent_settings>& agents) {
  stored_run out;
  auto user = storage::find_user_by_name(c, "cli");
  storage::row_id user_id = 0;
  if (user) {
    user_id = user->id;
  } else {
    storage::user_record u;
    u.name = "cli";
    auto id = storage::insert_user(c, u);
    if (!id) {
      return tl::unexpected(id.error());
    }
    user_id = *id;
  }
  // The declared catalog, synced by name exactly as `troupe serve` does at start.
  if (auto synced = storage::sync_declared_catalog(c, providers, agents); !synced) {
    return tl::unexpected(synced.error());
  }
  auto stmt = c.prepare("SELECT id FROM agents WHERE name = ? ORDER BY id LIMIT 1");
  if (!stmt) {
    return tl::unexpected(stmt.error());
  }
  if (auto bound = stmt->bind_all(agent.name); !bound) {
    return tl::unexpected(bound.error());
  }
  auto row = stmt->step();
  if (!row || !*row) {
    return fail(errc::not_found, fmt::format("agent '{}' is not in the database", agent.name));
  }
  const storage::row_id agent_id = stmt->int64(0);
  const auto now = unix_millis_now();
  storage::conversation_record conversation;
  conversation.uuid = fmt::format("cli-{}", now);
  conversation.owner_user_id = user_id;
  conversation.agent_id = agent_id;
  auto conversation_id = storage::insert_conversation(c, conversation);
  if (!conversation_id) {
    return tl::unexpected(conversation_id.error());
  }
  storage::run_record run;
  out.uuid = fmt::format("cli-run-{}", now);
  run.uuid = out.uuid;
  run.conversation_id = *conversation_id;
  run.agent_id = agent_id;
  run.model = agent.model;
  run.created_at = now;
  auto run_id = storage::insert_run(c, run);
  if (!run_id) {
    return tl::unexpected(run_id.error());
  }
  out.conversation = *conversation_id;
  out.run = *run_id;
  return out;
}

} // namespace

int run_agent_chat(agent_chat_options options) {
  const auto& config = options.config;
  auto agent = std::find_if(config.agents.begin(), config.agents.end(),
                            [&](const agent_settings& a) { return a.name == options.agent; });
  if (agent == config.agents.end()) {
    fmt::print(stderr, "troupe chat: no agent named '{}' in the config\n", options.agent);
    return 2;
  }
  auto provider =
      std::find_if(config.providers.begin(), config.providers.end(),
                   [&](const provider_settings& p) { return p.name == agent->provider; });
  if (provider == config.providers.end()) {
    fmt::print(stderr, "troupe chat: agent '{}' names unknown provider '{}'\n", agent->name,
               agent->provider);
    return 2;
  }
  {
    // Unknown providers, models or tools are start-up errors naming the agent.
    auto known = tools::known_tool_names();
    // Issue 18: the web tools and the file's custom tools (below) are offered here too.
    known.insert(known.end(), {"web_search", "web_fetch"});
    for (const auto& t : config.custom_tools) {
      known.push_back(t.name);
    }
    if (auto valid = validate_agents(config.providers, config.agents, known); !valid) {
      fmt::print(stderr, "troupe chat: {}\n", valid.error().message);
      return 2;
    }
  }
  auto type = net::parse_provider_type(provider->type);
  if (!type) {
    fmt::print(stderr, "troupe chat: provider '{}': {}\n", provider->name, type.error().message);
    return 2;
  }
  net::provider_config provider_config;
  provider_config.type = *type;
  provider_config.base_url =
      provider->base_url.empty() ? std::string(net::default_base_url(*type)) : provider->base_url;
  provider_config.api_key =
      provider->resolve_api_key(environment_snapshot(), key_env_policy(config.secrets.allowed_env));

  auto workspace =
      options.workspace.empty() ? config.data_dir / "workspaces" / agent->name : options.workspace;
  std::error_code ec;
  std::filesystem::create_directories(workspace, ec);
  if (ec) {
    fmt::print(stderr, "troupe chat: cannot create the workspace {}: {}\n", workspace.string(),
               ec.message());
    return 2;
  }
  auto resolver = tools::make_builtin_tool_resolver();
  {
    // Issue 18: the custom tools and search engines the file declares (this command has
    // no database: what the API made is not here), and the web tools.
    const key_env_policy policy(config.secrets.allowed_env);
    auto environment = std::make_shared<tools::custom_tool_environment>();
    environment->environment = environment_snapshot();
    environment->key_env = policy;
    tools::custom_tool_set custom(environment, tools::known_tool_names());
    if (auto installed = custom.replace_all(config.custom_tools); !installed) {
      fmt::print(stderr, "troupe chat: {}\n", installed.error().message);
      return 2;
    }
    auto web = std::make_shared<tools::web_tool_options>();
    web->web = config.web;
    web->engines = std::make_shared<tools::search_engine_catalog>();
    web->engines->set(config.search_engines);
    web->environment = environment->environment;
    web->key_env = policy;
    (void)resolver->add_source(custom.source());
    (void)resolver->add_source(tools::make_web_tool_source(web));
  }

  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  auto http = std::make_unique<net::http_client>(io.get_executor());
  std::thread io_thread([&io] { io.run(); });
  int code = 1;
  {
    caf::actor_system_config caf_config;
    caf::actor_system system(caf_config);
    run_spec spec;
    spec.run_id = "cli-run";
    spec.turn_id = "cli-turn";
    spec.agent = *agent;
    spec.provider = provider_config;
    spec.objective = options.message;
    spec.workspace = workspace;
    spec.io.http = http.get();
    spec.io.resolver = resolver;
    spec.agent.context_window = effective_context_window(*agent, *provider);
    spec.io.sandbox = std::make_shared<tools::sandbox_runner>();
    auto shown = std::make_shared<printed>();
    // Persisted in the data directory's database when it opens; otherwise the run still
    // happens and stderr says it was not stored.
    std::optional<store_writer_actor> writer;
    // The data directory's lock keeps this the only writer; when a server holds it, the
    // run still happens and is not stored.
    auto data_lock = storage::open_data_dir(config.data_dir);
    if (!data_lock) {
      fmt::print(stderr, "[not stored] {}\n", data_lock.error().message);
    } else if (auto db = storage::open_writer(storage::database_path(config.data_dir),
                                              storage::sync_mode::normal)) {
      if (auto rows = prepare_rows(*db, *agent, config.providers, config.agents)) {
        spec.run_row = rows->run;
        spec.conversation_row = rows->conversation;
        writer =
            spawn_store_writer(system, std::make_shared<storage::connection>(std::move(*db)), {});
        spec.io.writer = writer;
        fmt::print(stderr, "[stored] run {} in {}\n", rows->uuid,
                   storage::database_path(config.data_dir).string());
      } else {
        fmt::print(stderr, "[not stored] {}\n", rows.error().message);
      }
    } else {
      fmt::print(stderr, "[not stored] {}\n", db.error().message);
    }
    auto run = spawn_run(system, std::move(spec), system.spawn(printer, shown));
    caf::scoped_actor self{system};
    const auto limit =
        std::chrono::duration_cast<caf::timespan>(agent->timeout) + std::chrono::seconds(30);
    self->request(run, limit, run_atom::value)
        .receive(
            [&](run_result& r) {
              // The printer may trail the result by a few events.
              for (int i = 0; i < 200; ++i) {
                std::lock_guard lock(shown->mutex);
                if (shown->ended) {
                  break;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
              }
              std::lock_guard lock(shown->mutex);
              if (r.status == storage::run_status::succeeded) {
                // The accepted answer may not have been streamed (the finish tool) or may
                // carry file links the candidate lacked.
                if (r.text.starts_with(shown->candidate)) {
                  write_out(std::string_view(r.text).substr(shown->candidate.size()));
                } else {
                  write_out("\n" + r.text);
                }
                write_out("\n");
                fmt::print(stderr, "[done] {} rounds, {} LLM calls, {} + {} tokens, model {}\n",
                           r.rounds, r.llm_calls, r.usage.prompt_tokens, r.usage.completion_tokens,
                           r.model);
                code = 0;
              } else {
                fmt::print(stderr, "troupe chat: the run {}: {}\n", storage::to_string(r.status),
                           r.error);
              }
            },
            [&](caf::error& e) {
              fmt::print(stderr, "troupe chat: the run did not answer: {}\n", caf::to_string(e));
            });
    if (writer) {
      // The writer commits what is queued before it stops.
      self->send_exit(*writer, caf::exit_reason::user_shutdown);
    }
  }
  std::promise<void> gone;
  boost::asio::post(io, [&http, &gone] {
    http.reset();
    gone.set_value();
  });
  gone.get_future().wait();
  guard.reset();
  io.stop();
  io_thread.join();
  return code;
}

} // namespace troupe::actors
