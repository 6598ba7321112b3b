// Runs of a channel thread, awaited and answered: the typing indicator while they are
// awaited, each run's result (or, after a restart, what its rows say) recorded as its reply
// in the outbox in the commit that marks its message done, a streamed preview's part 0
// taking the final text (channel_preview.cpp).

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fmt/format.h>

#include "channel_thread_state.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors::channel_detail {

namespace {

// --- typing -------------------------------------------------------------------------------

/// Shows the platform's typing indicator while runs of the thread are awaited, for at most
/// the context's `typing_cap`; its calls go their own way and never touch a reply.
void start_typing(thread_state& st, const std::string& reply_to) {
  const auto& adapter = channel_of(st).adapter;
  if (st.typing.active || !st.thread || adapter->typing_interval().count() <= 0) {
    return;
  }
  st.typing.active = std::make_shared<std::atomic<bool>>(true);
  auto* http = st.spec.context->http_here();
  asio::co_spawn(http->get_executor(),
                 net::channel::keep_typing(adapter, *http,
                                           reply_to.empty() ? st.thread->reply_to : reply_to,
                                           st.typing.active, st.spec.context->typing_cap),
                 asio::detached);
}

} // namespace

void stop_typing(thread_state& st) {
  if (st.typing.active) {
    st.typing.active->store(false);
    st.typing.active.reset();
  }
}

/// Records the run's answer in the outbox (once per (run, part); a preview of part 0
/// takes the final text instead), marks the message done, and queues the parts.
void record_reply(thread_self self, storage::row_id inbound_id, const std::string& reply_to,
                  run_result result) {
  auto& st = self->state;
  std::string text = result.text;
  if (result.status != storage::run_status::succeeded) {
    text = result.status == storage::run_status::cancelled
               ? "The run was cancelled."
               : fmt::format("Sorry, this message could not be answered: {}",
                             result.error.empty() ? "the run failed" : result.error);
  }
  std::vector<storage::outbox_record> parts;
  if (result.status == storage::run_status::cancelled && st.stopped_runs.contains(result.run_id)) {
    // A run cancelled by `/stop` was answered by the command ("Stopped …"); a preview it
    // posted ends with what it showed, marked stopped.
    if (auto stopped = stopped_preview_text(st, result.run_id)) {
      parts = reply_rows(st, result.run_id, *stopped, reply_to);
      parts.resize(1);
    }
  } else {
    parts = reply_rows(st, result.run_id, text, reply_to);
  }
  // A streamed preview's final edit waits a second after its last change.
  const auto edit_at = close_preview(st, result.run_id);
  for (auto& p : parts) {
    p.edit_next_at = edit_at;
  }
  auto owed = std::make_shared<bool>(false);
  auto op = storage::make_write(
      "record channel reply", [parts, inbound_id, owed](storage::connection& c) -> expected<void> {
        for (const auto& p : parts) {
          auto recorded = storage::enqueue_reply_part(c, p);
          if (!recorded) {
            return tl::unexpected(recorded.error());
          }
          *owed = *owed || *recorded == storage::reply_part_recorded::edit_owed;
        }
        return storage::set_inbound_status(c, inbound_id, "done");
      });
  auto stored = std::make_shared<std::vector<storage::outbox_record>>();
  op = with_stored_parts(std::move(op), parts, stored);
  store(self, std::move(op), [self, stored, owed, run_id = result.run_id](write_result r) mutable {
    auto& s = self->state;
    if (!*owed) {
      forget_preview(s, run_id); // no final edit to wait for: the preview (if any) is over
    }
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
    queue_stored(self, std::move(*stored));
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

namespace {

/// Waits (through the bridge) for the run's result, at most `limit`, then records the reply.
/// A run that asked a human for approval and is still going when the limit passes is
/// waited for again: its own deadline ends it, moved by the time the human took.
void wait_for_run(thread_self self, storage::row_id inbound_id, const std::string& reply_to,
                  run_ticket ticket, std::chrono::milliseconds limit) {
  auto& st = self->state;
  auto* http = st.spec.context->http_here();
  auto waiting = st.spec.context->chat->wait(ticket, limit);
  start_io(self, http->get_executor(), std::move(waiting),
           [self, inbound_id, reply_to, ticket, limit](expected<expected<run_result>> r) mutable {
             auto& s = self->state;
             const auto it = std::find_if(s.runs.begin(), s.runs.end(), [&](const awaited_run& a) {
               return a.run_id == ticket.run_id;
             });
             const bool timed_out = (!r && r.error().code == errc::timeout) ||
                                    (r && !*r && r->error().code == errc::timeout);
             if (timed_out && it != s.runs.end() && it->asked_approval) {
               log::info("channel thread {}: run {} waits for a human's approval past {} ms; "
                         "waiting on",
                         s.spec.thread_key, ticket.run_id, limit.count());
               wait_for_run(self, inbound_id, reply_to, ticket, limit);
               return;
             }
             if (it != s.runs.end()) {
               s.runs.erase(it);
             }
             run_result result;
             if (r && *r) {
               result = std::move(**r);
             } else {
               result.run_id = ticket.run_id;
               result.status = storage::run_status::failed;
               result.error = !r ? r.error().message : r->error().message;
             }
             if (result.run_id.empty()) {
               result.run_id = ticket.run_id;
             }
             record_reply(self, inbound_id, reply_to, std::move(result));
           });
}

} // namespace

/// Waits (through the bridge) for the run's result, then records the reply (to
/// `reply_to`, the answered message's place); streams the run's text when the thread does.
void await_result(thread_self self, storage::row_id inbound_id, const std::string& reply_to,
                  run_ticket ticket, std::chrono::milliseconds limit) {
  auto& st = self->state;
  ++st.waiting_runs;
  st.runs.push_back(awaited_run{ticket.run_id, ticket.conversation_id, ticket});
  start_typing(st, reply_to);
  follow_preview(self, ticket, reply_to);
  follow_approvals(self, ticket, reply_to);
  wait_for_run(self, inbound_id, reply_to, std::move(ticket), limit);
}

} // namespace troupe::actors::channel_detail
