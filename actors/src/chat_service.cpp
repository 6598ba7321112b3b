#include "troupe/actors/chat_service.hpp"

#include <algorithm>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/stored_journal.hpp"
#include "troupe/net/provider_wire.hpp"
#include "troupe/runtime/channel_config.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/runtime/settings.hpp"
#include "troupe/storage/channels.hpp"
#include "troupe/storage/context_summaries.hpp"
#include "troupe/storage/provider_key.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/tools/blocking_pool.hpp"

namespace troupe::actors {

namespace {

namespace asio = boost::asio;

// How long the registry and a conversation get to answer a submission.
constexpr auto hand_over_timeout = std::chrono::seconds(10);
// A conversation that passivated between the lookup and the hand-over is looked up
// again; this many times at most.
constexpr int hand_over_attempts = 50;
// How long a passivated conversation's reads may take on the blocking pool.
constexpr auto conversation_load_timeout = std::chrono::seconds(8);

expected<std::vector<std::string>> parse_tools(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(json.empty() ? std::string("[]") : json);
  simdjson::dom::array tools;
  if (parser.parse(buffer).get(tools) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, "tools_json is not a JSON array");
  }
  std::vector<std::string> out;
  for (auto t : tools) {
    std::string_view name;
    if (t.get_string().get(name) != simdjson::SUCCESS) {
      return fail(errc::invalid_argument, "tools_json holds a non-string");
    }
    out.emplace_back(name);
  }
  return out;
}

/// A provider's `context_window` from its config JSON; the default when it names none.
std::uint32_t provider_context_window(const std::string& config_json) {
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(config_json.empty() ? std::string("{}") : config_json);
  simdjson::dom::element config;
  std::uint64_t v = 0;
  if (parser.parse(buffer).get(config) == simdjson::SUCCESS &&
      config["context_window"].get_uint64().get(v) == simdjson::SUCCESS && v > 0) {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, max_context_window));
  }
  return default_context_window;
}

} // namespace

std::size_t load_budget(const agent_settings& agent) {
  const std::size_t window =
      agent.context_window != 0 ? agent.context_window : default_context_window;
  return agent.history_max_tokens != 0 ? std::min<std::size_t>(window, agent.history_max_tokens)
                                       : window;
}

expected<agent_settings> agent_from_record(const storage::agent_record& a,
                                           const std::string& provider_name) {
  agent_settings s;
  s.name = a.name;
  s.provider = provider_name;
  s.model = a.main_model;
  s.fast_model = a.fast_model;
  s.fallback_model = a.fallback_model;
  s.system_prompt = a.system_prompt;
  auto tools = parse_tools(a.tools_json);
  if (!tools) {
    return fail(errc::invalid_argument,
                fmt::format("agent '{}': {}", a.name, tools.error().message));
  }
  s.tools = std::move(*tools);
  auto policy = parse_queue_policy(a.queue_policy);
  if (!policy) {
    return fail(errc::invalid_argument,
                fmt::format("agent '{}': {}", a.name, policy.error().message));
  }
  s.queue = *policy;
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(a.limits_json.empty() ? std::string("{}") : a.limits_json);
  simdjson::dom::object limits;
  if (parser.parse(buffer).get(limits) == simdjson::SUCCESS) {
    std::uint64_t v = 0;
    if (limits["max_rounds"].get_uint64().get(v) == simdjson::SUCCESS && v > 0) {
      s.max_rounds = static_cast<unsigned>(std::min<std::uint64_t>(v, 10'000));
    }
    if (limits["timeout_s"].get_uint64().get(v) == simdjson::SUCCESS && v > 0) {
      s.timeout = std::chrono::seconds(std::min<std::uint64_t>(v, 7 * 24 * 3600));
    }
    if (limits["context_window"].get_uint64().get(v) == simdjson::SUCCESS && v > 0) {
      s.context_window = static_cast<std::uint32_t>(std::min<std::uint64_t>(v, max_context_window));
    }
    bool flag = false;
    if (limits["memory"].get_bool().get(flag) == simdjson::SUCCESS) {
      s.memory = flag;
    }
    if (limits["memory_autoapprove"].get_bool().get(flag) == simdjson::SUCCESS) {
      s.memory_autoapprove = flag;
    }
    if (limits["memory_max_items"].get_uint64().get(v) == simdjson::SUCCESS && v > 0) {
      s.memory_max_items = static_cast<std::uint32_t>(std::min<std::uint64_t>(v, max_memory_items));
    }
    if (limits["memory_max_chars"].get_uint64().get(v) == simdjson::SUCCESS && v > 0) {
      s.memory_max_chars = static_cast<std::uint32_t>(
          std::clamp<std::uint64_t>(v, min_memory_chars, max_memory_chars));
    }
    // `limits.web_search` (issue 18); a value that is not a mode leaves web access off.
    std::string_view mode;
    if (limits["web_search"].get_string().get(mode) == simdjson::SUCCESS) {
      s.web_search = parse_web_search_mode(mode).value_or(web_search_mode::off);
    }
    // Skills and approvals (issue 19); what does not parse is left out.
    simdjson::dom::array skills;
    if (limits["skills"].get_array().get(skills) == simdjson::SUCCESS) {
      for (auto item : skills) {
        std::string_view name;
        if (item.get_string().get(name) == simdjson::SUCCESS) {
          s.skills.emplace_back(name);
        }
      }
    }
    simdjson::dom::object approval;
    if (limits["approval"].get_object().get(approval) == simdjson::SUCCESS) {
      for (auto field : approval) {
        std::string_view text;
        if (field.value.get_string().get(text) == simdjson::SUCCESS) {
          if (auto m = parse_approval_mode(text)) {
            s.approval.emplace(std::string(field.key), *m);
          }
        }
      }
    }
    if (limits["approval_profile"].get_string().get(mode) == simdjson::SUCCESS &&
        check_approval_profile(mode)) {
      s.approval_profile = std::string(mode);
    }
    if (limits["approval_timeout_s"].get_uint64().get(v) == simdjson::SUCCESS) {
      s.approval_timeout_s = static_cast<std::uint32_t>(std::min<std::uint64_t>(v, 7 * 24 * 3600));
    }
  }
  return s;
}

namespace {

/// The spec of a conversation from its rows and history.
expected<conversation_spec> conversation_spec_from(const chat_service_options& options,
                                                   const storage::conversation_record& conversation,
                                                   const storage::agent_record& agent,
                                                   std::vector<chat_message> history) {
  if (!agent.provider_id) {
    return fail(errc::invalid_argument, fmt::format("agent '{}' has no provider", agent.name));
  }
  auto* catalog = options.catalog.get();
  auto provider = catalog ? catalog->provider(*agent.provider_id)
                          : options.reads->with([&](storage::connection& c) {
                              return storage::find_provider(c, *agent.provider_id);
                            });
  if (!provider) {
    return tl::unexpected(provider.error());
  }
  auto settings = agent_from_record(agent, provider->name);
  if (!settings) {
    return tl::unexpected(settings.error());
  }
  if (settings->context_window == 0) {
    settings->context_window = provider_context_window(provider->config_json);
  }
  auto type = net::parse_provider_type(provider->kind);
  if (!type) {
    return fail(errc::invalid_argument,
                fmt::format("provider '{}': {}", provider->name, type.error().message));
  }
  net::provider_config config;
  config.type = *type;
  config.base_url =
      provider->base_url.empty() ? std::string(net::default_base_url(*type)) : provider->base_url;
  auto key =
      storage::provider_api_key(*provider, options.declared_providers, environment_snapshot(),
                                options.key_env, options.secrets.get());
  if (!key) {
    return tl::unexpected(key.error());
  }
  config.api_key = std::move(*key);

  conversation_spec spec;
  spec.id = conversation.uuid;
  spec.conversation_row = conversation.id;
  spec.agent_row = agent.id;
  spec.agent = std::move(*settings);
  spec.agent.history_max_tokens = options.history_max_tokens;
  spec.agent.compression = options.compression;
  spec.provider = std::move(config);
  // Created by the first tool that uses it (workspace::open), on the blocking pool: a
  // conversation that never touches a file costs no directory.
  spec.workspace = options.data_dir / "workspaces" / conversation.uuid;
  spec.tool_timeout = options.tool_timeout;
  spec.io = options.io;
  spec.history_limit = options.history_messages;
  spec.max_pending = options.max_pending;
  spec.history = std::move(history);
  // An ephemeral conversation (one OpenAI-compatible request) is rarely continued: it
  // leaves memory a second after its last turn, and a continuation loads it again.
  spec.idle_ttl = conversation.ephemeral
                      ? std::min(options.idle_ttl, std::chrono::milliseconds(1000))
                      : options.idle_ttl;
  spec.owner_user = conversation.owner_user_id;
  spec.files_dir = options.data_dir / "files";
  return spec;
}

/// A stored conversation as it loads: its spec, with its history from the newest summary
/// within the agent's context window (issue 16), and whether runs wait in it.
struct stored_conversation {
  conversation_spec spec;
  bool runs_queued = false;
};

/// Reads a stored conversation (a few point reads and its history) on the calling thread.
expected<stored_conversation> read_stored_conversation(const chat_service_options& options,
                                                       const std::string& id) {
  auto& reads = *options.reads;
  auto conversation = reads.with(
      [&](storage::connection& c) { return storage::find_conversation_by_uuid_any_owner(c, id); });
  if (!conversation) {
    return tl::unexpected(conversation.error());
  }
  auto* catalog = options.catalog.get();
  auto agent =
      catalog ? catalog->agent(conversation->agent_id) : reads.with([&](storage::connection& c) {
        return storage::find_agent(c, conversation->agent_id);
      });
  if (!agent) {
    return tl::unexpected(agent.error());
  }
  // A queued run's message is its objective when it runs, not history before it.
  auto queued = reads.with(
      [&](storage::connection& c) { return storage::queued_run_ids(c, conversation->id); });
  if (!queued) {
    return tl::unexpected(queued.error());
  }
  auto spec = conversation_spec_from(options, *conversation, *agent, {});
  if (!spec) {
    return tl::unexpected(spec.error());
  }
  // From the newest summary, when it has one, within the agent's context window (and
  // `actors.history_max_tokens`), issue 16.
  const auto budget = load_budget(spec->agent);
  auto history = reads.with([&](storage::connection& c) {
    return storage::load_prompt_history(c, conversation->id, options.history_messages, budget,
                                        *queued);
  });
  if (!history) {
    return tl::unexpected(history.error());
  }
  spec->history = std::move(history->messages);
  spec->history_spans = std::move(history->spans);
  return stored_conversation{std::move(*spec), !queued->empty()};
}

/// `read_stored_conversation` on the blocking pool, awaited (inline without a pool).
asio::awaitable<expected<stored_conversation>>
load_stored(std::shared_ptr<const chat_service_options> options, std::string id) {
  auto pool = options->io.blocking;
  if (!pool) {
    co_return read_stored_conversation(*options, id);
  }
  auto job = [options, id](const tools::job_control&) {
    return read_stored_conversation(*options, id);
  };
  auto running = pool->run(std::move(job), conversation_load_timeout);
  auto ran = co_await std::move(running);
  if (!ran && ran.error().code == errc::limit_exceeded) {
    // The pool's queue is full: loading here holds this thread for a moment, but refusing
    // would lose the message that needs the conversation.
    co_return read_stored_conversation(*options, id);
  }
  if (!ran) {
    co_return tl::unexpected(ran.error());
  }
  co_return std::move(*ran);
}

/// A stored conversation's spec, loaded as `load_stored` loads it.
asio::awaitable<expected<conversation_spec>>
load_spec(std::shared_ptr<const chat_service_options> options, std::string id) {
  auto loading = load_stored(std::move(options), std::move(id));
  auto loaded = co_await std::move(loading);
  if (!loaded) {
    co_return tl::unexpected(loaded.error());
  }
  co_return std::move(loaded->spec);
}

} // namespace

chat_service::chat_service(caf::actor_system& system, chat_service_options options)
    : system_(system), options_(std::move(options)),
      directory_(std::make_shared<run_directory>(options_.journal_max_bytes)) {
  options_.io.writer = options_.writer;
  // What loads run with: a load may outlive its awaiter (the pool's deadline), so it owns
  // its copy of the options rather than pointing into this service.
  shared_options_ = std::make_shared<const chat_service_options>(options_);
  conversation_factory factory;
  factory.take_prepared = [this](caf::actor_system& sys, const std::string& id) {
    return take_prepared(sys, id);
  };
  // Not a coroutine lambda: the coroutine may outlive the registry that holds this
  // function, so what it uses is passed by value into its frame.
  factory.load = [options = shared_options_](std::string id) {
    return load_spec(options, std::move(id));
  };
  factory.executor = [options = shared_options_]() -> asio::any_io_executor {
    auto* http = options->io.http_here();
    return http ? http->get_executor() : asio::any_io_executor{};
  };
  registry_ = std::make_unique<conversation_registry>(system_, std::move(factory),
                                                      options_.registry_shards);
}

chat_service::~chat_service() = default;

void chat_service::stop() {
  if (registry_) {
    registry_->stop();
  }
  // Journals wait out their retention otherwise, and the actor system waits for them.
  for (const auto& journal : directory_->journals()) {
    caf::anon_send_exit(journal, caf::exit_reason::user_shutdown);
  }
}

conversation_actor chat_service::take_prepared(caf::actor_system& system, const std::string& id) {
  std::lock_guard lock(prepared_mutex_);
  auto it = prepared_.find(id);
  if (it == prepared_.end()) {
    return conversation_actor{};
  }
  auto spec = std::move(it->second);
  prepared_.erase(it);
  return spawn_conversation(system, std::move(spec));
}

void chat_service::forget_prepared(const std::string& conversation_id) {
  // A spec the registry did not take (the conversation was live already, or did not
  // load) must not be used by a later load.
  std::lock_guard lock(prepared_mutex_);
  prepared_.erase(conversation_id);
}

std::string chat_service::new_conversation_id() const {
  auto id = new_uuid();
  auto* shards = shards_of(system_);
  const auto here = shard_set::current();
  if (shards == nullptr || !here || shards->size() < 2) {
    return id;
  }
  // Each try lands here with probability 1/N: 64 tries miss with (1 - 1/N)^64 at most
  // (3e-20 for two shards); a miss only costs a hand-off to another shard.
  for (int i = 0; i < 64 && shards->shard_for(id) != *here; ++i) {
    id = new_uuid();
  }
  return id;
}

asio::awaitable<expected<submitted_run>> chat_service::submit(chat_submission submission) {
  submitted_run out;
  out.run_id = submission.run_id.empty() ? new_uuid() : submission.run_id;
  out.conversation_id = submission.conversation.uuid;
  journal_options jo;
  jo.run_id = out.run_id;
  jo.conversation_id = out.conversation_id;
  jo.retention = options_.retention;
  jo.max_retained = options_.max_retained_runs;
  jo.final_data = std::move(submission.final_data);
  jo.directory = directory_;
  jo.awaited = submission.awaited;
  jo.metrics = options_.metrics;
  jo.earlier = std::move(submission.earlier_entries);
  if (options_.writer) {
    jo.writer = options_.writer;
  }
  {
    // The journal lives on its conversation's shard (no suspension in this scope: the
    // spawn home is the calling thread's).
    std::optional<spawn_home> home;
    if (auto* shards = shards_of(system_)) {
      home.emplace(shards->shard_for(out.conversation_id));
    }
    out.journal = spawn_run_journal(system_, std::move(jo));
  }
  directory_->add(out.run_id, {out.journal, submission.user_id, out.conversation_id});
  if (submission.fresh) {
    // A conversation created for this message loads from what the caller just stored.
    auto& fresh = *submission.fresh;
    // Not stored yet: every message of its history is written with its row.
    std::vector<chat_message> to_store;
    if (submission.conversation.id == 0) {
      to_store = fresh.history;
    }
    if (fresh.history.size() > options_.history_messages) {
      fresh.history.erase(fresh.history.begin(),
                          fresh.history.end() -
                              static_cast<std::ptrdiff_t>(options_.history_messages));
    }
    auto spec = conversation_spec_from(options_, submission.conversation, fresh.agent,
                                       std::move(fresh.history));
    if (spec && submission.conversation.id == 0) {
      spec->unstored = submission.conversation;
      spec->unstored_history = std::move(to_store);
    }
    if (spec) {
      std::lock_guard lock(prepared_mutex_);
      prepared_.insert_or_assign(out.conversation_id, std::move(*spec));
    }
  }

  const auto& shard = registry_->shard_for(out.conversation_id);
  std::string last_error = "no attempt made";
  std::optional<error> refusal;
  for (int attempt = 0; attempt < hand_over_attempts; ++attempt) {
    auto looked_up = ask<conversation_actor>(system_, shard, hand_over_timeout, get_atom::value,
                                             out.conversation_id);
    auto conversation = co_await std::move(looked_up);
    if (!conversation || !*conversation) {
      last_error = conversation ? "the conversation cannot be loaded (see the log)"
                                : conversation.error().message;
      break;
    }
    turn_request turn{submission.text,    out.run_id,        out.journal,
                      submission.run_row, submission.policy, submission.memory_user,
                      submission.resume};
    auto handed =
        ask<bool>(system_, *conversation, hand_over_timeout, send_atom::value, std::move(turn));
    auto accepted = co_await std::move(handed);
    if (accepted) {
      caf::anon_send(out.journal, watch_atom::value, *conversation);
      out.conversation = *conversation;
      forget_prepared(out.conversation_id);
      co_return out;
    }
    last_error = accepted.error().message;
    if (accepted.error().code == errc::limit_exceeded ||
        accepted.error().code == errc::overloaded) {
      // Refused by a bound (actors.max_pending, storage.writer_max_queue): nothing was
      // stored; the caller says so.
      refusal = accepted.error();
      break;
    }
    if (accepted.error().code != errc::unavailable) {
      break;
    }
    // The conversation passivated between lookup and hand-over: its shard forgets it
    // as soon as it sees it gone; look again.
    asio::steady_timer pause(co_await asio::this_coro::executor, std::chrono::milliseconds(2));
    auto waited = pause.async_wait(asio::use_awaitable);
    co_await std::move(waited);
  }
  caf::anon_send_exit(out.journal, caf::exit_reason::user_shutdown);
  directory_->remove(out.run_id);
  forget_prepared(out.conversation_id);
  if (refusal) {
    co_return tl::unexpected(std::move(*refusal));
  }
  co_return fail(errc::unavailable, fmt::format("conversation {} did not take the message: {}",
                                                out.conversation_id, last_error));
}

/// Whose memory a run resumed after a restart (queued, or paused on an approval) uses: when
/// a channel message started it, its sender's (`channel:<channel>:<sender>`, the user the
/// thread gave its run before the stop; under `thread` scope not the conversation's
/// owner); else 0, the owner's. The run's first message decides, as for a turn others
/// joined.
storage::row_id chat_service::resumed_memory_user(storage::read_pool& reads,
                                                  const std::string& run_uuid) {
  return reads.with([&](storage::connection& c) -> storage::row_id {
    auto message = storage::find_inbound_by_run(c, run_uuid);
    if (!message) {
      return 0;
    }
    auto channel = storage::find_channel(c, message->channel_id);
    if (!channel) {
      return 0;
    }
    auto user = storage::find_user_by_name(c, channel_identity(channel->name, message->sender));
    return user ? user->id : 0;
  });
}

asio::awaitable<std::size_t> chat_service::resume_queued_runs() {
  // A paused run was accepted before the runs queued behind it in its conversation.
  auto resuming = resume_paused_runs();
  co_await std::move(resuming);
  auto queued =
      options_.reads->with([](storage::connection& c) { return storage::list_queued_turns(c); });
  if (!queued) {
    log::error("queued runs cannot be read for recovery: {}", queued.error().message);
    co_return 0;
  }
  std::size_t resumed = 0;
  for (auto& t : *queued) {
    chat_submission s;
    s.user_id = t.conversation.owner_user_id;
    s.conversation = t.conversation;
    s.text = t.text;
    s.run_id = t.run.uuid;
    s.run_row = t.run.id;
    s.memory_user = resumed_memory_user(*options_.reads, t.run.uuid);
    auto submitted = co_await submit(std::move(s));
    if (submitted) {
      ++resumed;
      continue;
    }
    log::warn("queued run {} cannot be resumed: {}", t.run.uuid, submitted.error().message);
    co_await write(
        system_, options_.writer,
        storage::set_run_status_op(t.run.id, storage::run_status::failed,
                                   "not resumed after a restart: " + submitted.error().message),
        store_write_timeout);
  }
  co_return resumed;
}

std::optional<run_directory::entry> chat_service::find_run(const std::string& run_id) const {
  return directory_->find(run_id);
}

expected<std::vector<journal_entry>> chat_service::stored_entries(const std::string& run_id,
                                                                  std::uint64_t after_seq) const {
  if (!options_.reads) {
    return fail(errc::unavailable, "the chat service has no database to replay from");
  }
  return options_.reads->with(
      [&](storage::connection& c) { return stored_journal(c, run_id, after_seq); });
}

asio::awaitable<expected<prompt_context_view>> chat_service::context(std::string conversation_id) {
  const auto& shard = registry_->shard_for(conversation_id);
  auto looked_up =
      ask<conversation_actor>(system_, shard, hand_over_timeout, peek_atom::value, conversation_id);
  auto live = co_await std::move(looked_up);
  if (!live) {
    co_return tl::unexpected(live.error());
  }
  if (*live) {
    auto asked = ask<prompt_context_view>(system_, *live, hand_over_timeout, context_atom::value);
    auto view = co_await std::move(asked);
    // A conversation that passivated meanwhile is read from the database instead.
    if (view || view.error().code != errc::unavailable) {
      co_return view;
    }
  }
  // Rebuilt as the conversation would load, off the shard.
  auto loading = load_stored(shared_options_, std::move(conversation_id));
  auto stored = co_await std::move(loading);
  if (!stored) {
    co_return tl::unexpected(stored.error());
  }
  auto view = prompt_context_of(stored->spec, stored->spec.history, "stored");
  view.run_active = stored->runs_queued;
  co_return view;
}

asio::awaitable<expected<bool>> chat_service::cancel(const std::string& conversation_id,
                                                     const std::string& run_id) {
  const auto& shard = registry_->shard_for(conversation_id);
  auto looked_up =
      ask<conversation_actor>(system_, shard, hand_over_timeout, get_atom::value, conversation_id);
  auto conversation = co_await std::move(looked_up);
  if (!conversation) {
    co_return tl::unexpected(conversation.error());
  }
  if (!*conversation) {
    co_return false;
  }
  auto asked = ask<bool>(system_, *conversation, hand_over_timeout, cancel_atom::value, run_id);
  co_return co_await std::move(asked);
}

} // namespace troupe::actors
