#include "troupe/actors/conversation.hpp"
#include "conversation_state.hpp"
#include "troupe/actors/shard_scheduler.hpp"

#include <algorithm>
#include <cctype>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/run_journal.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/storage/file_store.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"
#include "troupe/tools/blocking_pool.hpp"
#include "troupe/tools/workspace.hpp"

namespace troupe::actors {

using namespace detail;

namespace {

/// `/compact` (issue 16): the message asks to compress the conversation's prompt now.
bool is_compact_command(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) {
    text.remove_suffix(1);
  }
  return text == "/compact";
}

/// A turn is under way (its run exists).
bool busy(const conversation_state& st) {
  return static_cast<bool>(st.current);
}

void start_next(conversation_self self);

/// Messages waiting for a run: every queued turn's, and those that joined the active
/// run to steer it (counted until that run ends).
std::size_t pending_messages(const conversation_state& st) {
  std::size_t n = busy(st) ? st.current_turn.messages - 1 : 0;
  for (const auto& t : st.queue) {
    n += t.messages;
  }
  return n;
}

/// Why a new message cannot wait now, when `actors.max_pending` messages already do.
std::optional<error> pending_refusal(const conversation_state& st) {
  if (st.spec.max_pending == 0 || !busy(st)) {
    return std::nullopt;
  }
  const auto pending = pending_messages(st);
  if (pending < st.spec.max_pending) {
    return std::nullopt;
  }
  return error{errc::limit_exceeded,
               fmt::format("conversation {} has {} pending messages (actors.max_pending); retry "
                           "once its runs have caught up",
                           st.spec.id, pending)};
}

void schedule_idle(conversation_self self) {
  auto& st = self->state;
  ++st.activity;
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.spec.idle_ttl),
                     idle_atom::value, st.activity);
}

/// Answers everyone waiting for the current turn.
void deliver_turn(conversation_self self, pending_turn& turn, const run_result& result) {
  for (auto& waiting : turn.waiting) {
    waiting.deliver(result);
  }
  for (const auto& observer : turn.observers) {
    self->send(observer, done_atom::value, result);
  }
}

} // namespace

namespace detail {

void on_run_done(conversation_self self, run_result result) {
  auto& st = self->state;
  if (st.current_turn.store_failure) {
    result.status = storage::run_status::failed;
    result.error = fmt::format("the message was not stored, so it did not run: {}",
                               *st.current_turn.store_failure);
  }
  if (result.compressed_history) {
    // The run compressed the history (its summary is stored): later turns start from it.
    st.history = std::move(*result.compressed_history);
    st.history_spans = std::move(result.compressed_spans);
    st.history_spans.resize(st.history.size());
    result.compressed_history.reset();
    result.compressed_spans.clear();
  }
  // `/compact` and its answer are about the prompt, not part of the conversation's.
  if (result.status == storage::run_status::succeeded &&
      !is_compact_command(st.current_turn.text)) {
    remember(self, chat_message{chat_role::user, st.current_turn.text, {}, {}, {}},
             st.current_turn.message_span);
    remember(self, chat_message{chat_role::assistant, result.text, {}, {}, {}}, result.answer_span);
  }
  store_artifacts(self, std::move(result));
}

void end_turn(conversation_self self, run_result result) {
  auto& st = self->state;
  deliver_turn(self, st.current_turn, result);
  st.current = run_actor{};
  st.current_turn = {};
  if (!st.queue.empty()) {
    start_next(self);
  } else {
    schedule_idle(self);
  }
}

} // namespace detail

namespace {

void launch(conversation_self self) {
  auto& st = self->state;
  run_spec spec;
  spec.run_id = st.current_turn.run_id;
  spec.turn_id = fmt::format("{}.turn{}", st.spec.id, st.turns);
  spec.run_row = st.current_turn.run_row;
  // Its row and message are still being written: the run starts now (its model call
  // overlaps the commit) and its own writes follow once the row is known.
  spec.row_pending = st.current_turn.storing;
  spec.row_inserted_running = st.current_turn.starts_at_once || st.current_turn.resume;
  spec.resume = st.current_turn.resume;
  // The user's message was stored with the run row when the turn was accepted.
  spec.persist_user_message = false;
  spec.conversation_row = st.spec.conversation_row;
  spec.owner_user = st.spec.owner_user;
  spec.memory_user = st.current_turn.memory_user;
  spec.agent_row = st.spec.agent_row;
  spec.agent = st.spec.agent;
  spec.provider = st.spec.provider;
  spec.history = st.history;
  spec.history_spans = st.history_spans;
  spec.objective = st.current_turn.text;
  spec.objective_span = st.current_turn.message_span;
  spec.compact_only = is_compact_command(st.current_turn.text);
  spec.workspace = st.spec.workspace;
  spec.tool_timeout = st.spec.tool_timeout;
  spec.io = st.spec.io;
  // On the conversation's shard: the run's LLM transfers and tool calls use its client.
  spec.io.http = spec.io.http_here();
  st.current = spawn_run(self->system(), std::move(spec), caf::actor_cast<run_event_sink>(self));
  await_run(self);
}

void start_next(conversation_self self) {
  auto& st = self->state;
  st.current_turn = std::move(st.queue.front());
  st.queue.pop_front();
  ++st.turns;

  ++st.activity;
  launch(self);
}

/// The turn of `run_id` (current or queued), or null.
pending_turn* find_turn(conversation_state& st, const std::string& run_id) {
  if (st.current && st.current_turn.run_id == run_id) {
    return &st.current_turn;
  }
  for (auto& t : st.queue) {
    if (t.run_id == run_id) {
      return &t;
    }
  }
  return nullptr;
}

/// The accept write of `run_id`'s turn committed with row `row` (or failed with
/// `failure`): the current turn's run learns its row; a queued turn keeps it for its
/// launch, or fails without ever running.
void on_turn_stored(conversation_self self, const std::string& run_id, storage::row_id row,
                    std::optional<std::string> failure) {
  auto& st = self->state;
  if (st.spec.conversation_row == 0 && st.unstored_row && *st.unstored_row != 0) {
    // The write that inserted the conversation committed (it is the first, and the
    // writer applies this conversation's writes in order).
    st.spec.conversation_row = *st.unstored_row;
    st.unstored_row.reset();
  }
  auto* turn = find_turn(st, run_id);
  if (!turn) {
    // Cancelled while its write was in flight: its row must not stay queued.
    if (!failure && row != 0) {
      self->request(*st.spec.io.writer, store_write_timeout, write_atom::value,
                    storage::set_run_status_op(row, storage::run_status::cancelled,
                                               "cancelled before it started"))
          .then([](write_result&) {}, [](caf::error&) {});
    }
    return;
  }
  turn->storing = false;
  turn->run_row = failure ? 0 : row;
  if (turn == &st.current_turn) {
    // The run started while its row was written: it learns the row (0: it fails, and its
    // result ends the turn).
    turn->store_failure = failure;
    self->send(st.current, row_atom::value, turn->run_row, st.spec.conversation_row);
    return;
  }
  if (!failure) {
    return;
  }
  run_result r;
  r.run_id = run_id;
  r.status = storage::run_status::failed;
  r.error = fmt::format("the message was not stored, so it did not run: {}", *failure);
  deliver_turn(self, *turn, r);
  std::erase_if(st.queue, [&](const pending_turn& t) { return t.run_id == run_id; });
}

/// Counts the write of a message about to be taken against the store writer's backlog
/// (`storage.writer_max_queue`); why it cannot be taken when the backlog is full.
/// `store_turn` releases the count when the writer answers.
std::optional<error> admit_store(conversation_state& st, bool recovered) {
  const auto& backlog = st.spec.io.writer_backlog;
  if (!stores(st) || recovered || !backlog || backlog->try_admit()) {
    return std::nullopt;
  }
  return backlog->overloaded();
}

/// Stores the user's message in one write: with a new run row (queued) for `run_id`, or,
/// when `joins` names a run that takes it (steer, collect), on that run's row. `ack` is
/// answered once the write committed, so an acknowledged message is never lost.
void store_turn(conversation_self self, const std::string& run_id, const std::string& joins,
                const std::string& text, std::optional<caf::response_promise> ack,
                storage::message_span span) {
  auto& st = self->state;
  storage::message_record message;
  message.conversation_id = st.spec.conversation_row;
  message.role = "user";
  message.content = text;
  message.created_at = unix_millis_now();
  // Where the conversation's row id comes from when it is not known yet: the first write
  // inserts the conversation and fills `slot`; the writes behind it read it there.
  std::shared_ptr<storage::row_id> slot = st.spec.conversation_row == 0 ? st.unstored_row : nullptr;
  std::optional<storage::conversation_record> insert =
      std::exchange(st.spec.unstored, std::nullopt);
  std::vector<chat_message> insert_history = std::exchange(st.spec.unstored_history, {});
  // Inserts the conversation when this write is the one that creates it, then names it
  // in `message` (and returns its row): the conversation's row, known or just written.
  auto conversation_row =
      [slot, insert = std::move(insert), insert_history = std::move(insert_history)](
          storage::connection& c, storage::message_record& m) -> expected<storage::row_id> {
    if (insert) {
      auto id = storage::insert_conversation(c, *insert);
      if (!id) {
        return id;
      }
      for (const auto& h : insert_history) {
        storage::message_record r;
        r.conversation_id = *id;
        r.role = std::string(to_string(h.role));
        r.content = h.content;
        if (auto added = storage::insert_message(c, r); !added) {
          return tl::unexpected(added.error());
        }
      }
      *slot = *id;
    }
    if (slot) {
      if (*slot == 0) {
        return fail(errc::unavailable, "the conversation itself could not be stored");
      }
      m.conversation_id = *slot;
    }
    return m.conversation_id;
  };
  storage::write_op op;
  if (joins.empty()) {
    storage::run_record row;
    row.uuid = run_id;
    row.agent_id = st.spec.agent_row;
    row.model = st.spec.agent.model;
    row.created_at = message.created_at;
    if (const auto* turn = find_turn(st, run_id); turn && turn->starts_at_once) {
      // Its run is under way already: one commit stores the row and its start.
      row.status = storage::run_status::running;
      row.started_at = message.created_at;
    }
    op = storage::make_write("store the message and its run",
                             [row = std::move(row), message = std::move(message),
                              conversation_row = std::move(conversation_row),
                              span](storage::connection& c) -> expected<storage::row_id> {
                               auto m = message;
                               auto conversation = conversation_row(c, m);
                               if (!conversation) {
                                 return conversation;
                               }
                               auto r = row;
                               r.conversation_id = *conversation;
                               auto id = storage::insert_run(c, r);
                               if (!id) {
                                 return id;
                               }
                               m.run_id = *id;
                               auto inserted = storage::insert_message(c, m);
                               if (!inserted) {
                                 return tl::unexpected(inserted.error());
                               }
                               if (span) {
                                 // Read by the run's summary write, applied after this one.
                                 *span = storage::stored_span{*inserted, *inserted};
                               }
                               return *id;
                             });
  } else {
    op = storage::make_write(
        "store the message",
        [joins, message = std::move(message), conversation_row = std::move(conversation_row)](
            storage::connection& c) -> expected<storage::row_id> {
          // The run it joins was written earlier by this conversation (one
          // sender's writes apply in order), unless that write failed.
          auto m = message;
          if (auto conversation = conversation_row(c, m); !conversation) {
            return conversation;
          }
          if (auto run = storage::find_run_by_uuid(c, joins)) {
            m.run_id = run->id;
          }
          return storage::insert_message(c, m);
        });
  }
  const bool new_row = joins.empty();
  auto done = [self, run_id, new_row, ack](std::optional<std::string> failure,
                                           storage::row_id id) mutable {
    if (const auto& backlog = self->state.spec.io.writer_backlog) {
      backlog->done(); // counted by admit_store when the message was taken
    }
    if (new_row) {
      on_turn_stored(self, run_id, id, failure);
    }
    if (ack) {
      if (failure) {
        ack->deliver(caf::make_error(caf::sec::runtime_error,
                                     fmt::format("the message was not stored: {}", *failure)));
      } else {
        ack->deliver(true);
      }
    }
  };
  self->request(*st.spec.io.writer, store_write_timeout, write_atom::value, std::move(op))
      .then(
          [done](write_result& r) mutable {
            done(r ? std::nullopt : std::optional<std::string>(r.error().message), r ? *r : 0);
          },
          [done](caf::error& e) mutable { done(from_caf_error(e).message, 0); });
}

/// Queues `turn`, or hands it to the active run, under the agent's queue policy, and
/// stores its message; `ack` (when set) is answered once the message is durable.
void accept(conversation_self self, pending_turn turn,
            std::optional<caf::response_promise> ack = std::nullopt) {
  auto& st = self->state;
  ++st.activity;
  if (turn.run_id.empty()) {
    // Numbered by arrival, so a queued turn can be cancelled by its id.
    turn.run_id = fmt::format("{}.run{}", st.spec.id, ++st.arrivals);
  }
  const bool durable = stores(st) && !turn.recovered;
  const auto text = turn.text;
  const auto run_id = turn.run_id;
  // A message that starts a turn of its own records its row for the turn's run.
  storage::message_span span;
  if (durable) {
    span = std::make_shared<storage::stored_span>();
    turn.message_span = span;
  }
  // The run that takes this message when it does not get a run of its own.
  std::string joins;
  if (!busy(st)) {
    turn.storing = durable;
    turn.starts_at_once = durable;
    st.queue.push_back(std::move(turn));
    start_next(self);
  } else {
    const auto policy =
        turn.recovered ? queue_policy::followup : turn.policy.value_or(st.spec.agent.queue);
    const auto join = [](pending_turn& into, pending_turn& from) {
      into.text += "\n\n" + from.text;
      into.messages += from.messages;
      for (auto& w : from.waiting) {
        into.waiting.push_back(std::move(w));
      }
      for (auto& o : from.observers) {
        into.observers.push_back(std::move(o));
      }
    };
    switch (policy) {
      case queue_policy::followup:
        turn.storing = durable;
        st.queue.push_back(std::move(turn));
        break;
      case queue_policy::collect:
        if (st.queue.empty()) {
          turn.storing = durable;
          st.queue.push_back(std::move(turn));
        } else {
          joins = st.queue.back().run_id;
          join(st.queue.back(), turn);
        }
        break;
      case queue_policy::steer: {
        // Answered with the result of the run it steered.
        joins = st.current_turn.run_id;
        join(st.current_turn, turn);
        self->send(st.current, steer_atom::value, text);
        break;
      }
      case queue_policy::interrupt:
        turn.storing = durable;
        st.queue.push_front(std::move(turn));
        self->send(st.current, cancel_atom::value);
        break;
    }
  }
  if (!durable) {
    if (ack) {
      ack->deliver(true);
    }
    return;
  }
  store_turn(self, run_id, joins, text, std::move(ack), joins.empty() ? span : nullptr);
}

conversation_actor::behavior_type conversation_behavior(conversation_self self,
                                                        conversation_spec spec) {
  self->state.spec = std::move(spec);
  if (self->state.spec.unstored) {
    self->state.unstored_row = std::make_shared<storage::row_id>(0);
  }
  self->state.history = std::move(self->state.spec.history);
  for (const auto& span : self->state.spec.history_spans) {
    self->state.history_spans.push_back(std::make_shared<storage::stored_span>(span));
  }
  self->state.spec.history_spans.clear();
  trim_history(self->state.history, self->state.history_spans, self->state.spec.history_limit);
  schedule_idle(self);
  // Told to exit (shutdown): the active run ends now rather than at its deadline (an
  // actor system waits for every actor before it stops): cancelled, or, when it waits for
  // a human's approval, left to be resumed at the next start.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    if (self->state.current) {
      self->send(self->state.current, shutdown_atom::value);
    }
    self->quit(msg.reason);
  });
  return {
      [self](send_atom, std::string& text) -> caf::result<run_result> {
        if (auto refused = pending_refusal(self->state)) {
          return to_caf_error(*refused);
        }
        if (auto refused = admit_store(self->state, false)) {
          return to_caf_error(*refused);
        }
        pending_turn turn;
        turn.text = std::move(text);
        turn.waiting.push_back(self->make_response_promise());
        accept(self, std::move(turn));
        return caf::delegated<run_result>{};
      },
      [self](send_atom, turn_request& request) -> caf::result<bool> {
        if (request.run_row == 0) {
          // Refused before anything is stored: the caller has not acknowledged it.
          if (auto refused = pending_refusal(self->state)) {
            return to_caf_error(*refused);
          }
        }
        if (auto refused = admit_store(self->state, request.run_row != 0)) {
          return to_caf_error(*refused);
        }
        pending_turn turn;
        turn.text = std::move(request.text);
        turn.run_id = std::move(request.run_id);
        if (request.observer) {
          turn.observers.push_back(std::move(request.observer));
        }
        turn.run_row = request.run_row;
        turn.recovered = request.run_row != 0;
        turn.policy = request.policy;
        turn.memory_user = request.memory_user;
        turn.resume = std::move(request.resume);
        // Answered when the message and its run row are committed.
        auto ack = self->make_response_promise();
        accept(self, std::move(turn), ack);
        return caf::delegated<bool>{};
      },
      [self](cancel_atom, const std::string& run_id) -> bool {
        auto& st = self->state;
        if (busy(st) && st.current_turn.run_id == run_id) {
          self->send(st.current, cancel_atom::value);
          return true;
        }
        for (auto it = st.queue.begin(); it != st.queue.end(); ++it) {
          if (it->run_id == run_id) {
            if (it->run_row != 0) {
              self->request(*st.spec.io.writer, store_write_timeout, write_atom::value,
                            storage::set_run_status_op(it->run_row, storage::run_status::cancelled,
                                                       "cancelled before it started"))
                  .then([](write_result&) {}, [](caf::error&) {});
            }
            run_result r;
            r.run_id = run_id;
            r.status = storage::run_status::cancelled;
            r.error = "cancelled before it started";
            deliver_turn(self, *it, r);
            st.queue.erase(it);
            return true;
          }
        }
        return false;
      },
      [self](subscribe_atom, run_event_sink& subscriber) {
        self->state.subscribers.push_back(std::move(subscriber));
      },
      [self](context_atom) -> prompt_context_view {
        auto view = prompt_context_of(self->state.spec, self->state.history, "live");
        view.run_active = busy(self->state);
        return view;
      },
      [self](event_atom, run_event& e) {
        if (e.type == run_event_type::approval) {
          note_approval_event(self->state, e);
        }
        for (const auto& s : self->state.subscribers) {
          self->send(s, event_atom::value, e);
        }
        for (const auto& o : self->state.current_turn.observers) {
          self->send(o, event_atom::value, e);
        }
      },
      [self](guard_atom, std::uint64_t turn) { on_guard(self, turn); },
      [self](idle_atom, std::uint64_t generation) {
        auto& st = self->state;
        if (generation == st.activity && !busy(st) && st.queue.empty()) {
          self->quit();
        }
      },
      handle_io_completion(),
  };
}
} // namespace

conversation_actor spawn_conversation(caf::actor_system& system, conversation_spec spec) {
  if (auto* shards = shards_of(system)) {
    // A conversation and everything under it live on the shard its id maps to.
    const auto home = shards->shard_for(spec.id);
    return spawn_on(system, home, conversation_behavior, std::move(spec));
  }
  return system.spawn(conversation_behavior, std::move(spec));
}

} // namespace troupe::actors
