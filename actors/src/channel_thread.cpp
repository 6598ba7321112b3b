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

// How long the thread waits for the conversation to take a message (it is durable
// then); a refusal or a timeout retries the message after the outbox's back-off.
constexpr auto submit_timeout = std::chrono::seconds(30);
// Beyond the agent's own deadline, how long the thread waits for a run's result.
constexpr auto run_grace = std::chrono::seconds(60);
// Attempts to hand one message to its conversation before it is dead-lettered.
constexpr int max_submit_attempts = 5;
// The longest a typing indicator is kept up for one stretch of runs.
constexpr auto typing_cap = std::chrono::minutes(2);

std::chrono::milliseconds backoff(const outbox_policy& p, std::int64_t attempts) {
  auto wait = p.first_backoff;
  for (std::int64_t k = 1; k < attempts && wait < p.max_backoff; ++k) {
    wait *= 2;
  }
  return std::min(wait, p.max_backoff);
}

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

// --- typing -------------------------------------------------------------------------------

/// Shows the platform's typing indicator while runs of the thread are awaited, for at most
/// `typing_cap`; its calls go their own way and never touch a reply.
void start_typing(thread_state& st) {
  const auto& adapter = channel_of(st).adapter;
  if (st.typing.active || !st.thread || adapter->typing_interval().count() <= 0) {
    return;
  }
  st.typing.active = std::make_shared<std::atomic<bool>>(true);
  auto* http = st.spec.context->http_here();
  asio::co_spawn(
      http->get_executor(),
      net::channel::keep_typing(adapter, *http, st.thread->reply_to, st.typing.active, typing_cap),
      asio::detached);
}

void stop_typing(thread_state& st) {
  if (st.typing.active) {
    st.typing.active->store(false);
    st.typing.active.reset();
  }
}

// --- binding the thread to its conversation ----------------------------------------------

/// Reads the thread row and its conversation; true when both exist.
bool load_binding(thread_state& st) {
  const auto& ctx = *st.spec.context;
  auto found = ctx.reads->with([&](storage::connection& c) {
    return storage::find_channel_thread(c, channel_of(st).record.id, st.spec.thread_key);
  });
  if (!found || !found->conversation_id) {
    return false;
  }
  auto conversation = ctx.reads->with([&](storage::connection& c) {
    return storage::find_conversation(c, *found->conversation_id);
  });
  if (!conversation) {
    return false;
  }
  auto archive = ctx.reads->with(
      [&](storage::connection& c) { return storage::find_channel_archive(c, conversation->id); });
  st.archived_at = archive ? static_cast<std::size_t>(archive->message_count) : 0;
  st.thread = std::move(*found);
  st.conversation = std::move(*conversation);
  return true;
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
void bind(thread_self self, const storage::inbound_record& first) {
  auto& st = self->state;
  const auto& ch = channel_of(st);
  storage::conversation_record conversation;
  conversation.uuid = st.spec.context->chat->new_conversation_id();
  conversation.agent_id = ch.record.agent_id;
  conversation.title = thread_title(st);
  const auto identity = channel_identity(ch.record.name, first.sender);
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

std::vector<std::string> parts_of(const net::channel::channel_adapter& adapter,
                                  const std::string& text) {
  auto parts = adapter.split(text);
  if (parts.empty()) {
    parts.emplace_back("(no answer)");
  }
  return parts;
}

std::vector<storage::outbox_record> reply_rows(const thread_state& st, const std::string& key,
                                               const std::string& text) {
  std::vector<storage::outbox_record> rows;
  std::int64_t n = 0;
  for (auto& piece : parts_of(*channel_of(st).adapter, text)) {
    storage::outbox_record o;
    o.channel_id = channel_of(st).record.id;
    o.thread_id = st.thread ? st.thread->id : 0;
    o.run_uuid = key;
    o.part = n++;
    o.text = std::move(piece);
    rows.push_back(std::move(o));
  }
  return rows;
}

void queue_recorded(thread_self self, const std::vector<storage::outbox_record>& rows) {
  auto& s = self->state;
  // Read back: an entry of this (run, part) may be recorded and sent already (a steered
  // message gets the result of the run it joined).
  for (const auto& p : rows) {
    auto stored = s.spec.context->reads->with(
        [&](storage::connection& c) { return storage::find_outbox_part(c, p.run_uuid, p.part); });
    if (stored && stored->status == "pending" &&
        std::none_of(s.outbox.begin(), s.outbox.end(),
                     [&](const storage::outbox_record& q) { return q.id == stored->id; })) {
      s.outbox.push_back(std::move(*stored));
    }
  }
  pump_outbox(self);
}

/// Records the run's answer in the outbox (once per (run, part)), marks the message
/// done, and queues the parts for sending.
void record_reply(thread_self self, storage::row_id inbound_id, run_result result) {
  auto& st = self->state;
  std::string text = result.text;
  if (result.status != storage::run_status::succeeded) {
    text = result.status == storage::run_status::cancelled
               ? "The run was cancelled."
               : fmt::format("Sorry, this message could not be answered: {}",
                             result.error.empty() ? "the run failed" : result.error);
  }
  std::vector<storage::outbox_record> parts;
  // A run cancelled by `/stop` was answered by the command ("Stopped …").
  if (result.status != storage::run_status::cancelled || !st.stopped_runs.contains(result.run_id)) {
    parts = reply_rows(st, result.run_id, text);
  }
  auto op = storage::make_write("record channel reply",
                                [parts, inbound_id](storage::connection& c) -> expected<void> {
                                  for (const auto& p : parts) {
                                    if (auto ok = storage::enqueue_outbox(c, p); !ok) {
                                      return tl::unexpected(ok.error());
                                    }
                                  }
                                  return storage::set_inbound_status(c, inbound_id, "done");
                                });
  store(self, std::move(op), [self, parts, run_id = result.run_id](write_result r) mutable {
    auto& s = self->state;
    --s.waiting_runs;
    if (s.waiting_runs == 0) {
      stop_typing(s);
    }
    if (!r) {
      log::error("channel {} thread {}: the reply of run {} cannot be recorded: {}",
                 channel_of(s).record.name, s.spec.thread_key, run_id, r.error().message);
      touch(self);
      return;
    }
    queue_recorded(self, parts);
    refresh_archive(self);
    touch(self);
  });
}

/// The result of a run that ended before a restart, from its rows (its final answer, or
/// why it has none).
run_result stored_result(const channel_thread_context& ctx, const std::string& run_uuid) {
  run_result r;
  r.run_id = run_uuid;
  r.status = storage::run_status::failed;
  auto text = ctx.reads->with(
      [&](storage::connection& c) -> expected<std::pair<storage::run_record, std::string>> {
        auto run = storage::find_run_by_uuid(c, run_uuid);
        if (!run) {
          return tl::unexpected(run.error());
        }
        std::string answer;
        if (auto id = storage::final_answer_id(c, run->id); id && *id != 0) {
          if (auto m = storage::find_message(c, *id)) {
            answer = m->content;
          }
        }
        return std::pair{std::move(*run), std::move(answer)};
      });
  if (!text) {
    r.error = "its run was lost in a restart; please send it again";
    return r;
  }
  const auto& [run, answer] = *text;
  if (run.status == storage::run_status::succeeded && !answer.empty()) {
    r.status = storage::run_status::succeeded;
    r.text = answer;
  } else if (run.status == storage::run_status::interrupted) {
    r.error = "its run was interrupted by a restart; please send it again";
  } else {
    r.status = run.status == storage::run_status::cancelled ? storage::run_status::cancelled
                                                            : storage::run_status::failed;
    r.error = run.error.empty() ? std::string("the run did not finish") : run.error;
  }
  return r;
}

/// Waits (through the bridge) for the run's result, then records the reply.
void await_result(thread_self self, storage::row_id inbound_id, run_ticket ticket,
                  std::chrono::milliseconds limit) {
  auto& st = self->state;
  ++st.waiting_runs;
  st.runs.push_back(awaited_run{ticket.run_id, ticket.conversation_id, ticket});
  start_typing(st);
  auto* http = st.spec.context->http_here();
  auto waiting = st.spec.context->chat->wait(ticket, limit);
  start_io(self, http->get_executor(), std::move(waiting),
           [self, inbound_id, run_id = ticket.run_id](expected<expected<run_result>> r) mutable {
             auto& s = self->state;
             if (auto it = std::find_if(s.runs.begin(), s.runs.end(),
                                        [&](const awaited_run& a) { return a.run_id == run_id; });
                 it != s.runs.end()) {
               s.runs.erase(it);
             }
             run_result result;
             if (r && *r) {
               result = std::move(**r);
             } else {
               result.run_id = run_id;
               result.status = storage::run_status::failed;
               result.error = !r ? r.error().message : r->error().message;
             }
             if (result.run_id.empty()) {
               result.run_id = run_id;
             }
             record_reply(self, inbound_id, std::move(result));
           });
}

void retry_front_later(thread_self self) {
  auto& st = self->state;
  ++st.submit_failures;
  self->delayed_send(self,
                     std::chrono::duration_cast<caf::timespan>(
                         backoff(st.spec.context->outbox, st.submit_failures)),
                     outbox_atom::value);
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
    st.inbox.pop_front();
    st.submit_failures = 0;
    pump_inbox(self);
    return;
  }
  if (!st.conversation && !load_binding(st)) {
    st.submitting = true;
    bind(self, st.inbox.front());
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
    st.inbox.pop_front();
    pump_inbox(self);
    return;
  }
  const auto message = st.inbox.front();
  chat_submission submission;
  submission.user_id = st.conversation->owner_user_id;
  submission.conversation = *st.conversation;
  submission.text = message.text;
  // The run id was journaled with the message: a restart hands the same run back
  // instead of starting a second one.
  submission.run_id = message.run_uuid;
  submission.awaited = true;
  submission.policy = channel_of(st).queue;
  if (command.kind == channel::command_kind::compact) {
    // The conversation's compaction path: exactly "/compact", as a turn of its own.
    submission.text = "/compact";
    submission.policy = queue_policy::followup;
  }
  const auto limit = ctx.chat->run_timeout(*agent) + run_grace;
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
        s.inbox.pop_front();
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
        await_result(self, message.id, std::move(**r), limit);
        pump_inbox(self);
      });
}

// --- the outbox -----------------------------------------------------------------------

/// Sets the retry timer for the front part when it is not due yet; true when it is due.
bool due(thread_self self) {
  auto& st = self->state;
  const auto now = storage::now_millis();
  const auto at = st.outbox.front().next_attempt_at;
  if (at <= now) {
    return true;
  }
  if (!st.timer_set) {
    st.timer_set = true;
    self->delayed_send(
        self, std::chrono::duration_cast<caf::timespan>(std::chrono::milliseconds(at - now)),
        outbox_atom::value);
  }
  return false;
}

void send_front(thread_self self);

/// Sends the front part: claims it (the intent, durable first), then sends.
void pump_outbox(thread_self self) {
  auto& st = self->state;
  if (st.draining || st.sending || st.outbox.empty() || !due(self)) {
    touch(self);
    return;
  }
  st.sending = true;
  const auto id = st.outbox.front().id;
  store(self,
        storage::make_write("claim outbox entry",
                            [id](storage::connection& c) { return storage::claim_outbox(c, id); }),
        [self](write_result r) {
          auto& s = self->state;
          if (!r) {
            // Not pending any more (sent, dead, or another life of this thread has it).
            log::warn("channel {} thread {}: outbox entry {} not claimed: {}",
                      channel_of(s).record.name, s.spec.thread_key, s.outbox.front().id,
                      r.error().message);
            s.sending = false;
            s.outbox.pop_front();
            pump_outbox(self);
            return;
          }
          ++s.outbox.front().attempts;
          send_front(self);
        });
}

void send_front(thread_self self) {
  auto& st = self->state;
  const auto& queued = st.outbox.front();
  net::channel::outbound_part part;
  part.reply_to = st.thread ? st.thread->reply_to : std::string();
  part.thread_key = st.spec.thread_key;
  part.run_id = queued.run_uuid;
  part.part = queued.part;
  part.text = queued.text;
  const auto& ctx = *st.spec.context;
  auto* http = ctx.http_here();
  auto adapter = channel_of(st).adapter;
  // The adapter outlives the send: the coroutine holds it.
  auto sending =
      [](std::shared_ptr<net::channel::channel_adapter> a, net::http_client* client,
         net::channel::outbound_part p,
         std::chrono::milliseconds deadline) -> asio::awaitable<net::channel::send_result> {
    auto sent = a->send(*client, std::move(p), deadline);
    co_return co_await std::move(sent);
  }(adapter, http, std::move(part), ctx.outbox.send_timeout);
  start_io(self, http->get_executor(), std::move(sending),
           [self](expected<net::channel::send_result> r) {
             auto& s = self->state;
             auto entry = s.outbox.front();
             net::channel::send_result result;
             if (r) {
               result = std::move(*r);
             } else {
               result.outcome = net::channel::send_outcome::retry;
               result.error = r.error().message;
             }
             const auto& policy = s.spec.context->outbox;
             storage::write_op op;
             bool finished = true;
             switch (result.outcome) {
               case net::channel::send_outcome::sent:
                 op = storage::make_write(
                     "outbox entry sent",
                     [id = entry.id, pid = result.platform_message_id](storage::connection& c) {
                       return storage::mark_outbox_sent(c, id, pid);
                     });
                 break;
               case net::channel::send_outcome::retry: {
                 const auto wait = std::max(result.retry_after, backoff(policy, entry.attempts));
                 const auto at = storage::now_millis() + wait.count();
                 finished = entry.attempts >= policy.max_attempts;
                 s.outbox.front().next_attempt_at = at;
                 s.outbox.front().status = finished ? "dead" : "pending";
                 op = storage::make_write(
                     "outbox entry failed", [id = entry.id, why = result.error, at,
                                             max = policy.max_attempts](storage::connection& c) {
                       return storage::record_outbox_failure(c, id, why, at, max);
                     });
                 log::warn("channel {} thread {}: run {} part {} not sent ({}), {}",
                           channel_of(s).record.name, s.spec.thread_key, entry.run_uuid, entry.part,
                           result.error,
                           finished ? std::string("dead-lettered")
                                    : fmt::format("retry in {} ms", wait.count()));
                 break;
               }
               case net::channel::send_outcome::failed:
                 op = storage::make_write("outbox entry dead", [id = entry.id, why = result.error](
                                                                   storage::connection& c) {
                   return storage::mark_outbox_dead(c, id, why);
                 });
                 log::warn("channel {} thread {}: run {} part {} dead-lettered: {}",
                           channel_of(s).record.name, s.spec.thread_key, entry.run_uuid, entry.part,
                           result.error);
                 break;
             }
             store(self, std::move(op), [self, finished](write_result) {
               auto& st2 = self->state;
               st2.sending = false;
               if (finished) {
                 st2.outbox.pop_front();
               }
               if (st2.draining) {
                 st2.draining->deliver(true);
                 self->quit();
                 return;
               }
               pump_outbox(self);
             });
           });
}

channel_thread_actor::behavior_type channel_thread(thread_self self, channel_thread_spec spec) {
  self->state.spec = std::move(spec);
  self->attach_functor([on_exit = self->state.spec.on_exit, addr = self->address()] {
    if (on_exit) {
      on_exit(addr);
    }
  });
  touch(self);
  return {
      [self](inbound_atom, storage::inbound_record& m) -> bool {
        auto& st = self->state;
        if (m.status == "processing") {
          // Accepted by its conversation before a restart: wait for that run.
          if (!st.conversation) {
            load_binding(st);
          }
          const auto& ctx = *st.spec.context;
          auto found = ctx.chat->find_run(m.run_uuid);
          if (found) {
            await_result(self, m.id, found->ticket,
                         ctx.outbox.send_timeout + std::chrono::hours(1));
          } else {
            ++st.waiting_runs;
            record_reply(self, m.id, stored_result(ctx, m.run_uuid));
          }
          return true;
        }
        st.inbox.push_back(std::move(m));
        pump_inbox(self);
        return true;
      },
      [self](outbox_atom, storage::outbox_record& entry) {
        auto& st = self->state;
        if (entry.status == "sending") {
          entry.status = "pending"; // recovered: the service set it back
        }
        if (!st.thread) {
          load_binding(st);
        }
        st.outbox.push_back(std::move(entry));
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
        if (generation == st.generation && idle(st)) {
          self->quit();
        }
      },
      [self](drain_atom) -> caf::result<bool> {
        auto& st = self->state;
        stop_typing(st);
        if (!st.sending) {
          self->quit();
          return true;
        }
        st.draining = self->make_response_promise<bool>();
        return *st.draining;
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
