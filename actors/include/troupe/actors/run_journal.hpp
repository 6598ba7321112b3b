#pragma once

/// \file
/// The journal of one submitted run: every event the run publishes, in order, as the
/// entries an SSE client receives, kept so that a subscriber that arrives late — or
/// comes back with `Last-Event-ID` — replays what it missed and then follows live. The
/// run does not depend on any subscriber: a durable run keeps going when its clients
/// leave.
///
/// Entries (SSE `event` name, `id` = the entry's seq, `data` = JSON):
///   message  model.delta (candidate text) and model.correction (discard the candidate)
///   harness  harness decisions (validate_*, correct_*, continue_execution, …)
///   step     tool calls starting and ending (action.started, action.finished)
///   run      run.started, run.completed, run.failed, run.cancelled
///   error    the failure of a run that failed
///   done     the final event: content, usage, steps summary, files
///   (none)   `[DONE]`, the last entry
///
/// Its interface is `run_journal_actor` below; followers are `journal_sink_actor`s.
/// A finished journal stays for `retention`, then leaves its directory and quits. Its
/// followers are linked to it: told to exit (shutdown), it takes them along.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actors/conversation.hpp"
#include "troupe/actors/journal_entry.hpp"
#include "troupe/actors/run.hpp"

namespace troupe::actors {

using follow_atom = caf::atom_constant<caf::atom("follow")>;
using entry_atom = caf::atom_constant<caf::atom("entry")>;
using wait_atom = caf::atom_constant<caf::atom("wait")>;
using watch_atom = caf::atom_constant<caf::atom("watch")>;
/// A journal's retention is over (its own timer), or the directory evicts it: it goes.
using expire_atom = caf::atom_constant<caf::atom("expire")>;

/// A follower of a journal: receives (entry_atom, journal_entry) for every entry.
using journal_sink_actor = caf::typed_actor<caf::reacts_to<entry_atom, journal_entry>>;

/// The journal's interface.
///   (event_atom, run_event)                 from the conversation: appends entries
///   (done_atom, run_result)                 from the conversation: the final entries
///   (follow_atom, sink, after_seq)          replays entries after that seq to the sink,
///                                           then follows live
///   (wait_atom) -> run_result               answered when the run ends
///   (get_atom) -> run_status_view           where the run stands now
///   (watch_atom, conversation)              the conversation that took the run: its
///                                           death before the run ends fails the run
///                                           here, so no subscriber waits forever
///   (expire_atom)                           leave now (the journal's retention timer,
///                                           or the directory evicting the oldest)
/// It is a `turn_observer`: a turn_request can name it.
using run_journal_actor =
    caf::typed_actor<caf::reacts_to<event_atom, run_event>, caf::reacts_to<done_atom, run_result>,
                     caf::reacts_to<follow_atom, journal_sink_actor, std::uint64_t>,
                     caf::replies_to<wait_atom>::with<run_result>,
                     caf::replies_to<get_atom>::with<run_status_view>,
                     caf::reacts_to<watch_atom, conversation_actor>, caf::reacts_to<expire_atom>>;

/// The live journals by run id, with each run's owner. Thread-safe.
class run_directory {
public:
  struct entry {
    run_journal_actor journal;
    storage::row_id owner_user = 0;
    std::string conversation_id;
  };
  void add(const std::string& run_id, entry e);
  std::optional<entry> find(const std::string& run_id) const;
  void remove(const std::string& run_id);
  std::size_t size() const;
  /// Every live journal (for shutdown).
  std::vector<run_journal_actor> journals() const;
  /// A journal's run ended: it is kept for replay, but at most `max_retained` finished
  /// journals are; the oldest beyond that are returned, to be told to go.
  std::vector<run_journal_actor> retain(const std::string& run_id, std::size_t max_retained);

private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, entry> entries_;
  /// Finished runs, oldest first.
  std::deque<std::string> finished_;
};

struct journal_options {
  std::string run_id;
  std::string conversation_id;
  /// How long a finished journal stays for replay.
  std::chrono::milliseconds retention{std::chrono::minutes(15)};
  /// Finished journals kept at most (the oldest go first), so that a busy node's memory
  /// is bounded whatever the retention.
  std::size_t max_retained = 10'000;
  /// The data of the final `done` entry (the API adds signed file links).
  std::function<std::string(const run_result&)> final_data;
  /// Removes the journal from it when it quits; may be null.
  std::shared_ptr<run_directory> directory;
};

run_journal_actor spawn_run_journal(caf::actor_system& system, journal_options options);

/// The SSE name of a run event (`message`, `harness`, `step`, `run`).
std::string_view journal_event_name(run_event_type type) noexcept;

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::journal_entry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::run_status_view)
