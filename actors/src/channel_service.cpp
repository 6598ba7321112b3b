#include "troupe/actors/channel_service.hpp"

#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/net/channel/slack_adapter.hpp"
#include "troupe/net/channel/telegram_adapter.hpp"
#include "troupe/net/channel/webhook_adapter.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

struct channel_service::thread_registry {
  struct key {
    storage::row_id channel = 0;
    std::string thread;
    friend auto operator<=>(const key&, const key&) = default;
  };
  std::mutex mutex;
  bool stopped = false;
  std::map<key, channel_thread_actor> threads;
};

namespace {

// How often a message is offered to its thread when the actor found passivated meanwhile.
constexpr int hand_over_attempts = 4;
constexpr auto hand_over_timeout = std::chrono::seconds(10);
// How long a stop waits for one thread's send in flight to be recorded.
constexpr auto drain_timeout = std::chrono::seconds(5);

net::http_response ok_answer(const net::channel::decoded_request& decoded) {
  if (decoded.response_body.empty()) {
    return net::http_response::json(200, R"({"ok":true})");
  }
  net::http_response r;
  r.status = 200;
  r.content_type = decoded.response_content_type;
  r.body = decoded.response_body;
  return r;
}

/// The channel's api_base, else its platform's public one.
std::string api_base_of(const storage::channel_record& r) {
  channel_settings s;
  s.type = parse_channel_type(r.kind).value_or(channel_type::webhook);
  s.api_base = r.api_base;
  return s.effective_api_base();
}

} // namespace

channel_service::channel_service(caf::actor_system& system, channel_service_options options)
    : system_(system), options_(std::move(options)),
      registry_(std::make_shared<thread_registry>()) {
  auto ctx = std::make_shared<channel_thread_context>();
  ctx->system = &system_;
  ctx->writer = options_.writer;
  ctx->reads = options_.reads;
  ctx->catalog = options_.catalog;
  ctx->chat = options_.chat;
  ctx->http = options_.http;
  ctx->shard_http = options_.shard_http;
  ctx->outbox = options_.outbox;
  ctx->idle_ttl = options_.thread_idle;
  context_ = std::move(ctx);
}

channel_service::~channel_service() {
  stop();
}

void channel_service::stop() {
  std::map<thread_registry::key, channel_thread_actor> threads;
  {
    std::lock_guard lock(registry_->mutex);
    if (registry_->stopped) {
      return; // stopped by the node already: the actor system may be gone by now
    }
    registry_->stopped = true;
    threads.swap(registry_->threads);
    // Routes keep this service after the actor system is gone: no handle may outlive it
    // (a detached actor with a reference left holds the system's shutdown).
    context_.reset();
    options_.writer = store_writer_actor{};
    options_.chat.reset();
  }
  std::map<std::string, std::shared_ptr<const live_channel>, std::less<>> channels;
  {
    std::lock_guard lock(channels_mutex_);
    channels.swap(channels_);
  }
  // Loops of the adapters (Telegram's getUpdates) end first: their calls in flight are
  // cancelled, and nothing more is journaled.
  for (const auto& [name, live] : channels) {
    live->adapter->stop(true);
  }
  // Each thread records the outcome of the send it has in flight before it quits (else
  // a part the platform has would be sent again after the restart); the store writer
  // is still up. Called on a thread that is not a shard (the node's stop), while the
  // shards run.
  if (threads.empty()) {
    return;
  }
  caf::scoped_actor self(system_);
  for (auto& [key, actor] : threads) {
    self->request(actor, drain_timeout, drain_atom::value)
        .receive([](bool) {},
                 [&](caf::error&) { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); });
  }
}

void channel_service::forget(const std::string& name) {
  std::shared_ptr<const live_channel> old;
  {
    std::lock_guard lock(channels_mutex_);
    if (auto it = channels_.find(name); it != channels_.end()) {
      old = std::move(it->second);
      channels_.erase(it);
    }
  }
  if (old) {
    // Not waited for: this may run on the thread of the adapter's executor.
    old->adapter->stop(false);
  }
  // A channel that polls its platform (or registers with it) goes live again at once with
  // its new settings; one deleted or disabled stays down.
  activate(name);
}

void channel_service::activate(const std::string& name) {
  if (!writer()) {
    return;
  }
  auto live = channel(name);
  if (!live && live.error().code != errc::not_found) {
    log::warn("channel {}: {}", name, live.error().message);
  }
}

expected<std::shared_ptr<const live_channel>>
channel_service::make_live(storage::channel_record record) {
  auto live = std::make_shared<live_channel>();
  auto scope = parse_session_scope(record.session_scope);
  auto queue = parse_queue_policy(record.queue_policy);
  if (!scope || !queue) {
    return tl::unexpected(!scope ? scope.error() : queue.error());
  }
  live->scope = *scope;
  live->queue = *queue;
  // The secret: sealed in the row (API), inline in the config (declared), or a variable.
  std::string token;
  if (!record.token.empty()) {
    if (!options_.secrets) {
      return fail(
          errc::unavailable,
          fmt::format("channel '{}': its token is sealed and no key opens it", record.name));
    }
    auto opened = options_.secrets->open(record.token);
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    token = std::move(*opened);
  } else {
    channel_settings declared;
    declared.token_env = record.token_env;
    for (const auto& d : options_.declared) {
      if (d.name == record.name) {
        declared.token = d.token;
      }
    }
    token = declared.resolve_token(options_.environment, options_.key_env);
  }
  switch (parse_channel_type(record.kind).value_or(channel_type::webhook)) {
    case channel_type::webhook:
      if (token.empty()) {
        return fail(errc::unavailable,
                    fmt::format("channel '{}' has no token: set {} or token", record.name,
                                record.token_env.empty() ? "token_env" : record.token_env));
      }
      live->adapter =
          std::make_shared<net::channel::webhook_adapter>(record.name, token, record.callback_url);
      break;
    case channel_type::telegram: {
      if (token.empty()) {
        return fail(errc::unavailable,
                    fmt::format("channel '{}' has no bot token: set {} or token", record.name,
                                record.token_env.empty() ? "token_env" : record.token_env));
      }
      net::channel::telegram_options o;
      o.channel = record.name;
      o.token = token;
      o.api_base = api_base_of(record);
      o.mode = record.mode;
      o.webhook_url = record.callback_url;
      live->adapter = std::make_shared<net::channel::telegram_adapter>(std::move(o));
      break;
    }
    case channel_type::slack: {
      net::channel::slack_options o;
      o.channel = record.name;
      o.api_base = api_base_of(record);
      for (auto [variable, into] :
           {std::pair<const std::string&, std::string*>{record.bot_token_env, &o.bot_token},
            {record.signing_secret_env, &o.signing_secret}}) {
        channel_settings from;
        from.token_env = variable;
        *into = from.resolve_token(options_.environment, options_.key_env);
        if (into->empty()) {
          return fail(errc::unavailable,
                      fmt::format("channel '{}' has no {}: set {}", record.name,
                                  into == &o.bot_token ? "bot token" : "signing secret", variable));
        }
      }
      live->adapter = std::make_shared<net::channel::slack_adapter>(std::move(o));
      break;
    }
  }
  live->record = std::move(record);
  return std::shared_ptr<const live_channel>(std::move(live));
}

expected<std::shared_ptr<const live_channel>> channel_service::channel(const std::string& name) {
  {
    std::lock_guard lock(channels_mutex_);
    if (auto it = channels_.find(name); it != channels_.end()) {
      return it->second;
    }
  }
  auto record = options_.reads->with(
      [&](storage::connection& c) { return storage::find_channel_by_name(c, name); });
  if (!record) {
    return tl::unexpected(record.error());
  }
  auto live = make_live(std::move(*record));
  if (!live) {
    return live;
  }
  {
    std::lock_guard lock(channels_mutex_);
    if (auto it = channels_.find(name); it != channels_.end()) {
      return it->second; // made meanwhile by another request: that one is live
    }
    channels_.insert_or_assign(name, *live);
  }
  if ((*live)->record.enabled && options_.http && writer()) {
    std::weak_ptr<const live_channel> weak = *live;
    (*live)->adapter->start(*options_.http,
                            [this, weak](std::vector<net::channel::inbound_message> messages)
                                -> boost::asio::awaitable<expected<void>> {
                              auto ch = weak.lock();
                              if (!ch) {
                                co_return fail(errc::unavailable, "the channel changed");
                              }
                              auto journaling = journal(ch, std::move(messages));
                              co_return co_await std::move(journaling);
                            });
  }
  return live;
}

expected<std::shared_ptr<const live_channel>> channel_service::channel_by_id(storage::row_id id) {
  auto record =
      options_.reads->with([&](storage::connection& c) { return storage::find_channel(c, id); });
  if (!record) {
    return tl::unexpected(record.error());
  }
  return channel(record->name);
}

channel_thread_actor channel_service::thread(const std::shared_ptr<const live_channel>& channel,
                                             const std::string& key) {
  std::lock_guard lock(registry_->mutex);
  if (registry_->stopped) {
    return {};
  }
  auto& slot = registry_->threads[thread_registry::key{channel->record.id, key}];
  if (!slot) {
    channel_thread_spec spec;
    spec.channel = channel;
    spec.thread_key = key;
    spec.context = context_;
    spec.on_exit =
        [weak = std::weak_ptr(registry_),
         k = thread_registry::key{channel->record.id, key}](const caf::actor_addr& gone) {
          auto reg = weak.lock();
          if (!reg) {
            return;
          }
          std::lock_guard l(reg->mutex);
          if (auto it = reg->threads.find(k);
              it != reg->threads.end() && it->second.address() == gone) {
            reg->threads.erase(it);
          }
        };
    slot = spawn_channel_thread(system_, std::move(spec));
  }
  return slot;
}

boost::asio::awaitable<expected<void>>
channel_service::hand_over(std::shared_ptr<const live_channel> channel,
                           storage::inbound_record message) {
  for (int attempt = 0;; ++attempt) {
    auto target = thread(channel, message.thread_key);
    if (!target) {
      co_return fail(errc::unavailable, "the channel service has stopped");
    }
    auto asking = ask<bool>(system_, target, hand_over_timeout, inbound_atom::value, message);
    auto taken = co_await std::move(asking);
    if (taken) {
      co_return expected<void>{};
    }
    // A thread that passivated between the lookup and the message: a new one takes it.
    if (taken.error().code != errc::unavailable || attempt + 1 >= hand_over_attempts) {
      co_return tl::unexpected(taken.error());
    }
  }
}

store_writer_actor channel_service::writer() const {
  std::lock_guard lock(registry_->mutex);
  return options_.writer;
}

boost::asio::awaitable<net::http_response> channel_service::receive(std::string name,
                                                                    net::http_request request) {
  const auto store = writer();
  if (!store) {
    co_return net::http_response::error(503, "unavailable", "the channel service has stopped");
  }
  auto live = channel(name);
  if (!live) {
    if (live.error().code == errc::not_found) {
      co_return net::http_response::error(404, "not_found", "no such channel");
    }
    log::error("channel {}: {}", name, live.error().message);
    co_return net::http_response::error(503, "unavailable", live.error().message);
  }
  const auto& ch = **live;
  if (!ch.record.enabled) {
    co_return net::http_response::error(404, "not_found", "no such channel");
  }
  if (auto verified = ch.adapter->verify(request); !verified) {
    co_return net::http_response::error(401, "unauthorized", verified.error().message);
  }
  auto decoded = ch.adapter->decode(request);
  if (!decoded) {
    co_return net::http_response::error(400, "invalid_argument", decoded.error().message);
  }
  auto journaling = journal(*live, std::move(decoded->messages));
  if (auto journaled = co_await std::move(journaling); !journaled) {
    // Not journaled: the platform is told to deliver it again.
    co_return net::http_response::error(503, "unavailable", journaled.error().message);
  }
  co_return ok_answer(*decoded);
}

boost::asio::awaitable<expected<void>>
channel_service::journal(std::shared_ptr<const live_channel> live,
                         std::vector<net::channel::inbound_message> messages) {
  const auto store = writer();
  if (!store) {
    co_return fail(errc::unavailable, "the channel service has stopped");
  }
  const auto& ch = *live;
  for (auto& m : messages) {
    storage::inbound_record in;
    in.channel_id = ch.record.id;
    in.platform_message_id = m.message_id;
    in.thread_key = channel_thread_key(ch.scope, m.thread, m.sender);
    in.sender = m.sender;
    in.text = m.text;
    in.reply_to = m.reply_to;
    // The run that will answer it, named now: a restart finds whether it was accepted.
    in.run_uuid = new_uuid();
    auto journaled = std::make_shared<storage::journal_result>();
    auto op = storage::make_write("journal channel message",
                                  [in, journaled](storage::connection& c) -> expected<void> {
                                    auto r = storage::journal_inbound(c, in);
                                    if (!r) {
                                      return tl::unexpected(r.error());
                                    }
                                    *journaled = *r;
                                    return {};
                                  });
    auto writing = write(system_, store, std::move(op), store_write_timeout);
    auto written = co_await std::move(writing);
    if (!written) {
      co_return tl::unexpected(written.error());
    }
    if (journaled->duplicate) {
      continue;
    }
    in.id = journaled->id;
    auto handing = hand_over(live, std::move(in));
    if (auto handed = co_await std::move(handing); !handed) {
      // Journaled: the next start hands it over (recover), so the platform is answered 200.
      log::error("channel {}: message {} journaled but not handed to its thread: {}",
                 ch.record.name, m.message_id, handed.error().message);
    }
  }
  co_return expected<void>{};
}

boost::asio::awaitable<std::size_t> channel_service::recover() {
  std::size_t handed = 0;
  // Parts whose send was under way: the platform may have them. Sent again (with the
  // same idempotency key where the platform takes one); see docs/channels.md.
  auto sending = options_.reads->with(
      [](storage::connection& c) { return storage::list_outbox_with_status(c, "sending"); });
  if (sending) {
    for (const auto& e : *sending) {
      auto op =
          storage::make_write("outbox entry back to pending", [id = e.id](storage::connection& c) {
            return c.run("UPDATE outbox SET status = 'pending' WHERE id = ? AND status = 'sending'",
                         id);
          });
      auto writing = write(system_, writer(), std::move(op), store_write_timeout);
      co_await std::move(writing);
    }
  }
  auto pending = options_.reads->with(
      [](storage::connection& c) { return storage::list_outbox_with_status(c, "pending"); });
  if (pending) {
    for (auto& e : *pending) {
      auto thread_row = options_.reads->with([&](storage::connection& c) {
        return storage::find_channel_thread_by_id(c, e.thread_id);
      });
      auto live = channel_by_id(e.channel_id);
      if (!thread_row || !live) {
        continue;
      }
      if (auto target = thread(*live, thread_row->thread_key)) {
        caf::anon_send(target, outbox_atom::value, e);
        ++handed;
      }
    }
  }
  for (const auto* status : {"received", "processing"}) {
    auto waiting = options_.reads->with(
        [&](storage::connection& c) { return storage::list_inbound(c, 0, status); });
    if (!waiting) {
      log::error("channel recovery: the journal cannot be read: {}", waiting.error().message);
      continue;
    }
    for (auto& m : *waiting) {
      auto live = channel_by_id(m.channel_id);
      if (!live) {
        log::warn("channel recovery: message {} of channel {} left: {}", m.platform_message_id,
                  m.channel_id, live.error().message);
        continue;
      }
      // Accepted before the stop (its run row exists): wait for that run, never a second.
      auto run = options_.reads->with(
          [&](storage::connection& c) { return storage::find_run_by_uuid(c, m.run_uuid); });
      if (run) {
        m.status = "processing";
      }
      auto handing = hand_over(*live, std::move(m));
      if (auto ok = co_await std::move(handing); ok) {
        ++handed;
      }
    }
  }
  // Channels that talk to their platform beyond the inbound route (Telegram's getUpdates
  // loop or setWebhook, Slack's auth.test) go live now, after what the stop left.
  auto all = options_.reads->with([](storage::connection& c) { return storage::list_channels(c); });
  if (all) {
    for (const auto& record : *all) {
      if (record.enabled && record.kind != "webhook") {
        activate(record.name);
      }
    }
  }
  co_return handed;
}

} // namespace troupe::actors
