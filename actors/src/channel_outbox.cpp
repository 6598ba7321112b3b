// The outbox of a channel thread: one entry in flight at a time, in order. A part is
// claimed (`sending`, the intent, durable first), sent through the adapter, and marked
// sent (with the platform's message id), retried after the platform's retry_after or a
// doubling back-off, or dead-lettered. A streamed preview (part 0 posted before its run
// ended) that owes its final edit is edited here too, once the final text is recorded,
// no sooner than a second after its last change; an edit that cannot be made sends the
// final text as a new message instead.

#include <algorithm>

#include <fmt/format.h>

#include "channel_thread_state.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors::channel_detail {

namespace {

/// An entry that is a final edit to make (not a part to send).
bool is_edit(const storage::outbox_record& e) {
  return e.status == "sent" && e.edit_status == "pending";
}

/// When the entry may go: a part's next attempt, an edit's next time (and the preview's
/// second between changes).
std::int64_t next_time(const thread_state& st, const storage::outbox_record& e) {
  if (!is_edit(e)) {
    return e.next_attempt_at;
  }
  return std::max(e.edit_next_at, preview_next_change(st, e.run_uuid));
}

/// Sets the retry timer for the front entry when it is not due yet; true when it is due.
bool due(thread_self self) {
  auto& st = self->state;
  const auto now = storage::now_millis();
  const auto at = next_time(st, st.outbox.front());
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

/// The part as the adapter takes it (`text` what goes out).
net::channel::outbound_part outbound(const thread_state& st, const storage::outbox_record& e,
                                     std::string text) {
  net::channel::outbound_part part;
  part.reply_to = !e.reply_to.empty() ? e.reply_to
                  : st.thread         ? st.thread->reply_to
                                      : std::string();
  part.thread_key = st.spec.thread_key;
  part.run_id = e.run_uuid;
  part.part = e.part;
  part.text = std::move(text);
  // The message asking for an approval carries its two answers as buttons where the
  // platform has them (Telegram); the text says how to answer everywhere.
  if (e.part == 0 && e.run_uuid.starts_with(approval_ask_prefix)) {
    const auto id = e.run_uuid.substr(approval_ask_prefix.size());
    part.choices = {{"Approve", "/approve " + id}, {"Deny", "/deny " + id}};
  }
  return part;
}

/// The entry in flight is done (or will be retried): the next one goes, unless a stop
/// waits for this one.
void settled(thread_self self, bool finished) {
  auto& st = self->state;
  st.sending = false;
  if (finished && !st.outbox.empty()) {
    st.outbox.pop_front();
  }
  if (finish_drain(self)) {
    return;
  }
  pump_outbox(self);
}

/// After a preview went out: the final edit it owes, if the final text was recorded
/// meanwhile (and differs from what went out), goes next.
void after_preview_sent(thread_self self, storage::row_id id) {
  auto& st = self->state;
  auto row = st.spec.context->reads->with(
      [&](storage::connection& c) { return storage::find_outbox(c, id); });
  if (row && is_edit(*row)) {
    st.outbox.push_front(std::move(*row));
  }
}

void send_front(thread_self self);
void edit_front(thread_self self);

} // namespace

std::chrono::milliseconds backoff(const outbox_policy& p, std::int64_t attempts) {
  auto wait = p.first_backoff;
  for (std::int64_t k = 1; k < attempts && wait < p.max_backoff; ++k) {
    wait *= 2;
  }
  return std::min(wait, p.max_backoff);
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
                                               const std::string& text,
                                               const std::string& reply_to) {
  std::vector<storage::outbox_record> rows;
  std::int64_t n = 0;
  for (auto& piece : parts_of(*channel_of(st).adapter, text)) {
    storage::outbox_record o;
    o.channel_id = channel_of(st).record.id;
    o.thread_id = st.thread ? st.thread->id : 0;
    o.run_uuid = key;
    o.part = n++;
    o.text = std::move(piece);
    o.reply_to = reply_to;
    rows.push_back(std::move(o));
  }
  return rows;
}

storage::write_op with_stored_parts(storage::write_op op, std::vector<storage::outbox_record> rows,
                                    std::shared_ptr<std::vector<storage::outbox_record>> stored) {
  op.apply = [apply = std::move(op.apply), rows = std::move(rows),
              stored](storage::connection& c) -> expected<std::int64_t> {
    auto applied = apply(c);
    if (!applied) {
      return applied;
    }
    // A redone batch applies the write again: what it read the first time goes.
    stored->clear();
    for (const auto& p : rows) {
      if (auto row = storage::find_outbox_part(c, p.run_uuid, p.part)) {
        stored->push_back(std::move(*row));
      }
    }
    return applied;
  };
  return op;
}

void queue_recorded(thread_self self, const std::vector<storage::outbox_record>& rows) {
  std::vector<storage::outbox_record> stored;
  for (const auto& p : rows) {
    auto row = self->state.spec.context->reads->with(
        [&](storage::connection& c) { return storage::find_outbox_part(c, p.run_uuid, p.part); });
    if (row) {
      stored.push_back(std::move(*row));
    }
  }
  queue_stored(self, std::move(stored));
}

void queue_stored(thread_self self, std::vector<storage::outbox_record> stored) {
  auto& s = self->state;
  // As stored: an entry of this (run, part) may be recorded and sent already (a steered
  // message gets the result of the run it joined), or be a preview that owes an edit.
  for (auto& row : stored) {
    if (!(row.status == "pending" || is_edit(row))) {
      continue;
    }
    const bool queued = std::any_of(s.outbox.begin(), s.outbox.end(), [&](const auto& q) {
      return q.id == row.id && is_edit(q) == is_edit(row);
    });
    // The entry in flight is looked at again once its send is recorded.
    const bool in_flight = s.sending && !s.outbox.empty() && s.outbox.front().id == row.id;
    if (!queued && !in_flight) {
      s.outbox.push_back(std::move(row));
    }
  }
  pump_outbox(self);
}

void pump_outbox(thread_self self) {
  auto& st = self->state;
  if (st.draining || st.sending || st.outbox.empty() || !due(self)) {
    touch(self);
    return;
  }
  if (is_edit(st.outbox.front())) {
    if (preview_editing(st, st.outbox.front().run_uuid)) {
      return; // the edit in flight comes back here when it is done
    }
    st.sending = true;
    edit_front(self);
    return;
  }
  st.sending = true;
  const auto id = st.outbox.front().id;
  // The entry as stored once claimed (a preview may have taken its final text meanwhile),
  // read back by the claim itself, on the writer's thread.
  auto fresh = std::make_shared<std::optional<storage::outbox_record>>();
  store(self,
        storage::make_write("claim outbox entry",
                            [id, fresh](storage::connection& c) -> expected<void> {
                              auto claimed = storage::claim_outbox(c, id);
                              if (!claimed) {
                                return claimed;
                              }
                              fresh->reset();
                              if (auto row = storage::find_outbox(c, id)) {
                                *fresh = std::move(*row);
                              }
                              return {};
                            }),
        [self, id, fresh](write_result r) {
          auto& s = self->state;
          if (!r) {
            // Not pending any more (sent, dead, or another life of this thread has it).
            log::warn("channel {} thread {}: outbox entry {} not claimed: {}",
                      channel_of(s).record.name, s.spec.thread_key, id, r.error().message);
            settled(self, true);
            return;
          }
          if (*fresh) {
            s.outbox.front() = std::move(**fresh);
          } else {
            ++s.outbox.front().attempts;
          }
          send_front(self);
        });
}

namespace {

void send_front(thread_self self) {
  auto& st = self->state;
  const auto& queued = st.outbox.front();
  // A preview shows the answer so far; one whose final text is recorded shows that.
  std::string text = queued.text;
  if (queued.preview) {
    text = queued.edit_status == "pending" ? queued.edit_text
                                           : preview_text(st, queued.run_uuid, queued.text);
  }
  auto part = outbound(st, queued, text);
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
  start_io(
      self, http->get_executor(), std::move(sending),
      [self, text](expected<net::channel::send_result> r) {
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
                [id = entry.id, pid = result.platform_message_id, text](storage::connection& c) {
                  return storage::mark_outbox_sent(c, id, pid, text);
                });
            if (entry.preview) {
              preview_posted(self, entry.run_uuid, result.platform_message_id, text);
            }
            break;
          case net::channel::send_outcome::retry: {
            const auto wait = std::max(result.retry_after, backoff(policy, entry.attempts));
            const auto at = storage::now_millis() + wait.count();
            finished = entry.attempts >= policy.max_attempts;
            s.outbox.front().next_attempt_at = at;
            s.outbox.front().status = finished ? "dead" : "pending";
            op = storage::make_write("outbox entry failed",
                                     [id = entry.id, why = result.error, at,
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
            op = storage::make_write("outbox entry dead",
                                     [id = entry.id, why = result.error](storage::connection& c) {
                                       return storage::mark_outbox_dead(c, id, why);
                                     });
            log::warn("channel {} thread {}: run {} part {} dead-lettered: {}",
                      channel_of(s).record.name, s.spec.thread_key, entry.run_uuid, entry.part,
                      result.error);
            break;
        }
        const bool preview_sent =
            entry.preview && result.outcome == net::channel::send_outcome::sent;
        store(self, std::move(op), [self, finished, preview_sent, id = entry.id](write_result) {
          if (preview_sent) {
            self->state.outbox.pop_front();
            after_preview_sent(self, id);
            settled(self, false);
            return;
          }
          settled(self, finished);
        });
      });
}

/// Makes the final edit the front entry owes (its preview is on the platform).
void edit_front(thread_self self) {
  auto& st = self->state;
  const auto& queued = st.outbox.front();
  auto part = outbound(st, queued, queued.edit_text);
  const auto& ctx = *st.spec.context;
  auto* http = ctx.http_here();
  auto editing =
      [](std::shared_ptr<net::channel::channel_adapter> a, net::http_client* client,
         net::channel::outbound_part p, std::string message_id,
         std::chrono::milliseconds deadline) -> asio::awaitable<net::channel::send_result> {
    auto edited = a->edit(*client, std::move(p), std::move(message_id), deadline);
    co_return co_await std::move(edited);
  }(channel_of(st).adapter, http, std::move(part), queued.platform_message_id,
                                             ctx.outbox.send_timeout);
  start_io(self, http->get_executor(), std::move(editing),
           [self](expected<net::channel::send_result> r) {
             auto& s = self->state;
             auto& entry = s.outbox.front();
             net::channel::send_result result;
             if (r) {
               result = std::move(*r);
             } else {
               result.outcome = net::channel::send_outcome::retry;
               result.error = r.error().message;
             }
             const auto& policy = s.spec.context->outbox;
             if (result.outcome == net::channel::send_outcome::sent) {
               forget_preview(s, entry.run_uuid);
               store(self,
                     storage::make_write("outbox final edit made",
                                         [id = entry.id](storage::connection& c) {
                                           return storage::mark_outbox_edited(c, id);
                                         }),
                     [self](write_result) { settled(self, true); });
               return;
             }
             // Retried after the platform's wait; given up after the attempts (or at once
             // when the platform refuses it), the final text then goes as a new message.
             const bool permanent = result.outcome == net::channel::send_outcome::failed;
             ++entry.edit_attempts;
             const auto wait = std::max(result.retry_after, backoff(policy, entry.edit_attempts));
             const auto at = storage::now_millis() + wait.count();
             const bool give_up = permanent || entry.edit_attempts >= policy.max_attempts;
             log::warn("channel {} thread {}: the final edit of run {} failed ({}), {}",
                       channel_of(s).record.name, s.spec.thread_key, entry.run_uuid, result.error,
                       give_up ? std::string("sent as a new message instead")
                               : fmt::format("retry in {} ms", wait.count()));
             if (give_up) {
               forget_preview(s, entry.run_uuid);
               entry.status = "pending";
               entry.text = entry.edit_text;
               entry.preview = false;
               entry.edit_status = "dead";
               entry.attempts = 0;
               entry.next_attempt_at = 0;
             } else {
               entry.edit_next_at = at;
             }
             store(self,
                   storage::make_write(
                       "outbox final edit failed",
                       [id = entry.id, why = result.error, at, max = policy.max_attempts,
                        permanent](storage::connection& c) {
                         return storage::record_outbox_edit_failure(c, id, why, at, max, permanent);
                       }),
                   [self](write_result) { settled(self, false); });
           });
}

} // namespace

bool finish_drain(thread_self self) {
  auto& st = self->state;
  if (!st.draining || st.sending) {
    return false;
  }
  caf::anon_send(*st.draining, drained_atom::value);
  self->quit();
  return true;
}

} // namespace troupe::actors::channel_detail
