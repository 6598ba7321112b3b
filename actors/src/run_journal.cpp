#include "troupe/actors/run_journal.hpp"

#include <vector>

#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::actors {

namespace {

struct journal_state {
  journal_options options;
  std::vector<journal_entry> entries;
  std::vector<journal_sink_actor> sinks;
  std::vector<caf::response_promise> waiting;
  conversation_actor conversation;
  run_status_view view;
  bool finished = false;
};

using journal_self = homed_typed_actor<journal_state, run_journal_actor>*;

void append(journal_self self, std::string event, std::string data, bool last = false) {
  auto& st = self->state;
  journal_entry e;
  e.seq = st.entries.size() + 1;
  e.event = std::move(event);
  e.data = std::move(data);
  e.last = last;
  st.view.last_seq = e.seq;
  for (const auto& sink : st.sinks) {
    self->send(sink, entry_atom::value, e);
  }
  st.entries.push_back(std::move(e));
}

std::string error_data(const std::string& run_id, const run_result& r) {
  json_writer w;
  w.begin_object().key("run_id").value(run_id);
  w.key("status").value(storage::to_string(r.status));
  w.key("message").value(r.error).end_object();
  return std::move(w).str();
}

void finish(journal_self self, run_result result) {
  auto& st = self->state;
  if (st.finished) {
    return;
  }
  st.finished = true;
  st.view.status = std::string(storage::to_string(result.status));
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
  append(self, "done", std::move(data));
  append(self, "", "[DONE]", true);
  st.view.result = result;
  for (auto& promise : st.waiting) {
    promise.deliver(result);
  }
  st.waiting.clear();
  st.sinks.clear();
  if (st.conversation) {
    self->demonitor(st.conversation.address());
  }
  if (st.options.directory) {
    for (const auto& oldest :
         st.options.directory->retain(st.options.run_id, st.options.max_retained)) {
      self->send(oldest, expire_atom::value);
    }
  }
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.options.retention),
                     expire_atom::value);
}

run_journal_actor::behavior_type journal_behavior(journal_self self, journal_options options) {
  self->state.options = std::move(options);
  self->attach_functor([dir = self->state.options.directory, id = self->state.options.run_id] {
    if (dir) {
      dir->remove(id);
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
        append(self, std::string(journal_event_name(e.type)), e.to_json());
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
          return *st.view.result;
        }
        st.waiting.push_back(self->make_response_promise());
        return caf::delegated<run_result>{};
      },
      [self](get_atom) -> run_status_view { return self->state.view; },
      [self](expire_atom) { self->quit(); },
  };
}

} // namespace

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

void run_directory::remove(const std::string& run_id) {
  std::lock_guard lock(mutex_);
  entries_.erase(run_id);
}

std::vector<run_journal_actor> run_directory::retain(const std::string& run_id,
                                                     std::size_t max_retained) {
  std::lock_guard lock(mutex_);
  finished_.push_back(run_id);
  std::vector<run_journal_actor> evict;
  while (finished_.size() > max_retained) {
    auto oldest = std::move(finished_.front());
    finished_.pop_front();
    if (auto it = entries_.find(oldest); it != entries_.end()) {
      evict.push_back(it->second.journal);
      entries_.erase(it);
    }
  }
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
      return "step";
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
