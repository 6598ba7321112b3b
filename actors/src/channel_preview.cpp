// A channel thread's streamed previews (`stream_edits = true`): while a run of the thread
// is active, its journal is followed for the answer's text (`model.delta`; a
// `model.correction` or a new model round starts the candidate again). The first text
// records part 0 of the run's reply as a preview, which the outbox posts like any part
// (claimed, sent, its platform message id recorded); then the preview is edited to show
// the answer so far, at most once every `preview_edit_interval` and not before a
// platform's retry_after. These edits are best-effort (each replaces the whole text, so
// one lost or repeated changes nothing that the next does not mend). The final answer
// replaces the preview exactly once: the outbox owes that final edit (channel_outbox.cpp).

#include <algorithm>

#include <simdjson.h>

#include "channel_thread_state.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors::channel_detail {

namespace {

/// Runs whose preview is over that a thread remembers (their late tokens are dropped).
constexpr std::size_t closed_previews_kept = 256;

/// What the preview of `p` shows now: the first part of the candidate.
std::string first_part(const thread_state& st, const std::string& candidate) {
  if (candidate.find_first_not_of(" \t\r\n") == std::string::npos) {
    return {};
  }
  auto parts = channel_of(st).adapter->split(candidate);
  return parts.empty() ? std::string() : std::move(parts.front());
}

std::chrono::steady_clock::time_point next_change_at(const preview_state& p) {
  return std::max(p.last_change + preview_edit_interval, p.not_before);
}

/// Reads a journal entry of the run `run_id` into a delta; false for any other entry (or
/// another run's: a message that joined a run sees that run's events in its own journal).
bool read_delta(simdjson::dom::parser& parser, const journal_entry& e, const std::string& run_id,
                preview_delta& out) {
  if (e.event() != "message") {
    return false;
  }
  simdjson::dom::element root;
  if (parser.parse(e.data().data(), e.data().size()).get(root) != simdjson::SUCCESS) {
    return false;
  }
  std::string_view type;
  std::string_view run;
  if (root["type"].get_string().get(type) != simdjson::SUCCESS ||
      root["run_id"].get_string().get(run) != simdjson::SUCCESS || run != run_id) {
    return false;
  }
  out.run_id = run_id;
  if (type == "model.correction") {
    out.reset = true;
    return true;
  }
  std::string_view text;
  std::int64_t round = 0;
  if (type != "model.delta" || root["data"]["text"].get_string().get(text) != simdjson::SUCCESS) {
    return false;
  }
  if (root["data"]["round"].get_int64().get(round) != simdjson::SUCCESS) {
    round = 0;
  }
  out.text = std::string(text);
  out.round = round;
  return true;
}

/// Records the preview row (part 0 of the run's reply, pending), then lets the outbox
/// post it.
void record_preview(thread_self self, const std::string& run_id, preview_state& p) {
  auto& st = self->state;
  p.recorded = true;
  auto row = reply_rows(st, run_id, first_part(st, p.candidate), p.reply_to).front();
  row.preview = true;
  store(self,
        storage::make_write("record channel preview",
                            [row](storage::connection& c) -> expected<void> {
                              auto id = storage::enqueue_outbox(c, row);
                              if (!id) {
                                return tl::unexpected(id.error());
                              }
                              return {};
                            }),
        [self, row](write_result r) {
          if (!r) {
            log::warn("channel {} thread {}: the preview of run {} cannot be recorded: {}",
                      channel_of(self->state).record.name, self->state.spec.thread_key,
                      row.run_uuid, r.error().message);
            return;
          }
          queue_recorded(self, {row});
        });
}

void edit_preview(thread_self self, const std::string& run_id);

/// Edits the preview now when it is due and shows less than the candidate, else sets
/// the timer of its next edit.
void schedule_edit(thread_self self, const std::string& run_id) {
  auto& st = self->state;
  auto it = st.previews.find(run_id);
  if (it == st.previews.end()) {
    return;
  }
  auto& p = it->second;
  if (p.platform_message_id.empty() || p.editing || p.finished || p.broken) {
    return;
  }
  const auto text = first_part(st, p.candidate);
  if (text.empty() || text == p.shown) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const auto at = next_change_at(p);
  if (now >= at) {
    edit_preview(self, run_id);
    return;
  }
  if (!p.tick_set) {
    p.tick_set = true;
    self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(at - now),
                       preview_atom::value, run_id);
  }
}

/// An intermediate edit: the preview shows the candidate's first part so far.
void edit_preview(thread_self self, const std::string& run_id) {
  auto& st = self->state;
  auto& p = st.previews.at(run_id);
  p.editing = true;
  const auto text = first_part(st, p.candidate);
  net::channel::outbound_part part;
  part.reply_to = !p.reply_to.empty() ? p.reply_to
                  : st.thread         ? st.thread->reply_to
                                      : std::string();
  part.thread_key = st.spec.thread_key;
  part.run_id = run_id;
  part.text = text;
  const auto& ctx = *st.spec.context;
  auto* http = ctx.http_here();
  auto editing =
      [](std::shared_ptr<net::channel::channel_adapter> a, net::http_client* client,
         net::channel::outbound_part pt, std::string message_id,
         std::chrono::milliseconds deadline) -> asio::awaitable<net::channel::send_result> {
    auto edited = a->edit(*client, std::move(pt), std::move(message_id), deadline);
    co_return co_await std::move(edited);
  }(channel_of(st).adapter, http, std::move(part), p.platform_message_id, ctx.outbox.send_timeout);
  start_io(self, http->get_executor(), std::move(editing),
           [self, run_id, text](expected<net::channel::send_result> r) {
             auto& s = self->state;
             auto found = s.previews.find(run_id);
             if (found == s.previews.end()) {
               return;
             }
             auto& q = found->second;
             q.editing = false;
             const auto now = std::chrono::steady_clock::now();
             if (r && r->outcome == net::channel::send_outcome::sent) {
               q.shown = text;
               q.last_change = now;
             } else if (!r || r->outcome == net::channel::send_outcome::retry) {
               // A 429 names its wait; anything else waits a change interval more.
               const auto wait =
                   r ? std::max<std::chrono::milliseconds>(r->retry_after, preview_edit_interval)
                     : preview_edit_interval;
               q.not_before = now + wait;
               q.last_change = now;
             } else {
               log::warn("channel {} thread {}: the preview of run {} cannot be edited ({}); "
                         "its final text comes at the end",
                         channel_of(s).record.name, s.spec.thread_key, run_id, r->error);
               q.broken = true;
             }
             if (q.finished) {
               pump_outbox(self); // the final edit waited for this one
               return;
             }
             schedule_edit(self, run_id);
           });
}

} // namespace

bool streams(const thread_state& st) {
  const auto& ch = channel_of(st);
  return ch.record.stream_edits && ch.adapter->supports_edits();
}

void follow_preview(thread_self self, const run_ticket& ticket, const std::string& reply_to) {
  auto& st = self->state;
  if (!streams(st) || st.closed_previews.contains(ticket.run_id) ||
      st.previews.contains(ticket.run_id)) {
    return;
  }
  st.previews[ticket.run_id].reply_to = reply_to;
  // The observer runs in an actor of its own: it reads each entry and sends the thread
  // only the text (weakly held: a thread that passivated gets nothing).
  auto parser = std::make_shared<simdjson::dom::parser>();
  st.spec.context->chat->observe(
      ticket, 0,
      [parser, run_id = ticket.run_id,
       weak = caf::actor_cast<caf::weak_actor_ptr>(self)](const journal_entry& e) {
        preview_delta delta;
        if (!read_delta(*parser, e, run_id, delta)) {
          return;
        }
        if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
          caf::anon_send(caf::actor_cast<channel_thread_actor>(strong), preview_atom::value,
                         std::move(delta));
        }
      });
}

void on_preview_delta(thread_self self, preview_delta delta) {
  auto& st = self->state;
  auto it = st.previews.find(delta.run_id);
  if (it == st.previews.end() || it->second.finished) {
    return;
  }
  auto& p = it->second;
  if (delta.reset || delta.round != p.round) {
    p.candidate.clear();
    p.round = delta.round;
  }
  p.candidate += delta.text;
  if (!p.recorded) {
    if (!first_part(st, p.candidate).empty() && st.thread) {
      record_preview(self, delta.run_id, p);
    }
    return;
  }
  schedule_edit(self, delta.run_id);
}

void on_preview_tick(thread_self self, const std::string& run_id) {
  auto& st = self->state;
  if (auto it = st.previews.find(run_id); it != st.previews.end()) {
    it->second.tick_set = false;
    schedule_edit(self, run_id);
  }
}

void preview_posted(thread_self self, const std::string& run_id,
                    const std::string& platform_message_id, const std::string& text) {
  auto& st = self->state;
  auto it = st.previews.find(run_id);
  if (it == st.previews.end()) {
    return;
  }
  auto& p = it->second;
  p.platform_message_id = platform_message_id;
  p.shown = text;
  p.last_change = std::chrono::steady_clock::now();
  schedule_edit(self, run_id);
}

std::string preview_text(const thread_state& st, const std::string& run_id,
                         const std::string& stored) {
  auto it = st.previews.find(run_id);
  if (it == st.previews.end()) {
    return stored;
  }
  auto text = first_part(st, it->second.candidate);
  return text.empty() ? stored : text;
}

std::int64_t close_preview(thread_state& st, const std::string& run_id) {
  auto it = st.previews.find(run_id);
  if (it == st.previews.end()) {
    return 0;
  }
  auto& p = it->second;
  p.finished = true;
  const auto wait = next_change_at(p) - std::chrono::steady_clock::now();
  return storage::now_millis() +
         std::max<std::int64_t>(
             0, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
}

std::optional<std::string> stopped_preview_text(const thread_state& st, const std::string& run_id) {
  auto it = st.previews.find(run_id);
  if (it == st.previews.end() || !it->second.recorded) {
    return std::nullopt;
  }
  const auto& p = it->second;
  const auto& shown = p.shown.empty() ? p.candidate : p.shown;
  return shown + "\n\n(stopped)";
}

void forget_preview(thread_state& st, const std::string& run_id) {
  if (st.previews.erase(run_id) == 0) {
    return;
  }
  if (st.closed_previews.insert(run_id).second) {
    st.closed_order.push_back(run_id);
    if (st.closed_order.size() > closed_previews_kept) {
      st.closed_previews.erase(st.closed_order.front());
      st.closed_order.pop_front();
    }
  }
}

bool preview_editing(const thread_state& st, const std::string& run_id) {
  auto it = st.previews.find(run_id);
  return it != st.previews.end() && it->second.editing;
}

std::int64_t preview_next_change(const thread_state& st, const std::string& run_id) {
  auto it = st.previews.find(run_id);
  if (it == st.previews.end()) {
    return 0;
  }
  const auto wait = next_change_at(it->second) - std::chrono::steady_clock::now();
  if (wait <= std::chrono::steady_clock::duration::zero()) {
    return 0;
  }
  return storage::now_millis() +
         std::chrono::duration_cast<std::chrono::milliseconds>(wait).count();
}

} // namespace troupe::actors::channel_detail
