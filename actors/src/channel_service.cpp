#include "troupe/actors/channel_service.hpp"

#include "channel_registry.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/net/channel/slack_adapter.hpp"
#include "troupe/net/channel/telegram_adapter.hpp"
#include "troupe/net/channel/webhook_adapter.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

namespace {

// How long a stop waits for the threads' sends in flight to be recorded, beyond a send's
// own deadline (outbox_policy::send_timeout): its outcome's write, on a loaded machine.
constexpr auto drain_grace = std::chrono::seconds(10);
// How long a request waits for its journal write before it is answered 503 (the platform
// delivers it again): under the 3 s Slack allows, and Telegram's webhook too.
constexpr auto ack_deadline = std::chrono::milliseconds(2'000);
// Telegram's poll loop confirms a batch once it is journaled: it may wait longer.
constexpr auto poll_journal_deadline = store_write_timeout + std::chrono::seconds(5);

/// Asks a journal helper to write its batch now (see `journal`).
using journal_now_atom = caf::atom_constant<caf::atom("jrnl_now")>;

net::http_response ok_answer(const net::channel::decoded_request& decoded) {
  if (decoded.empty_response) {
    net::http_response r;
    r.status = 200;
    r.content_type = "text/plain; charset=utf-8";
    return r;
  }
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

/// What journaling one message found: its row, and whether it is to be handed to its
/// thread (new, or a duplicate whose row no thread has taken yet).
struct journaled_message {
  storage::inbound_record record;
  bool duplicate = false;
  bool hand_over = false;
};

} // namespace

channel_service::channel_service(caf::actor_system& system, channel_service_options options)
    : system_(system), options_(std::move(options)),
      registry_(std::make_shared<thread_registry>()) {
  registry_->system = &system_;
  auto ctx = std::make_shared<channel_thread_context>();
  ctx->system = &system_;
  ctx->approvals = options_.approvals;
  ctx->writer = options_.writer;
  ctx->reads = options_.reads;
  ctx->blocking = options_.blocking;
  ctx->catalog = options_.catalog;
  ctx->chat = options_.chat;
  ctx->http = options_.http;
  ctx->shard_http = options_.shard_http;
  ctx->outbox = options_.outbox;
  ctx->idle_ttl = options_.thread_idle;
  ctx->typing_cap = options_.typing_cap;
  ctx->run_grace = options_.run_grace;
  registry_->context = std::move(ctx);
  // A thread that failed: what it held goes to a new one (the journal and the outbox
  // have it), without waiting for a restart. Checked against `stopped` first, so the
  // service is alive whenever it runs (its destructor stops it).
  registry_->on_failure = [this, weak = std::weak_ptr(registry_)](storage::row_id channel,
                                                                  std::string key) {
    auto reg = weak.lock();
    if (!reg || !options_.http) {
      return;
    }
    asio::co_spawn(
        options_.http->get_executor(),
        [](channel_service* service, std::shared_ptr<thread_registry> r, storage::row_id ch,
           std::string k) -> asio::awaitable<void> {
          {
            std::lock_guard lock(r->mutex);
            if (r->stopped) {
              co_return;
            }
          }
          auto recovering = service->recover_thread(ch, std::move(k));
          co_await std::move(recovering);
        }(this, std::move(reg), channel, std::move(key)),
        asio::detached);
  };
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
    registry_->on_failure = nullptr;
    threads.swap(registry_->threads);
    // Routes keep this service after the actor system is gone: no handle may outlive it
    // (a detached actor with a reference left holds the system's shutdown).
    registry_->context.reset();
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
  // shards run. Every thread is told at once, so the stop waits for the slowest send,
  // not for their sum.
  if (threads.empty()) {
    return;
  }
  const auto grace = options_.outbox.send_timeout + drain_grace;
  caf::scoped_actor self(system_);
  const auto waiter = caf::actor_cast<caf::actor>(self);
  for (auto& [key, actor] : threads) {
    caf::anon_send(actor, drain_atom::value, waiter);
  }
  std::size_t answered = 0;
  const auto until = std::chrono::steady_clock::now() + grace;
  while (answered < threads.size()) {
    const auto left = std::chrono::duration_cast<caf::timespan>(
        std::max(until - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration{}));
    bool timed_out = false;
    self->receive([&](drained_atom) { ++answered; }, caf::after(left) >> [&] { timed_out = true; });
    if (timed_out) {
      log::warn("channels: {} thread(s) did not record their send in flight within {} ms",
                threads.size() - answered,
                std::chrono::duration_cast<std::chrono::milliseconds>(grace).count());
      break;
    }
  }
  for (auto& [key, actor] : threads) {
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
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
    case channel_type::wecom:
    case channel_type::wechat_mp:
    case channel_type::whatsapp:
    case channel_type::feishu:
    case channel_type::dingtalk: {
      auto adapter = make_platform_adapter(record, token);
      if (!adapter) {
        return tl::unexpected(adapter.error());
      }
      live->adapter = std::move(*adapter);
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
                              auto journaling =
                                  journal(ch, std::move(messages), poll_journal_deadline);
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
  // Answered once the journal row is durable, at most `ack_deadline` later; the thread
  // takes the message from there (the hand-over does not hold the answer up).
  auto journaling = journal(*live, std::move(decoded->messages), ack_deadline);
  if (auto journaled = co_await std::move(journaling); !journaled) {
    // Not journaled in time: the platform is told to deliver it again (a write that
    // commits later is handed over all the same, and the redelivery is a duplicate).
    co_return net::http_response::error(503, "unavailable", journaled.error().message);
  }
  co_return ok_answer(*decoded);
}

boost::asio::awaitable<net::http_response> channel_service::handshake(std::string name,
                                                                      net::http_request request) {
  auto live = channel(name);
  if (!live) {
    if (live.error().code == errc::not_found) {
      co_return net::http_response::error(404, "not_found", "no such channel");
    }
    co_return net::http_response::error(503, "unavailable", live.error().message);
  }
  const auto& ch = **live;
  if (!ch.record.enabled) {
    co_return net::http_response::error(404, "not_found", "no such channel");
  }
  auto answer = ch.adapter->answer_get(request);
  if (!answer) {
    switch (answer.error().code) {
      case errc::permission_denied:
        co_return net::http_response::error(403, "forbidden", answer.error().message);
      case errc::invalid_argument:
        co_return net::http_response::error(400, "invalid_argument", answer.error().message);
      default:
        co_return net::http_response::error(405, "method_not_allowed", answer.error().message);
    }
  }
  net::http_response r;
  r.status = answer->status;
  r.content_type = answer->content_type;
  r.body = std::move(answer->body);
  co_return r;
}

boost::asio::awaitable<expected<void>>
channel_service::journal(std::shared_ptr<const live_channel> live,
                         std::vector<net::channel::inbound_message> messages,
                         std::chrono::milliseconds deadline) {
  const auto store = writer();
  if (!store) {
    co_return fail(errc::unavailable, "the channel service has stopped");
  }
  if (messages.empty()) {
    co_return expected<void>{};
  }
  const auto& ch = *live;
  auto batch = std::make_shared<std::vector<journaled_message>>();
  for (auto& m : messages) {
    journaled_message j;
    auto& in = j.record;
    in.channel_id = ch.record.id;
    in.platform_message_id = m.message_id;
    in.delivery_id = m.delivery_id;
    in.thread_key = channel_thread_key(ch.scope, m.thread, m.sender);
    in.sender = m.sender;
    in.text = m.text;
    in.reply_to = m.reply_to;
    // The run that will answer it, named now: a restart finds whether it was accepted.
    in.run_uuid = new_uuid();
    batch->push_back(std::move(j));
  }
  // One commit for the request's messages. A duplicate whose row is still `received`
  // (its first delivery's answer was late: the write outlived the request's deadline, or
  // its thread has it queued) is handed over again; the thread drops what it has.
  auto op = std::make_shared<storage::write_op>(storage::make_write(
      "journal channel messages", [batch](storage::connection& c) -> expected<void> {
        for (auto& j : *batch) {
          auto r = storage::journal_inbound(c, j.record);
          if (!r) {
            return tl::unexpected(r.error());
          }
          j.duplicate = r->duplicate;
          j.record.id = r->id;
          j.hand_over = !r->duplicate;
          if (r->duplicate) {
            auto existing = storage::find_inbound(c, r->id);
            if (!existing) {
              return tl::unexpected(existing.error());
            }
            if (existing->status == "received") {
              j.record = std::move(*existing);
              j.hand_over = true;
            }
          }
        }
        return {};
      }));
  // The write and the hand-over belong to a helper actor, not to this request: when the
  // request stops waiting (its deadline), a write that commits later is still handed to
  // its thread. The hand-over is a mailbox push in journal order (see `deliver`).
  auto hand_over = [registry = registry_, live, batch] {
    for (const auto& j : *batch) {
      if (!j.hand_over) {
        continue;
      }
      if (!registry->deliver(live, j.record)) {
        log::warn("channel {}: message {} journaled, not handed over (stopping): the next "
                  "start hands it over",
                  live->record.name, j.record.platform_message_id);
      }
    }
  };
  auto helper =
      system_.spawn([store, op, hand_over](homed<caf::event_based_actor>* self) -> caf::behavior {
        return {[self, store, op, hand_over](journal_now_atom) -> caf::result<bool> {
          auto promise = self->make_response_promise<bool>();
          self->request(store, store_write_timeout, write_atom::value, std::move(*op))
              .then(
                  [self, promise, hand_over](write_result& r) mutable {
                    if (r) {
                      hand_over();
                      promise.deliver(true);
                    } else {
                      promise.deliver(to_caf_error(r.error()));
                    }
                    self->quit();
                  },
                  [self, promise](caf::error& e) mutable {
                    promise.deliver(e);
                    self->quit();
                  });
          return promise;
        }};
      });
  auto asking = ask<bool>(system_, helper, deadline, journal_now_atom::value);
  auto written = co_await std::move(asking);
  if (!written) {
    if (written.error().code == errc::timeout) {
      co_return fail(errc::unavailable,
                     fmt::format("the journal write took longer than {} ms; deliver it again",
                                 deadline.count()));
    }
    co_return tl::unexpected(written.error());
  }
  co_return expected<void>{};
}

} // namespace troupe::actors
