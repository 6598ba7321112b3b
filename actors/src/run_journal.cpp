#include "troupe/actors/run_journal.hpp"

#include <algorithm>
#include <vector>

#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/net/sse.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors {

namespace {

/// A group of entries waiting to be stored is written once it holds this many entries
/// (or bytes), or `persist_after` after a step or harness decision; smaller groups of
/// text deltas wait for the next, or for the final entries, so a streamed answer costs
/// no commit per delta.
constexpr std::size_t persist_group_entries = 64;
constexpr std::size_t persist_group_bytes = 32 * 1024;

/// The run counted in flight by /metrics from its submission until it ends, or until its
/// journal goes away without an end (shutdown).
struct run_in_flight {
  std::shared_ptr<run_metrics> metrics;
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
  bool ended = false;

  run_in_flight() = default;
  run_in_flight(const run_in_flight&) = delete;
  run_in_flight& operator=(const run_in_flight&) = delete;
  ~run_in_flight() {
    if (metrics && !ended) {
      metrics->abandoned();
    }
  }
  void start(std::shared_ptr<run_metrics> m) {
    metrics = std::move(m);
    submitted = std::chrono::steady_clock::now();
    if (metrics) {
      metrics->started();
    }
  }
  void end(std::string_view status) {
    if (metrics && !ended) {
      metrics->ended(status, std::chrono::steady_clock::now() - submitted);
    }
    ended = true;
  }
};

struct journal_state {
  journal_options options;
  std::vector<journal_entry> entries;
  std::vector<journal_sink_actor> sinks;
  std::vector<caf::response_promise> waiting;
  /// The submitter's wait has not arrived yet (options.awaited): expiry is put off.
  bool wait_owed = false;
  /// An expiry was put off for that wait: leave once it is answered.
  bool expiry_due = false;
  conversation_actor conversation;
  run_status_view view;
  bool finished = false;
  /// The bytes the entries hold (counted in the directory too; shared with the clean-up
  /// that takes them out of its count).
  std::shared_ptr<std::size_t> held = std::make_shared<std::size_t>(0);
  /// Entries before this index were handed to the writer.
  std::size_t submitted = 0;
  /// Bytes of the entries not handed to the writer yet.
  std::size_t pending_bytes = 0;
  /// A pending entry is a step or harness decision: worth storing at once.
  bool pending_milestone = false;
  /// A persist_atom is in the mailbox.
  bool persist_queued = false;
  /// A timed persist_atom is on its way (a milestone waits for it).
  bool persist_timed = false;
  /// Told the write-failure warning once.
  bool warned = false;
  run_in_flight in_flight;
};

using journal_self = homed_typed_actor<journal_state, run_journal_actor>*;

void tell_to_go(journal_self self, const std::vector<run_journal_actor>& evicted) {
  for (const auto& journal : evicted) {
    if (journal.address() != self->address()) {
      self->send(journal, expire_atom::value);
    } else {
      self->send(self, expire_atom::value);
    }
  }
}

/// Hands the entries not yet submitted to the writer as one write; `then` runs once it
/// is answered (durable, or failed: replay then falls back to what the run row says).
template <class Then> void submit(journal_self self, Then then) {
  auto& st = self->state;
  if (!st.options.writer || st.submitted == st.entries.size()) {
    then();
    return;
  }
  std::vector<journal_entry> group(st.entries.begin() + static_cast<std::ptrdiff_t>(st.submitted),
                                   st.entries.end());
  st.submitted = st.entries.size();
  st.pending_bytes = 0;
  st.pending_milestone = false;
  auto op =
      storage::make_write("store run events", [run_id = st.options.run_id,
                                               group = std::move(group)](storage::connection& c) {
        std::vector<storage::run_event_view> rows;
        rows.reserve(group.size());
        for (const auto& e : group) {
          rows.push_back({static_cast<std::int64_t>(e.seq), e.event(), e.data()});
        }
        return storage::append_run_events(c, run_id, rows);
      });
  auto failed = [self](const std::string& why) {
    if (!self->state.warned) {
      self->state.warned = true;
      log::warn("the events of run {} could not be stored (replay after the journal leaves "
                "memory will show less): {}",
                self->state.options.run_id, why);
    }
  };
  self->request(*st.options.writer, store_write_timeout, write_atom::value, std::move(op))
      .then(
          [failed, then](write_result& r) mutable {
            if (!r) {
              failed(r.error().message);
            }
            then();
          },
          [failed, then](caf::error& e) mutable {
            failed(from_caf_error(e).message);
            then();
          });
}

void append(journal_self self, std::string_view event, std::string_view data, bool last = false) {
  auto& st = self->state;
  auto e = make_journal_entry(st.entries.size() + 1, event, data, last);
  st.view.last_seq = e.seq;
  const auto size = e.size_bytes();
  *st.held += size;
  st.pending_bytes += size;
  if (event == "step" || event == "harness") {
    st.pending_milestone = true;
  }
  for (const auto& sink : st.sinks) {
    self->send(sink, entry_atom::value, e);
  }
  st.entries.push_back(std::move(e));
  if (st.options.directory) {
    tell_to_go(self, st.options.directory->grow(size));
  }
  // Stored once the mailbox has drained (the entries that arrived meanwhile go along),
  // if the group is worth a write of its own; the final entries go at once (finish).
  if (st.options.writer && !st.finished) {
    if (st.pending_milestone && !st.persist_timed) {
      st.persist_timed = true;
      self->delayed_send(self, st.options.persist_after, persist_atom::value, true);
    }
    if (!st.persist_queued) {
      st.persist_queued = true;
      self->send(self, persist_atom::value, false);
    }
  }
}

std::string error_data(const std::string& run_id, const run_result& r) {
  json_writer w;
  w.begin_object().key("run_id").value(run_id);
  w.key("status").value(storage::to_string(r.status));
  w.key("message").value(r.error).end_object();
  return std::move(w).str();
}

/// The run ended and its entries are durable (or could not be made so): the journal is
/// kept for replay for its retention, or until the directory needs the room.
void retire(journal_self self) {
  auto& st = self->state;
  if (st.options.directory) {
    tell_to_go(self,
               st.options.directory->retain(st.options.run_id, st.options.max_retained, *st.held));
  }
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.options.retention),
                     expire_atom::value);
  if (st.wait_owed) {
    self->delayed_send(self,
                       std::chrono::duration_cast<caf::timespan>(
                           std::max(st.options.retention, st.options.awaited_grace)),
                       expire_atom::value, true);
  }
}

void finish(journal_self self, run_result result) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  st.finished = true;
  st.view.status = std::string(storage::to_string(result.status));
  st.in_flight.end(st.view.status);
  if (result.status != storage::run_status::succeeded) {
    append(self, "error", error_data(st.options.run_id, result));
  }
  std::string data;
  if (st.options.final_data) {
    data = st.options.final_data(result);
  } else {
    json_writer w;
    w.begin_object().key("run_id").value(st.options.run_id);
    w.key("status").value(storage::to_string(result.status));
    w.key("content").value(result.text).end_object();
    data = std::move(w).str();
  }
  append(self, "done", data);
  append(self, "", "[DONE]", true);
  st.view.result = result;
  if (!st.waiting.empty()) {
    st.wait_owed = false;
  }
  for (auto& promise : st.waiting) {
    promise.deliver(result);
  }
  st.waiting.clear();
  st.sinks.clear();
  if (st.conversation) {
    self->demonitor(st.conversation.address());
  }
  // The answer went out above; storing the rest does not hold it up.
  submit(self, [self] { retire(self); });
}

run_journal_actor::behavior_type journal_behavior(journal_self self, journal_options options) {
  self->state.options = std::move(options);
  self->state.wait_owed = self->state.options.awaited;
  self->state.in_flight.start(self->state.options.metrics);
  {
    // A resumed run's earlier entries are stored already: replayed, never written again.
    auto& st = self->state;
    st.entries = std::move(st.options.earlier);
    st.options.earlier.clear();
    st.submitted = st.entries.size();
    for (const auto& e : st.entries) {
      *st.held += e.size_bytes();
    }
    st.view.last_seq = st.entries.empty() ? 0 : st.entries.back().seq;
    if (st.options.directory) {
      tell_to_go(self, st.options.directory->grow(*st.held));
    }
  }
  // The state is gone when attached functors run: what it holds is counted here too.
  self->attach_functor([held = self->state.held, dir = self->state.options.directory,
                        id = self->state.options.run_id, address = self->address()] {
    if (dir) {
      dir->remove(id, address, *held);
    }
  });
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (st.conversation && msg.source == st.conversation.address()) {
      run_result r;
      r.status = storage::run_status::failed;
      r.error = "the conversation stopped before the run ended (troupe is shutting down or the "
                "conversation failed)";
      finish(self, std::move(r));
      return;
    }
    // A sink went away: its client left.
    auto& sinks = st.sinks;
    std::erase_if(sinks, [&](const journal_sink_actor& s) { return s.address() == msg.source; });
  });
  // Told to exit (shutdown) mid-run: what it has is handed to the writer, which commits
  // what it was given before it stops; replay then ends with what the run row says.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    if (!msg.reason) {
      // A linked sink ended normally (as CAF's default handler, ignored).
      return;
    }
    auto& st = self->state;
    if (st.options.writer && st.submitted < st.entries.size()) {
      submit(self, [] {});
    }
    self->quit(msg.reason);
  });
  return {
      [self](event_atom, const run_event& e) {
        auto& st = self->state;
        if (st.finished) {
          return;
        }
        switch (e.type) {
          case run_event_type::run_started:
            st.view.status = "running";
            break;
          default:
            break;
        }
        append(self, journal_event_name(e.type), e.to_json());
      },
      [self](done_atom, run_result& r) { finish(self, std::move(r)); },
      [self](watch_atom, conversation_actor& conversation) {
        auto& st = self->state;
        if (st.finished || !conversation) {
          return;
        }
        st.conversation = conversation;
        self->monitor(conversation);
      },
      [self](follow_atom, journal_sink_actor& sink, std::uint64_t after) {
        auto& st = self->state;
        for (const auto& e : st.entries) {
          if (e.seq > after) {
            self->send(sink, entry_atom::value, e);
          }
        }
        if (!st.finished) {
          self->monitor(sink);
          self->link_to(sink);
          st.sinks.push_back(std::move(sink));
        } else if (after >= st.entries.size()) {
          // Nothing left to replay: tell the sink the journal is complete.
          journal_entry end;
          end.seq = st.entries.size();
          end.last = true;
          self->send(sink, entry_atom::value, std::move(end));
        }
      },
      [self](wait_atom) -> caf::result<run_result> {
        auto& st = self->state;
        if (st.view.result) {
          st.wait_owed = false;
          if (st.expiry_due) {
            self->send(self, expire_atom::value);
          }
          return *st.view.result;
        }
        st.waiting.push_back(self->make_response_promise());
        return caf::delegated<run_result>{};
      },
      [self](get_atom) -> run_status_view { return self->state.view; },
      [self](expire_atom) {
        auto& st = self->state;
        if (st.wait_owed) {
          st.expiry_due = true;
          return;
        }
        self->quit();
      },
      [self](expire_atom, bool) { self->quit(); },
      [self](persist_atom, bool timed) {
        auto& st = self->state;
        (timed ? st.persist_timed : st.persist_queued) = false;
        if (st.finished) {
          return;
        }
        if ((timed && st.pending_milestone) || st.pending_bytes >= persist_group_bytes ||
            st.entries.size() - st.submitted >= persist_group_entries) {
          submit(self, [] {});
        }
      },
  };
}

} // namespace

journal_entry make_journal_entry(std::uint64_t seq, std::string_view event, std::string_view data,
                                 bool last) {
  auto bytes = std::make_shared<journal_bytes>();
  auto& sse = bytes->sse;
  const bool one_line = data.find_first_of("\r\n") == std::string_view::npos &&
                        event.find_first_of("\r\n") == std::string_view::npos;
  if (one_line) {
    // The frame net's encoder writes, built in place: event, id, one data line.
    const auto id = std::to_string(seq);
    sse.reserve(event.size() + id.size() + data.size() + 24);
    if (!event.empty()) {
      sse.append("event: ").append(event).push_back('\n');
    }
    sse.append("id: ").append(id).append("\ndata: ");
    const auto data_at = sse.size();
    sse.append(data).append("\n\n");
    const std::string_view frame = sse;
    bytes->event = event.empty() ? std::string_view{} : frame.substr(7, event.size());
    bytes->data = frame.substr(data_at, data.size());
  } else {
    net::sse_event e;
    e.event = std::string(event);
    e.id = std::to_string(seq);
    e.data = std::string(data);
    net::append_sse_event(sse, e);
    bytes->spilled_data = std::string(data);
    bytes->data = bytes->spilled_data;
    if (!event.empty()) {
      bytes->event = std::string_view(sse).substr(7, event.size());
    }
  }
  journal_entry out;
  out.seq = seq;
  out.bytes = std::move(bytes);
  out.last = last;
  return out;
}

void run_directory::add(const std::string& run_id, entry e) {
  std::lock_guard lock(mutex_);
  entries_[run_id] = std::move(e);
}

std::optional<run_directory::entry> run_directory::find(const std::string& run_id) const {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(run_id); it != entries_.end()) {
    return it->second;
  }
  return std::nullopt;
}

void run_directory::remove(const std::string& run_id, const caf::actor_addr& journal,
                           std::size_t held) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(run_id);
  if (it == entries_.end() || it->second.journal.address() != journal) {
    // Evicted (its bytes already left the count), or the id has another journal now.
    return;
  }
  entries_.erase(it);
  bytes_.fetch_sub(held, std::memory_order_relaxed);
}

void run_directory::remove(const std::string& run_id) {
  std::lock_guard lock(mutex_);
  entries_.erase(run_id);
}

template <class Over>
void run_directory::evict_locked(Over over, std::vector<run_journal_actor>& out) {
  while (!finished_.empty() && over()) {
    auto oldest = std::move(finished_.front());
    finished_.pop_front();
    if (auto it = entries_.find(oldest.run_id); it != entries_.end()) {
      out.push_back(it->second.journal);
      entries_.erase(it);
      bytes_.fetch_sub(oldest.bytes, std::memory_order_relaxed);
    }
  }
}

std::vector<run_journal_actor> run_directory::grow(std::size_t added) {
  const auto total = bytes_.fetch_add(added, std::memory_order_relaxed) + added;
  std::vector<run_journal_actor> evict;
  if (total <= max_bytes_) {
    return evict;
  }
  std::lock_guard lock(mutex_);
  evict_locked([this] { return bytes() > max_bytes_; }, evict);
  return evict;
}

std::vector<run_journal_actor> run_directory::retain(const std::string& run_id,
                                                     std::size_t max_retained, std::size_t held) {
  std::lock_guard lock(mutex_);
  std::vector<run_journal_actor> evict;
  if (entries_.find(run_id) == entries_.end()) {
    return evict;
  }
  finished_.push_back({run_id, held});
  evict_locked([&] { return finished_.size() > max_retained || bytes() > max_bytes_; }, evict);
  return evict;
}

std::vector<run_journal_actor> run_directory::journals() const {
  std::lock_guard lock(mutex_);
  std::vector<run_journal_actor> out;
  out.reserve(entries_.size());
  for (const auto& [id, e] : entries_) {
    out.push_back(e.journal);
  }
  return out;
}

std::size_t run_directory::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::string_view journal_event_name(run_event_type type) noexcept {
  switch (type) {
    case run_event_type::model_delta:
    case run_event_type::model_correction:
      return "message";
    case run_event_type::harness:
      return "harness";
    case run_event_type::action_started:
    case run_event_type::action_finished:
    case run_event_type::context_compressed:
      return "step";
    case run_event_type::approval:
      return "approval";
    case run_event_type::run_started:
    case run_event_type::run_completed:
    case run_event_type::run_failed:
    case run_event_type::run_cancelled:
      return "run";
  }
  return "run";
}

run_journal_actor spawn_run_journal(caf::actor_system& system, journal_options options) {
  return system.spawn(journal_behavior, std::move(options));
}

} // namespace troupe::actors
