// Slash commands of a channel thread, answered without the model (issue 17): /new and
// /reset, /continue [N] and /archives, /stop, /status and /help (`/compact` goes to the
// conversation's compaction path, channel_thread.cpp). A command's effect (a fresh
// conversation, a resumed one), its reply in the outbox (keyed by the message's journaled
// run id, parts from 0) and the message's `done` are one commit: a restart neither
// repeats the effect nor sends the reply twice. Also here: the notice of dead-lettered
// replies, and the archives regenerated as a conversation grows.

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "channel_thread_state.hpp"
#include "troupe/runtime/channel/archive.hpp"
#include "troupe/runtime/channel/text.hpp"
#include "troupe/runtime/harness/evidence_ledger.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/channel_archives.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors::channel_detail {

namespace {

/// How long `/status` waits to learn where the active run stands.
constexpr auto status_timeout = std::chrono::seconds(5);
/// The key prefix of a dead-letter notice's outbox row (`notice:<message run id>`).
constexpr std::string_view notice_prefix = "notice:";

using effect_fn = std::function<expected<void>(storage::connection&)>;
using after_fn = std::function<void(thread_self)>;

/// Who owns the thread's conversations and archives: the thread under `thread` scope,
/// else the sender (docs/channels.md).
std::string identity_of(const thread_state& st, const storage::inbound_record& m) {
  return owner_identity(st, m);
}

/// Records the answer `text` to command message `m` with `effect` (and the notice owed)
/// in one commit, then runs `after`, takes the message off the inbox and moves on. A
/// failed commit leaves the message at the front: it is answered again after a back-off
/// (nothing of it was stored).
void finish_command(thread_self self, const storage::inbound_record& m, const std::string& text,
                    effect_fn effect = {}, after_fn after = {}) {
  finish_command_choosing(
      self, m, {text},
      [effect](storage::connection& c) -> expected<std::size_t> {
        if (effect) {
          if (auto ok = effect(c); !ok) {
            return tl::unexpected(ok.error());
          }
        }
        return std::size_t{0};
      },
      [after](thread_self s, std::size_t) {
        if (after) {
          after(s);
        }
      });
}

} // namespace

void finish_command_choosing(thread_self self, const storage::inbound_record& m,
                             const std::vector<std::string>& texts, choosing_effect effect,
                             chosen_fn after, std::function<void(thread_self)> failed) {
  auto& st = self->state;
  std::vector<std::vector<storage::outbox_record>> answers;
  for (const auto& text : texts) {
    answers.push_back(reply_rows(st, m.run_uuid, text, m.reply_to));
  }
  auto notice = owed_notice(st, m);
  auto chosen = std::make_shared<std::size_t>(0);
  auto op = storage::make_write(
      "channel command answered",
      [effect, answers, notice, chosen, id = m.id](storage::connection& c) -> expected<void> {
        if (effect) {
          auto which = effect(c);
          if (!which) {
            return tl::unexpected(which.error());
          }
          *chosen = std::min(*which, answers.size() - 1);
        }
        if (notice) {
          if (auto ok = record_notice(c, *notice); !ok) {
            return ok;
          }
        }
        for (const auto& r : answers[*chosen]) {
          if (auto ok = storage::enqueue_outbox(c, r); !ok) {
            return tl::unexpected(ok.error());
          }
        }
        return storage::set_inbound_status(c, id, "done");
      });
  store(self, std::move(op), [self, answers, chosen, notice, after, failed, m](write_result r) {
    auto& s = self->state;
    s.submitting = false;
    if (!r) {
      log::error("channel {} thread {}: command {} not answered: {}", channel_of(s).record.name,
                 s.spec.thread_key, m.platform_message_id, r.error().message);
      if (failed) {
        failed(self);
      }
      retry_front_later(self);
      return;
    }
    const auto& rows = answers[*chosen];
    s.submit_failures = 0;
    if (!s.inbox.empty() && s.inbox.front().id == m.id) {
      pop_front_message(self);
    }
    if (notice) {
      s.notice_through = std::max(s.notice_through, notice->through_id);
    }
    if (after) {
      after(self, *chosen);
    }
    std::vector<storage::outbox_record> queued;
    if (notice) {
      queued.push_back(notice->row);
    }
    queued.insert(queued.end(), rows.begin(), rows.end());
    queue_recorded(self, queued);
    pump_inbox(self);
  });
}

namespace {

/// The archives the sender of `m` may resume here, newest first (their own, without the
/// thread's current conversation), at most as many as are listed.
std::vector<storage::channel_archive_record> archives_for(const thread_state& st,
                                                          const storage::inbound_record& m) {
  const auto identity = identity_of(st, m);
  const auto current = st.conversation ? st.conversation->id : 0;
  auto listed = st.spec.context->reads->with(
      [&](storage::connection& c) -> expected<std::vector<storage::channel_archive_record>> {
        auto user = storage::find_user_by_name(c, identity);
        if (!user) {
          if (user.error().code == errc::not_found) {
            return std::vector<storage::channel_archive_record>{};
          }
          return tl::unexpected(user.error());
        }
        return storage::list_channel_archives(
            c, user->id, current, static_cast<std::int64_t>(channel::max_listed_archives));
      });
  if (!listed) {
    log::warn("channel {} thread {}: archives cannot be read: {}", channel_of(st).record.name,
              st.spec.thread_key, listed.error().message);
    return {};
  }
  return std::move(*listed);
}

std::string archive_listing(const std::vector<storage::channel_archive_record>& archives) {
  std::vector<channel::archive_entry> entries;
  entries.reserve(archives.size());
  for (const auto& a : archives) {
    entries.push_back(channel::archive_entry{
        a.title, std::chrono::system_clock::time_point(std::chrono::milliseconds(a.updated_at))});
  }
  return channel::format_archive_list(entries);
}

/// Writes the archive of `conversation_id` when it has messages (in a commit of the
/// caller's); true when it was written.
expected<bool> archive_if_any(storage::connection& c, storage::row_id conversation_id) {
  auto count = storage::count_messages(c, conversation_id);
  if (!count) {
    return tl::unexpected(count.error());
  }
  if (count->count == 0) {
    return false;
  }
  auto written = storage::write_channel_archive(c, conversation_id);
  if (!written) {
    return tl::unexpected(written.error());
  }
  return true;
}

/// After a command that rebound the thread: its new conversation, read back.
void rebound(thread_self self) {
  auto& st = self->state;
  st.conversation.reset();
  st.archived_at = 0;
  load_binding(st);
}

void start_fresh(thread_self self, const storage::inbound_record& m) {
  auto& st = self->state;
  storage::conversation_record fresh;
  fresh.uuid = st.spec.context->chat->new_conversation_id();
  fresh.agent_id = channel_of(st).record.agent_id;
  fresh.title = thread_title(st);
  const auto previous = st.conversation->id;
  const auto thread_id = st.thread->id;
  const auto identity = identity_of(st, m);
  auto effect = [fresh, previous, thread_id,
                 identity](storage::connection& c) mutable -> expected<void> {
    if (auto kept = archive_if_any(c, previous); !kept) {
      return tl::unexpected(kept.error());
    }
    auto owner = storage::ensure_channel_user(c, identity);
    if (!owner) {
      return tl::unexpected(owner.error());
    }
    fresh.owner_user_id = *owner;
    auto id = storage::insert_conversation(c, fresh);
    if (!id) {
      return tl::unexpected(id.error());
    }
    return storage::set_thread_binding(c, thread_id, *owner, *id);
  };
  // An empty conversation is replaced all the same; the answer says nothing was archived.
  const auto count = st.spec.context->reads->with(
      [&](storage::connection& c) { return storage::count_messages(c, previous); });
  const bool has_messages = !count || count->count > 0;
  const auto text = has_messages ? std::string(channel::new_conversation_text())
                                 : std::string("Started a new conversation (the previous one "
                                               "was empty, so nothing was archived).");
  finish_command(self, m, text, std::move(effect), rebound);
}

void resume(thread_self self, const storage::inbound_record& m, const channel::command& command) {
  auto& st = self->state;
  const auto archives = archives_for(st, m);
  if (command.index == 0 || command.index > archives.size()) {
    finish_command(self, m, channel::continue_out_of_range(command.argument, archives.size()));
    return;
  }
  const auto& picked = archives[command.index - 1];
  const auto current = st.conversation->id;
  const auto thread_id = st.thread->id;
  auto effect = [current, thread_id, owner = picked.owner_user_id,
                 target = picked.conversation_id](storage::connection& c) -> expected<void> {
    // The conversation left is archived as it is now, so it is listed to come back to.
    if (auto kept = archive_if_any(c, current); !kept) {
      return tl::unexpected(kept.error());
    }
    return storage::set_thread_binding(c, thread_id, owner, target);
  };
  finish_command(self, m, channel::resumed_text(picked.title), std::move(effect), rebound);
}

void stop_run(thread_self self, const storage::inbound_record& m) {
  auto& st = self->state;
  if (st.runs.empty()) {
    finish_command(self, m, "No answer is in progress: nothing to stop.");
    return;
  }
  const auto run = st.runs.front();
  st.stopped_runs.insert(run.run_id);
  auto* http = st.spec.context->http_here();
  auto cancelling = st.spec.context->chat->cancel(run.conversation_id, run.run_id);
  start_io(self, http->get_executor(), std::move(cancelling),
           [self, m, run](expected<expected<bool>> r) {
             auto& s = self->state;
             if (r && *r && **r) {
               finish_command(self, m,
                              fmt::format("Stopped the answer in progress (run {}).", run.run_id));
               return;
             }
             s.stopped_runs.erase(run.run_id);
             const auto why = !r ? r.error().message : !*r ? r->error().message : std::string();
             finish_command(self, m,
                            why.empty() ? std::string("No answer is in progress: nothing to stop.")
                                        : fmt::format("The answer in progress could not be "
                                                      "stopped: {}",
                                                      why));
           });
}

/// `/status`; `active` says where the active run stands ("running", "queued"), when known.
std::string status_text(const thread_state& st, const std::string& active) {
  const auto& ctx = *st.spec.context;
  const auto& conversation = *st.conversation;
  auto agent = ctx.catalog ? ctx.catalog->agent(conversation.agent_id)
                           : ctx.reads->with([&](storage::connection& c) {
                               return storage::find_agent(c, conversation.agent_id);
                             });
  const auto count = ctx.reads->with(
      [&](storage::connection& c) { return storage::count_messages(c, conversation.id); });
  std::string out = fmt::format("Conversation: {} ({})\n", conversation.title, conversation.uuid);
  if (count) {
    fmt::format_to(std::back_inserter(out), "Messages: {}\n", count->count);
  }
  if (agent) {
    fmt::format_to(std::back_inserter(out), "Agent: {}, model {}\n", agent->name,
                   agent->main_model);
  }
  if (st.runs.empty()) {
    out += "Active run: none\n";
  } else {
    fmt::format_to(std::back_inserter(out), "Active run: {}{}\n", st.runs.front().run_id,
                   active.empty() ? std::string() : fmt::format(" ({})", active));
  }
  // Waiting: the runs handed over after the active one (a message that joined a run
  // under `steer` or `collect` is not one more), and the messages behind this one.
  std::set<std::string> later;
  for (const auto& r : st.runs) {
    if (r.run_id != st.runs.front().run_id) {
      later.insert(r.run_id);
    }
  }
  const auto queued = later.size() + (st.inbox.empty() ? 0 : st.inbox.size() - 1);
  fmt::format_to(std::back_inserter(out), "Queued messages: {}", queued);
  return out;
}

void report_status(thread_self self, const storage::inbound_record& m) {
  auto& st = self->state;
  if (st.runs.empty()) {
    finish_command(self, m, status_text(st, {}));
    return;
  }
  // Where the active run stands, asked of its journal (queued behind another run of the
  // conversation, or running).
  auto* http = st.spec.context->http_here();
  auto asking = st.spec.context->chat->status(st.runs.front().ticket, status_timeout);
  start_io(self, http->get_executor(), std::move(asking),
           [self, m](expected<expected<run_status_view>> r) {
             finish_command(self, m,
                            status_text(self->state, r && *r ? (*r)->status : std::string()));
           });
}

} // namespace

void answer_command(thread_self self, const storage::inbound_record& message,
                    const channel::command& command) {
  auto& st = self->state;
  switch (command.kind) {
    case channel::command_kind::new_conversation:
      start_fresh(self, message);
      return;
    case channel::command_kind::continue_list:
    case channel::command_kind::archives:
      finish_command(self, message, archive_listing(archives_for(st, message)));
      return;
    case channel::command_kind::continue_pick:
      resume(self, message, command);
      return;
    case channel::command_kind::stop:
      stop_run(self, message);
      return;
    case channel::command_kind::status:
      report_status(self, message);
      return;
    case channel::command_kind::help:
      finish_command(self, message, std::string(channel::help_text()));
      return;
    case channel::command_kind::approve:
    case channel::command_kind::deny:
      decide_approval(self, message, command);
      return;
    case channel::command_kind::none:
    case channel::command_kind::compact:
      break;
  }
  // Never here: the caller sends these to the conversation. Answered all the same, so
  // that the message does not stay at the front of the inbox.
  finish_command(self, message, std::string(channel::help_text()));
}

std::optional<dead_letter_notice> owed_notice(const thread_state& st,
                                              const storage::inbound_record& message) {
  if (!st.thread) {
    return std::nullopt;
  }
  auto dead = st.spec.context->reads->with(
      [&](storage::connection& c) { return storage::unnotified_dead_letters(c, st.thread->id); });
  if (!dead) {
    return std::nullopt;
  }
  std::vector<storage::outbox_record> lost;
  for (auto& e : *dead) {
    // A notice that was itself lost is not announced again.
    if (e.id > st.notice_through && !e.run_uuid.starts_with(notice_prefix)) {
      lost.push_back(std::move(e));
    }
  }
  if (lost.empty()) {
    return std::nullopt;
  }
  dead_letter_notice notice;
  notice.through_id = lost.back().id;
  notice.row.channel_id = channel_of(st).record.id;
  notice.row.thread_id = st.thread->id;
  notice.row.run_uuid = std::string(notice_prefix) + message.run_uuid;
  notice.row.part = 0;
  notice.row.reply_to = message.reply_to;
  notice.row.text =
      lost.size() == 1
          ? fmt::format(
                "Note: an earlier reply could not be delivered here: \xE2\x80\x9C{}\xE2\x80\x9D",
                harness::summarize(channel::single_line(lost.front().text), 120))
          : fmt::format("Note: {} earlier reply parts could not be delivered here; the first "
                        "began \xE2\x80\x9C{}\xE2\x80\x9D",
                        lost.size(),
                        harness::summarize(channel::single_line(lost.front().text), 80));
  return notice;
}

expected<void> record_notice(storage::connection& c, const dead_letter_notice& notice) {
  if (auto ok = storage::enqueue_outbox(c, notice.row); !ok) {
    return tl::unexpected(ok.error());
  }
  return storage::set_dead_letters_notified(c, notice.row.thread_id, notice.through_id);
}

void refresh_archive(thread_self self) {
  auto& st = self->state;
  if (!st.conversation) {
    return;
  }
  const auto conversation = st.conversation->id;
  const auto archived_at = st.archived_at;
  auto written = std::make_shared<std::int64_t>(-1);
  auto op = storage::make_write(
      "refresh channel archive",
      [conversation, archived_at, written](storage::connection& c) -> expected<void> {
        auto count = storage::count_messages(c, conversation);
        if (!count) {
          return tl::unexpected(count.error());
        }
        if (!channel::archive_due(static_cast<std::size_t>(count->count), archived_at)) {
          return {};
        }
        auto archive = storage::write_channel_archive(c, conversation);
        if (!archive) {
          return tl::unexpected(archive.error());
        }
        *written = archive->message_count;
        return {};
      });
  store(self, std::move(op), [self, conversation, written](write_result r) {
    auto& s = self->state;
    if (!r) {
      log::warn("channel {} thread {}: the archive cannot be written: {}",
                channel_of(s).record.name, s.spec.thread_key, r.error().message);
      return;
    }
    if (*written >= 0 && s.conversation && s.conversation->id == conversation) {
      s.archived_at = static_cast<std::size_t>(*written);
    }
  });
}

} // namespace troupe::actors::channel_detail
