// Approvals in a channel thread (issue 19): while a run of the thread is awaited, its
// journal is followed for `approval` events; a call that waits for a human becomes a
// message to the thread (keyed `approval:<id>` in the outbox, so a run resumed after a
// restart, which announces its wait again, does not ask twice). `/approve ID` and
// `/deny ID` decide it when the sender is the one the approval waits for (the sender of
// the message that started the run) or an admin: the decision, its answer and the
// command's `done` are one commit; then the decision goes to the run through the
// approvals facade (which arbitrates against the approval's deadline).

#include <simdjson.h>

#include <fmt/format.h>

#include "channel_thread_state.hpp"
#include "troupe/runtime/channel/commands.hpp"
#include "troupe/runtime/channel_config.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/approvals.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors::channel_detail {

namespace {

/// The outbox key of the message that asks about approval `id`.
std::string ask_key(const std::string& id) {
  return std::string(approval_ask_prefix) + id;
}

/// Reads a journal entry into a request: an `approval` event of a call that waits (the
/// one with `timeout_s`; a decision has none). False for any other entry.
bool read_request(simdjson::dom::parser& parser, const journal_entry& e, approval_request& out) {
  if (e.event() != "approval") {
    return false;
  }
  // The entry is the run event ({type, run_id, data, …}); the approval is its data.
  simdjson::dom::element root;
  if (parser.parse(e.data().data(), e.data().size()).get(root) != simdjson::SUCCESS ||
      root["data"].get(root) != simdjson::SUCCESS) {
    return false;
  }
  std::string_view id;
  std::string_view tool;
  std::int64_t timeout_s = 0;
  if (root["id"].get_string().get(id) != simdjson::SUCCESS ||
      root["tool"].get_string().get(tool) != simdjson::SUCCESS ||
      root["timeout_s"].get_int64().get(timeout_s) != simdjson::SUCCESS) {
    return false;
  }
  out.id = std::string(id);
  out.tool = std::string(tool);
  out.timeout_s = timeout_s;
  simdjson::dom::element arguments;
  if (root["arguments"].get(arguments) == simdjson::SUCCESS) {
    out.arguments = simdjson::minify(arguments);
  }
  std::string_view reason;
  if (root["reason"].get_string().get(reason) == simdjson::SUCCESS) {
    out.reason = std::string(reason);
  }
  return true;
}

} // namespace

void follow_approvals(thread_self self, const run_ticket& ticket, const std::string& reply_to) {
  auto& st = self->state;
  if (!st.spec.context->approvals) {
    return;
  }
  // As the preview's observer: in an actor of its own, the thread weakly held.
  auto parser = std::make_shared<simdjson::dom::parser>();
  st.spec.context->chat->observe(
      ticket, 0,
      [parser, run_id = ticket.run_id, reply_to,
       weak = caf::actor_cast<caf::weak_actor_ptr>(self)](const journal_entry& e) {
        approval_request request;
        if (!read_request(*parser, e, request)) {
          return;
        }
        request.run_id = run_id;
        request.reply_to = reply_to;
        if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
          caf::anon_send(caf::actor_cast<channel_thread_actor>(strong), ask_approval_atom::value,
                         std::move(request));
        }
      });
}

void ask_approval(thread_self self, approval_request request) {
  auto& st = self->state;
  for (auto& run : st.runs) {
    if (run.run_id == request.run_id) {
      run.asked_approval = true;
    }
  }
  if (!st.thread && !load_binding(st)) {
    log::warn("channel {} thread {}: approval {} cannot be asked about: the thread is not bound",
              channel_of(st).record.name, st.spec.thread_key, request.id);
    return;
  }
  const auto text = channel::approval_request_text(request.id, request.tool, request.arguments,
                                                   request.reason, request.timeout_s);
  auto rows = reply_rows(st, ask_key(request.id), text, request.reply_to);
  auto op = storage::make_write("ask for an approval in a channel",
                                [rows](storage::connection& c) -> expected<void> {
                                  for (const auto& r : rows) {
                                    // Once per (approval, part): asked again, it stays.
                                    if (auto ok = storage::enqueue_reply_part(c, r); !ok) {
                                      return tl::unexpected(ok.error());
                                    }
                                  }
                                  return {};
                                });
  store(self, std::move(op), [self, rows, id = request.id](write_result r) {
    if (!r) {
      log::warn("channel {} thread {}: the request for approval {} cannot be recorded: {}",
                channel_of(self->state).record.name, self->state.spec.thread_key, id,
                r.error().message);
      return;
    }
    queue_recorded(self, rows);
  });
}

void decide_approval(thread_self self, const storage::inbound_record& message,
                     const channel::command& command) {
  auto& st = self->state;
  const auto& ctx = *st.spec.context;
  const bool approve = command.kind == channel::command_kind::approve;
  const auto id = command.argument;
  const auto answer = [&](channel::approval_answer a, std::string_view tool = {},
                          std::string_view status = {}) {
    finish_command_choosing(self, message, {channel::approval_answer_text(a, id, tool, status)},
                            {});
  };
  if (!ctx.approvals || id.empty()) {
    answer(channel::approval_answer::unknown);
    return;
  }
  // The sender, as the run knows them: their channel identity's user.
  const auto identity = channel_identity(channel_of(st).record.name, message.sender);
  auto found =
      ctx.reads->with([&](storage::connection& c)
                          -> expected<std::pair<storage::approval_record, storage::user_record>> {
        auto row = storage::find_approval(c, id);
        if (!row) {
          return tl::unexpected(row.error());
        }
        auto user = storage::find_user_by_name(c, identity);
        if (!user) {
          return tl::unexpected(user.error());
        }
        return std::pair{std::move(*row), std::move(*user)};
      });
  // Another user's approval is not shown to exist (as the API's 404).
  if (!found || (found->first.owner_user_id != found->second.id && found->second.role != "admin")) {
    answer(channel::approval_answer::unknown);
    return;
  }
  const auto& [row, user] = *found;
  if (row.status != "pending") {
    answer(channel::approval_answer::decided, row.tool, row.status);
    return;
  }
  const auto claim = ctx.approvals->claim(id);
  if (claim == approvals_facade::claim_result::taken) {
    answer(channel::approval_answer::decided, row.tool, "decided");
    return;
  }
  const auto status = std::string(approve ? "approved" : "denied");
  const auto note = fmt::format("in channel {}", channel_of(st).record.name);
  const auto by = user.id;
  const std::vector<std::string> texts = {
      channel::approval_answer_text(approve ? channel::approval_answer::approved
                                            : channel::approval_answer::denied,
                                    id, row.tool),
      channel::approval_answer_text(channel::approval_answer::decided, id, row.tool, "decided"),
  };
  auto approvals = ctx.approvals;
  finish_command_choosing(
      self, message, texts,
      [id, status, by, note](storage::connection& c) -> expected<std::size_t> {
        auto changed = storage::decide_approval(c, id, status, by, note);
        if (!changed) {
          return tl::unexpected(changed.error());
        }
        return *changed ? std::size_t{0} : std::size_t{1};
      },
      [approvals, id, approve, note, by, claim](thread_self, std::size_t chosen) {
        if (chosen == 0) {
          // To the run that waits, or kept for the run a restart resumes.
          approvals->deliver(id, approve, note, by);
        } else if (claim == approvals_facade::claim_result::claimed) {
          approvals->release(id);
        }
      },
      [approvals, id, claim](thread_self) {
        if (claim == approvals_facade::claim_result::claimed) {
          approvals->release(id);
        }
      });
}

} // namespace troupe::actors::channel_detail
