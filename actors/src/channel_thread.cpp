#include "troupe/actors/channel_thread.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fmt/format.h>

#include "channel_thread_state.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/channel_archives.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"
#include "troupe/tools/blocking_pool.hpp"

namespace troupe::actors {

net::http_client* channel_thread_context::http_here() const noexcept {
  if (shard_http) {
    if (const auto here = shard_set::current(); here && *here < shard_http->size()) {
      return (*shard_http)[*here];
    }
  }
  return http;
}

namespace channel_detail {

// Attempts to hand one message to its conversation before it is dead-lettered.
constexpr int max_submit_attempts = 5;
// Journal rows a thread remembers having taken (a late second hand-over is dropped).
constexpr std::size_t taken_kept = 4'096;
// How long a waking thread's binding read may take on the blocking pool.
constexpr auto binding_read_timeout = std::chrono::seconds(5);

bool idle(const thread_state& st) {
  return st.inbox.empty() && !st.submitting && st.outbox.empty() && !st.sending &&
         st.waiting_runs == 0;
}

void touch(thread_self self) {
  auto& st = self->state;
  ++st.generation;
  if (idle(st)) {
    self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.spec.context->idle_ttl),
                       thread_idle_atom::value, st.generation);
  }
}

// --- binding the thread to its conversation ----------------------------------------------

/// A thread's binding as stored: its row, its conversation, and how many of the
/// conversation's messages an archive took.
struct stored_binding {
  storage::channel_thread_record thread;
  storage::conversation_record conversation;
  std::size_t archived_at = 0;
};

/// Reads the binding of the thread `key` of `channel`; none when the thread is not bound
/// (or its conversation is gone).
std::optional<stored_binding> read_binding(storage::read_pool& reads, storage::row_id channel,
                                           const std::string& key) {
  return reads.with([&](storage::connection& c) -> std::optional<stored_binding> {
    auto found = storage::find_channel_thread(c, channel, key);
    if (!found || !found->conversation_id) {
      return std::nullopt;
    }
    auto conversation = storage::find_conversation(c, *found->conversation_id);
    if (!conversation) {
      return std::nullopt;
    }
    auto archive = storage::find_channel_archive(c, conversation->id);
    return stored_binding{std::move(*found), std::move(*conversation),
                          archive ? static_cast<std::size_t>(archive->message_count) : 0};
  });
}

void apply_binding(thread_state& st, stored_binding binding) {
  st.archived_at = binding.archived_at;
  st.thread = std::move(binding.thread);
  st.conversation = std::move(binding.conversation);
}

bool load_binding(thread_state& st) {
  auto binding =
      read_binding(*st.spec.context->reads, channel_of(st).record.id, st.spec.thread_key);
  if (!binding) {
    return false;
  }
  apply_binding(st, std::move(*binding));
  return true;
}

std::string owner_identity(const thread_state& st, const storage::inbound_record& m) {
  const auto& ch = channel_of(st);
  return channel_owner_identity(ch.scope, ch.record.name, st.spec.thread_key, m.sender);
}

std::string thread_title(const thread_state& st) {
  auto title = fmt::format("{} · {}", channel_of(st).record.name, st.spec.thread_key);
  if (title.size() > 80) {
    title.resize(80);
  }
  return title;
}

/// Creates the owner, the conversation and the thread row in one commit (or points an
/// existing thread row whose conversation is gone at a new one), then hands on.
void bind_thread(thread_self self, const storage::inbound_record& first) {
  auto& st = self->state;
  const auto& ch = channel_of(st);
  storage::conversation_record conversation;
  conversation.uuid = st.spec.context->chat->new_conversation_id();
  conversation.agent_id = ch.record.agent_id;
  conversation.title = thread_title(st);
  // The thread's own identity under `thread` scope (its senders share it), else the
  // sender's (docs/channels.md: who owns what).
  const auto identity = owner_identity(st, first);
  storage::channel_thread_record thread;
  thread.channel_id = ch.record.id;
  thread.thread_key = st.spec.thread_key;
  thread.reply_to = first.reply_to;
  auto op = storage::make_write(
      "bind channel thread",
      [conversation, thread, identity](storage::connection& c) -> expected<storage::row_id> {
        auto owner = storage::ensure_channel_user(c, identity);
        if (!owner) {
          return tl::unexpected(owner.error());
        }
        auto existing = storage::find_channel_thread(c, thread.channel_id, thread.thread_key);
        if (existing && existing->conversation_id) {
          return existing->id; // bound before (an earlier life of this actor)
        }
        if (existing) {
          owner = existing->owner_user_id; // its conversation was deleted: a new one, same owner
        }
        auto row = conversation;
        row.owner_user_id = *owner;
        auto conversation_id = storage::insert_conversation(c, row);
        if (!conversation_id) {
          return tl::unexpected(conversation_id.error());
        }
        if (existing) {
          if (auto ok = storage::set_thread_conversation(c, existing->id, *conversation_id); !ok) {
            return tl::unexpected(ok.error());
          }
          return existing->id;
        }
        auto binding = thread;
        binding.owner_user_id = *owner;
        binding.conversation_id = *conversation_id;
        auto bound = storage::bind_channel_thread(c, binding);
        if (!bound) {
          return tl::unexpected(bound.error());
        }
        return bound->id;
      });
  store(self, std::move(op), [self](write_result r) {
    auto& s = self->state;
    if (!r || !load_binding(s)) {
      log::error("channel {} thread {}: cannot bind a conversation: {}", channel_of(s).record.name,
                 s.spec.thread_key, r ? "the binding cannot be read back" : r.error().message);
      s.submitting = false;
      ++s.submit_failures;
      pump_inbox(self);
      return;
    }
    s.submitting = false;
    pump_inbox(self);
  });
}

// --- handing messages to the conversation -----------------------------------------------

/// Marks the message dead (it could not be handed over) and moves on.
void give_up(thread_self self, const storage::inbound_record& m, const std::string& why) {
  auto& st = self->state;
  log::error("channel {} thread {}: message {} dead-lettered: {}", channel_of(st).record.name,
             st.spec.thread_key, m.platform_message_id, why);
  store(self,
        storage::make_write("dead-letter inbound message",
                            [id = m.id](storage::connection& c) {
                              return storage::set_inbound_status(c, id, "dead");
                            }),
        [](write_result) {});
}

void pop_front_message(thread_self self) {
  auto& st = self->state;
  if (st.inbox.empty()) {
    return;
  }
  const auto id = st.inbox.front().id;
  st.inbox.pop_front();
  if (st.taken.insert(id).second) {
    st.taken_order.push_back(id);
    if (st.taken_order.size() > taken_kept) {
      st.taken.erase(st.taken_order.front());
      st.taken_order.pop_front();
    }
  }
}

void retry_front_later(thread_self self) {
  auto& st = self->state;
  ++st.submit_failures;
  self->delayed_send(self,
                     std::chrono::duration_cast<caf::timespan>(
                         backoff(st.spec.context->outbox, st.submit_failures)),
                     outbox_atom::value);
}

/// Creates (or finds) the user row of `sender` (`channel:<name>:<sender>`), then hands
/// the front message on.
void resolve_sender(thread_self self, const std::string& sender) {
  auto& st = self->state;
  const auto identity = channel_identity(channel_of(st).record.name, sender);
  auto user = std::make_shared<storage::row_id>(0);
  store(self,
        storage::make_write("channel sender's user",
                            [identity, user](storage::connection& c) -> expected<void> {
                              auto id = storage::ensure_channel_user(c, identity);
                              if (!id) {
                                return tl::unexpected(id.error());
                              }
                              *user = *id;
                              return {};
                            }),
        [self, sender, user](write_result r) {
          auto& s = self->state;
          s.submitting = false;
          if (!r) {
            log::warn("channel {} thread {}: the user of sender {} cannot be made: {}",
                      channel_of(s).record.name, s.spec.thread_key, sender, r.error().message);
            retry_front_later(self);
            return;
          }
          s.sender_users[sender] = *user;
          pump_inbox(self);
        });
}

/// A thread that woke with a message reads its binding off its shard (on the blocking
/// pool), then hands the message on, or binds a conversation first when it has none.
void wake_binding(thread_self self) {
  const auto& ctx = *self->state.spec.context;
  const auto then = [self](std::optional<stored_binding> binding) {
    auto& s = self->state;
    if (binding && !s.conversation) {
      apply_binding(s, std::move(*binding));
    }
    if (s.conversation || s.inbox.empty()) {
      s.submitting = false;
      pump_inbox(self);
      return;
    }
    // Not `bind`: the interface names std::string, so ADL would find std::bind.
    bind_thread(self, s.inbox.front());
  };
  if (!ctx.blocking) {
    then(read_binding(*ctx.reads, channel_of(self->state).record.id, self->state.spec.thread_key));
    return;
  }
  auto job = [reads = ctx.reads, channel = channel_of(self->state).record.id,
              key = self->state.spec.thread_key](const tools::job_control&) {
    return read_binding(*reads, channel, key);
  };
  auto reading = ctx.blocking->run(std::move(job), binding_read_timeout);
  start_io(self, ctx.http_here()->get_executor(), std::move(reading),
           [self, then](expected<expected<std::optional<stored_binding>>> r) {
             auto& s = self->state;
             if (r && *r) {
               then(std::move(**r));
               return;
             }
             // The pool refused the job (its queue is full) or missed its deadline: read
             // here rather than hold the message back.
             then(read_binding(*s.spec.context->reads, channel_of(s).record.id, s.spec.thread_key));
           });
}

/// Hands the front message to the conversation (after binding, once).
void pump_inbox(thread_self self) {
  auto& st = self->state;
  if (st.submitting || st.inbox.empty()) {
    touch(self);
    return;
  }
  if (st.submit_failures >= max_submit_attempts) {
    give_up(self, st.inbox.front(), "the conversation did not take it");
    pop_front_message(self);
    st.submit_failures = 0;
    pump_inbox(self);
    return;
  }
  if (!st.conversation) {
    st.submitting = true;
    wake_binding(self);
    return;
  }
  // A slash command is answered here, without the model; `/compact` goes to the
  // conversation (its run compresses the history), an unknown `/x` to the model.
  const auto command =
      channel::parse_command(st.inbox.front().text, channel_of(st).adapter->bot_name());
  if (command.kind != channel::command_kind::none &&
      command.kind != channel::command_kind::compact) {
    st.submitting = true;
    answer_command(self, st.inbox.front(), command);
    return;
  }
  st.submitting = true;
  const auto& ctx = *st.spec.context;
  auto agent = ctx.catalog ? ctx.catalog->agent(st.conversation->agent_id)
                           : ctx.reads->with([&](storage::connection& c) {
                               return storage::find_agent(c, st.conversation->agent_id);
                             });
  if (!agent) {
    st.submitting = false;
    give_up(self, st.inbox.front(), "the channel's agent is gone: " + agent.error().message);
    pop_front_message(self);
    pump_inbox(self);
    return;
  }
  const auto message = st.inbox.front();
  // In a thread its senders share, the run uses its sender's memory, never the thread's
  // (nor another sender's): the sender's user row first, once.
  storage::row_id memory_user = 0;
  if (channel_of(st).scope == session_scope::thread) {
    auto known = st.sender_users.find(message.sender);
    if (known == st.sender_users.end()) {
      resolve_sender(self, message.sender);
      return;
    }
    memory_user = known->second;
  }
  chat_submission submission;
  submission.user_id = st.conversation->owner_user_id;
  submission.conversation = *st.conversation;
  submission.text = message.text;
  // The run id was journaled with the message: a restart hands the same run back
  // instead of starting a second one.
  submission.run_id = message.run_uuid;
  submission.awaited = true;
  submission.policy = channel_of(st).queue;
  submission.memory_user = memory_user;
  if (command.kind == channel::command_kind::compact) {
    // The conversation's compaction path: exactly "/compact", as a turn of its own.
    submission.text = "/compact";
    submission.policy = queue_policy::followup;
  }
  const auto limit = ctx.chat->run_timeout(*agent) + ctx.run_grace;
  auto* http = ctx.http_here();
  auto submitting = ctx.chat->submit(std::move(submission));
  start_io(
      self, http->get_executor(), std::move(submitting),
      [self, message, limit](expected<expected<run_ticket>> r) mutable {
        auto& s = self->state;
        s.submitting = false;
        if (!r || !*r) {
          const auto why = !r ? r.error().message : r->error().message;
          log::warn("channel {} thread {}: message {} not taken yet: {}", channel_of(s).record.name,
                    s.spec.thread_key, message.platform_message_id, why);
          // Its conversation may be gone (deleted): bind again.
          s.conversation.reset();
          retry_front_later(self);
          return;
        }
        s.submit_failures = 0;
        pop_front_message(self);
        // The user is told of a reply that ended dead-lettered before this one's answer.
        auto notice = owed_notice(s, message);
        store(self,
              storage::make_write("channel message handed to its run",
                                  [id = message.id, run = (*r)->run_id,
                                   notice](storage::connection& c) -> expected<void> {
                                    if (notice) {
                                      if (auto ok = record_notice(c, *notice); !ok) {
                                        return ok;
                                      }
                                    }
                                    return storage::set_inbound_status(c, id, "processing", run);
                                  }),
              [self, notice](write_result handed) {
                if (handed && notice) {
                  queue_recorded(self, {notice->row});
                }
              });
        await_result(self, message.id, message.reply_to, std::move(**r), limit);
        pump_inbox(self);
      });
}

channel_thread_actor::behavior_type channel_thread(thread_self self, channel_thread_spec spec) {
  self->state.spec = std::move(spec);
  self->attach_functor(
      [on_exit = self->state.spec.on_exit, addr = self->address()](const caf::error& reason) {
        if (on_exit) {
          on_exit(addr, reason);
        }
      });
  touch(self);
  return {
      [self](inbound_atom, storage::inbound_record& m) {
        auto& st = self->state;
        // Handed over twice (a redelivery of a row whose first hand-over was late): once.
        if (st.taken.contains(m.id) ||
            std::any_of(st.inbox.begin(), st.inbox.end(),
                        [&](const storage::inbound_record& q) { return q.id == m.id; })) {
          return;
        }
        if (m.status == "processing") {
          // Accepted by its conversation before a restart: wait for that run.
          st.taken.insert(m.id);
          st.taken_order.push_back(m.id);
          if (!st.conversation) {
            load_binding(st);
          }
          const auto& ctx = *st.spec.context;
          auto found = ctx.chat->find_run(m.run_uuid);
          if (found) {
            await_result(self, m.id, m.reply_to, found->ticket,
                         ctx.outbox.send_timeout + std::chrono::hours(1));
          } else {
            ++st.waiting_runs;
            record_reply(self, m.id, m.reply_to, stored_result(ctx, m.run_uuid));
          }
          return;
        }
        st.inbox.push_back(std::move(m));
        pump_inbox(self);
      },
      [self](outbox_atom, storage::outbox_record& entry) {
        auto& st = self->state;
        if (entry.status == "sending") {
          entry.status = "pending"; // recovered: the service set it back
        }
        if (!st.thread) {
          load_binding(st);
        }
        if (std::none_of(st.outbox.begin(), st.outbox.end(),
                         [&](const storage::outbox_record& q) { return q.id == entry.id; })) {
          st.outbox.push_back(std::move(entry));
        }
        pump_outbox(self);
      },
      [self](outbox_atom) {
        auto& st = self->state;
        st.timer_set = false;
        pump_inbox(self);
        pump_outbox(self);
      },
      [self](thread_idle_atom, std::uint64_t generation) {
        auto& st = self->state;
        if (generation != st.generation || !idle(st)) {
          return;
        }
        // Leaves only when nothing was handed to it meanwhile (its owner checks the
        // mailbox under the lock every hand-over takes).
        if (st.spec.retire &&
            !st.spec.retire(self->address(), [self] { return self->mailbox().empty(); })) {
          touch(self);
          return;
        }
        self->quit();
      },
      [self](preview_atom, preview_delta& delta) { on_preview_delta(self, std::move(delta)); },
      [self](preview_atom, const std::string& run_id) { on_preview_tick(self, run_id); },
      [self](ask_approval_atom, approval_request& request) {
        ask_approval(self, std::move(request));
      },
      [self](drain_atom, caf::actor& waiter) {
        auto& st = self->state;
        stop_typing(st);
        st.draining = std::move(waiter);
        finish_drain(self);
      },
      handle_io_completion(),
  };
}

} // namespace channel_detail

channel_thread_actor spawn_channel_thread(caf::actor_system& system, channel_thread_spec spec) {
  std::optional<std::size_t> home;
  if (auto* shards = shards_of(system)) {
    home = shards->shard_for(fmt::format("{}\n{}", spec.channel->record.name, spec.thread_key));
  }
  return spawn_maybe_on(system, home, channel_detail::channel_thread, std::move(spec));
}

} // namespace troupe::actors
