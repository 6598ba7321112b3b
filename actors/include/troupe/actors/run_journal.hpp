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
/// Each entry is encoded once (`journal_bytes`: its SSE frame) and shared by every
/// follower and by persistence: with a writer, the journal stores its entries under their
/// ids (`run_events`), one write per group of entries gathered while its mailbox was
/// busy, and the final entries at once. A finished journal whose entries are durable
/// stays for `retention` (or until its directory needs the room, `api.journal_max_bytes`),
/// then leaves its directory and quits; replay is then served from `run_events`
/// (stored_journal.hpp). Its followers are linked to it: told to exit (shutdown), it
/// takes them along.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actors/conversation.hpp"
#include "troupe/actors/journal_entry.hpp"
#include "troupe/actors/run.hpp"
#include "troupe/actors/run_metrics.hpp"
#include "troupe/actors/store_writer.hpp"

namespace troupe::actors {

using follow_atom = caf::atom_constant<caf::atom("follow")>;
using entry_atom = caf::atom_constant<caf::atom("entry")>;
using wait_atom = caf::atom_constant<caf::atom("wait")>;
using watch_atom = caf::atom_constant<caf::atom("watch")>;
/// A journal's retention is over (its own timer), or the directory evicts it: it goes.
using expire_atom = caf::atom_constant<caf::atom("expire")>;
/// Internal: the journal's mailbox has drained; store the entries gathered meanwhile.
using persist_atom = caf::atom_constant<caf::atom("persist")>;

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
///                                           or the directory evicting the oldest) —
///                                           unless a caller that submitted the run to
///                                           wait for it has not asked yet (`awaited`)
///   (expire_atom, true)                     leave now, waited for or not
///   (persist_atom, timed)                   internal: store the entries gathered (the
///                                           mailbox drained, or `persist_after` passed)
/// It is a `turn_observer`: a turn_request can name it.
using run_journal_actor =
    caf::typed_actor<caf::reacts_to<event_atom, run_event>, caf::reacts_to<done_atom, run_result>,
                     caf::reacts_to<follow_atom, journal_sink_actor, std::uint64_t>,
                     caf::replies_to<wait_atom>::with<run_result>,
                     caf::replies_to<get_atom>::with<run_status_view>,
                     caf::reacts_to<watch_atom, conversation_actor>, caf::reacts_to<expire_atom>,
                     caf::reacts_to<expire_atom, bool>, caf::reacts_to<persist_atom, bool>>;

/// The live journals by run id, with each run's owner, and the bytes their entries hold.
/// Thread-safe. Past `max_bytes` (`api.journal_max_bytes`, across all journals) the
/// oldest finished journals go first; a running journal is never dropped, and a journal
/// counts as finished only once its entries are durable, so replay goes on from storage.
class run_directory {
public:
  struct entry {
    run_journal_actor journal;
    storage::row_id owner_user = 0;
    std::string conversation_id;
  };
  static constexpr std::size_t default_max_bytes = std::size_t{64} << 20;

  explicit run_directory(std::size_t max_bytes = default_max_bytes) : max_bytes_(max_bytes) {}

  void add(const std::string& run_id, entry e);
  std::optional<entry> find(const std::string& run_id) const;
  /// The journal `journal` of `run_id` quits, holding `bytes`: it leaves (unless it was
  /// evicted, or another journal has taken the id since).
  void remove(const std::string& run_id, const caf::actor_addr& journal, std::size_t bytes);
  /// Forgets a run whatever its journal (a submission that failed).
  void remove(const std::string& run_id);
  std::size_t size() const;
  /// Every live journal (for shutdown).
  std::vector<run_journal_actor> journals() const;
  /// A live journal's entries grew by `bytes`; returns the finished journals evicted to
  /// bring the total back under the cap (oldest first), to be told to go.
  std::vector<run_journal_actor> grow(std::size_t bytes);
  /// A journal's run ended and its entries, holding `bytes`, are durable: it is kept for
  /// replay, but at most `max_retained` finished journals are, within the byte cap; the
  /// oldest beyond either are returned, to be told to go.
  std::vector<run_journal_actor> retain(const std::string& run_id, std::size_t max_retained,
                                        std::size_t bytes);
  /// The bytes held by the live journals' entries.
  std::size_t bytes() const noexcept {
    return bytes_.load(std::memory_order_relaxed);
  }
  std::size_t max_bytes() const noexcept {
    return max_bytes_;
  }

private:
  struct finished_run {
    std::string run_id;
    std::size_t bytes = 0;
  };
  /// Pops the oldest finished runs while `over` holds; called with the mutex held.
  template <class Over> void evict_locked(Over over, std::vector<run_journal_actor>& out);

  const std::size_t max_bytes_;
  std::atomic<std::size_t> bytes_{0};
  mutable std::mutex mutex_;
  std::unordered_map<std::string, entry> entries_;
  /// Finished runs, oldest first.
  std::deque<finished_run> finished_;
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
  /// Where the entries are stored (`run_events`); none: they live in memory only.
  std::optional<store_writer_actor> writer;
  /// The submitter will ask for the result (wait_atom) right after submitting: the
  /// journal stays until it has, however short the retention (a run that finishes first
  /// is still answered), for `awaited_grace` at most.
  bool awaited = false;
  std::chrono::milliseconds awaited_grace{std::chrono::minutes(1)};
  /// A step or harness decision is stored at most this long after it happened, with
  /// whatever else arrived meanwhile; a run that ends sooner stores its events once, at
  /// its end (after its answer), so a short run costs no commit for its events before it.
  std::chrono::milliseconds persist_after{std::chrono::milliseconds(200)};
  /// The runs' series of /metrics (in flight, ended by status, duration); may be null.
  std::shared_ptr<run_metrics> metrics;
  /// A run resumed after a restart (issue 19): its entries from before, as stored (seq 1
  /// to N, not written again); the new ones follow from N + 1.
  std::vector<journal_entry> earlier;
};

run_journal_actor spawn_run_journal(caf::actor_system& system, journal_options options);

/// An entry with its bytes encoded once: the SSE frame (`event:` when named, `id: seq`,
/// `data:`), with the event name and data as views into it.
journal_entry make_journal_entry(std::uint64_t seq, std::string_view event, std::string_view data,
                                 bool last = false);

/// The SSE name of a run event (`message`, `harness`, `step`, `run`).
std::string_view journal_event_name(run_event_type type) noexcept;

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::journal_entry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::run_status_view)
