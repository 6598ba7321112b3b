// The chat facade over the chat service, and the stream sink actor that writes a run's
// journal to one HTTP stream.

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/run_journal.hpp"
#include "troupe/actors/service_facades.hpp"
#include "troupe/actors/shard_scheduler.hpp"

namespace troupe::actors {

/// What a ticket keeps of a run: its journal and the conversation that took it (invalid
/// for a run found by id, whose followers never cancel it).
struct run_handle {
  run_journal_actor journal;
  conversation_actor conversation;
};

namespace {

using closed_atom = caf::atom_constant<caf::atom("closed")>;

/// A run's entries after a seq, from storage (for a journal that left memory).
using stored_entries_fn = std::function<expected<std::vector<journal_entry>>(std::uint64_t)>;

struct sink_state {
  net::response_stream stream;
  /// Empty: the entries' own SSE frames, shared (never copied or re-encoded).
  entry_translator translate;
  conversation_actor cancel_target;
  std::string run_id;
  /// The journal followed; its death before the last entry switches to `stored`.
  run_journal_actor journal;
  stored_entries_fn stored;
  /// The seq of the last entry written.
  std::uint64_t last_seq = 0;
};

/// A journal follower that also hears from its stream that the client left.
using stream_sink_actor = journal_sink_actor::extend<caf::reacts_to<closed_atom>>;
using sink_self = homed_typed_actor<sink_state, stream_sink_actor>*;

enum class written { more, done, gone };

/// Writes one entry to the sink's stream; `done` after the last (the stream is finished).
written write_entry(sink_state& st, const journal_entry& e) {
  auto result = net::stream_write_result::queued;
  if (!st.translate) {
    result = st.stream.try_write(e.frame());
  } else if (auto bytes = st.translate(e); !bytes.empty()) {
    result = st.stream.try_write(std::move(bytes));
  }
  if (result == net::stream_write_result::full) {
    // Too far behind: it may come back with Last-Event-ID.
    st.stream.finish();
    return written::done;
  }
  if (result == net::stream_write_result::closed) {
    return written::gone;
  }
  st.last_seq = std::max(st.last_seq, e.seq);
  if (e.last) {
    st.cancel_target = conversation_actor{};
    st.stream.finish();
    return written::done;
  }
  return written::more;
}

/// Writes the stored entries after `after` and ends the stream (a journal that left
/// memory, or was never there).
void write_stored(sink_state& st, const stored_entries_fn& stored, std::uint64_t after) {
  auto entries =
      stored
          ? stored(after)
          : expected<std::vector<journal_entry>>(fail(errc::unavailable, "no storage to replay"));
  if (entries) {
    for (const auto& e : *entries) {
      if (write_entry(st, e) != written::more) {
        return;
      }
    }
  }
  st.stream.finish();
}

// Writes a journal to one HTTP stream. Quits when the journal ends (after ending the
// stream), when the client leaves, or when the client falls too far behind (it may
// come back with Last-Event-ID). A journal that goes before its last entry (it left
// memory as the sink arrived) is finished from storage, after the last id written.
stream_sink_actor::behavior_type stream_sink(sink_self self, sink_state init) {
  self->state = std::move(init);
  if (self->state.journal) {
    self->monitor(self->state.journal);
  }
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (msg.source != st.journal.address()) {
      return;
    }
    st.cancel_target = conversation_actor{};
    write_stored(st, st.stored, st.last_seq);
    self->quit();
  });
  return {
      [self](entry_atom, const journal_entry& e) {
        switch (write_entry(self->state, e)) {
          case written::more:
            return;
          case written::done:
            self->quit();
            return;
          case written::gone:
            self->send(self, closed_atom::value);
            return;
        }
      },
      [self](closed_atom) {
        auto& st = self->state;
        if (st.cancel_target) {
          // Anonymous: the conversation's yes or no needs no reader.
          caf::anon_send(st.cancel_target, cancel_atom::value, st.run_id);
        }
        self->quit();
      },
  };
}

// Follows `journal` from after `after_seq` into `stream`; when the client leaves first
// and `cancel_target` is valid, the run is cancelled there.
void stream_journal(caf::actor_system& system, run_journal_actor journal, std::uint64_t after_seq,
                    net::response_stream stream, entry_translator translate,
                    conversation_actor cancel_target, std::string run_id,
                    stored_entries_fn stored) {
  sink_state init{stream,
                  std::move(translate),
                  std::move(cancel_target),
                  std::move(run_id),
                  journal,
                  std::move(stored),
                  after_seq};
  // On its journal's shard (its conversation's): the journal's events reach it there.
  auto sink = spawn_maybe_on(system, home_shard_of(journal), stream_sink, std::move(init));
  stream.on_disconnect([weak = caf::actor_cast<caf::weak_actor_ptr>(sink)] {
    if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
      caf::anon_send(caf::actor_cast<stream_sink_actor>(strong), closed_atom::value);
    }
  });
  caf::anon_send(journal, follow_atom::value, journal_sink_actor{sink}, after_seq);
}

struct observer_state {
  entry_observer on_entry;
  run_journal_actor journal;
  bool ended = false;
};
using observer_self = homed_typed_actor<observer_state, journal_sink_actor>*;

/// Calls its observer with every entry of a journal; quits after the last one, or when
/// the journal goes first (the observer then gets an end marker).
journal_sink_actor::behavior_type entry_observer_actor(observer_self self, observer_state init) {
  self->state = std::move(init);
  self->monitor(self->state.journal);
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (msg.source != st.journal.address() || st.ended) {
      return;
    }
    st.ended = true;
    journal_entry end;
    end.last = true;
    st.on_entry(end);
    self->quit();
  });
  return {
      [self](entry_atom, const journal_entry& e) {
        auto& st = self->state;
        if (st.ended) {
          return;
        }
        st.on_entry(e);
        if (e.last) {
          st.ended = true;
          self->quit();
        }
      },
  };
}

expected<void> unavailable() {
  return fail(errc::unavailable, "the chat service is not running");
}

run_journal_actor journal_of(const run_ticket& run) {
  return run.handle ? run.handle->journal : run_journal_actor{};
}

} // namespace

chat_service_facade::chat_service_facade(std::shared_ptr<chat_service> service)
    : service_(std::move(service)) {}

std::shared_ptr<chat_service> chat_service_facade::service() const {
  std::lock_guard lock(mutex_);
  return service_;
}

void chat_service_facade::close() {
  std::lock_guard lock(mutex_);
  service_.reset();
}

boost::asio::awaitable<expected<run_ticket>>
chat_service_facade::submit(chat_submission submission) {
  auto chat = service();
  if (!chat) {
    co_return tl::unexpected(unavailable().error());
  }
  auto pending = chat->submit(std::move(submission));
  auto run = co_await std::move(pending);
  if (!run) {
    co_return tl::unexpected(run.error());
  }
  co_return run_ticket{run->run_id, run->conversation_id,
                       std::make_shared<const run_handle>(
                           run_handle{std::move(run->journal), std::move(run->conversation)})};
}

boost::asio::awaitable<expected<run_result>>
chat_service_facade::wait(run_ticket run, std::chrono::milliseconds timeout) {
  auto chat = service();
  if (!chat) {
    co_return tl::unexpected(unavailable().error());
  }
  auto waiting = ask<run_result>(chat->system(), journal_of(run), timeout, wait_atom::value);
  co_return co_await std::move(waiting);
}

boost::asio::awaitable<expected<run_status_view>>
chat_service_facade::status(run_ticket run, std::chrono::milliseconds timeout) {
  auto chat = service();
  if (!chat) {
    co_return tl::unexpected(unavailable().error());
  }
  auto asking = ask<run_status_view>(chat->system(), journal_of(run), timeout, get_atom::value);
  co_return co_await std::move(asking);
}

void chat_service_facade::follow(run_ticket run, std::uint64_t after_seq,
                                 net::response_stream stream, entry_translator translate,
                                 bool cancel_on_leave) {
  auto chat = service();
  if (!chat) {
    stream.finish();
    return;
  }
  // Weak: a sink must not keep the chat service alive past its stop.
  stored_entries_fn stored = [weak = std::weak_ptr<chat_service>(chat),
                              run_id = run.run_id](std::uint64_t after) {
    auto service = weak.lock();
    if (!service) {
      return expected<std::vector<journal_entry>>(
          fail(errc::unavailable, "the chat service is not running"));
    }
    return service->stored_entries(run_id, after);
  };
  if (!run.handle || !run.handle->journal) {
    // No journal in memory: the replay comes from storage, here.
    sink_state st{stream, std::move(translate), {}, run.run_id, {}, {}, after_seq};
    write_stored(st, stored, after_seq);
    return;
  }
  stream_journal(chat->system(), run.handle->journal, after_seq, std::move(stream),
                 std::move(translate),
                 cancel_on_leave ? run.handle->conversation : conversation_actor{}, run.run_id,
                 std::move(stored));
}

void chat_service_facade::observe(run_ticket run, std::uint64_t after_seq,
                                  entry_observer on_entry) {
  auto chat = service();
  if (!chat || !run.handle || !run.handle->journal) {
    journal_entry end;
    end.last = true;
    on_entry(end);
    return;
  }
  auto journal = run.handle->journal;
  // On its journal's shard (its conversation's): the journal's entries reach it there.
  auto observer = spawn_maybe_on(chat->system(), home_shard_of(journal), entry_observer_actor,
                                 observer_state{std::move(on_entry), journal, false});
  caf::anon_send(journal, follow_atom::value, journal_sink_actor{observer}, after_seq);
}

boost::asio::awaitable<expected<bool>> chat_service_facade::cancel(std::string conversation_id,
                                                                   std::string run_id) {
  auto chat = service();
  if (!chat) {
    co_return tl::unexpected(unavailable().error());
  }
  auto asking = chat->cancel(conversation_id, run_id);
  co_return co_await std::move(asking);
}

boost::asio::awaitable<expected<prompt_context_view>>
chat_service_facade::context(std::string conversation_id) {
  auto chat = service();
  if (!chat) {
    co_return tl::unexpected(unavailable().error());
  }
  auto asking = chat->context(conversation_id);
  co_return co_await std::move(asking);
}

std::optional<found_live_run> chat_service_facade::find_run(const std::string& run_id) const {
  auto chat = service();
  if (!chat) {
    return std::nullopt;
  }
  auto live = chat->find_run(run_id);
  if (!live) {
    return std::nullopt;
  }
  found_live_run out;
  out.ticket = run_ticket{run_id, live->conversation_id,
                          std::make_shared<const run_handle>(run_handle{live->journal, {}})};
  out.owner_user = live->owner_user;
  return out;
}

std::chrono::milliseconds
chat_service_facade::run_timeout(const storage::agent_record& agent) const {
  const auto timeout = agent_from_record(agent, "").value_or(agent_settings{}).timeout;
  return std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
}

std::string chat_service_facade::new_conversation_id() const {
  auto chat = service();
  return chat ? chat->new_conversation_id() : new_uuid();
}

} // namespace troupe::actors
