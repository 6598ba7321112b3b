// Start-up recovery of runs that waited for a human's approval when the node stopped
// (issue 19). Storage recovery leaves such a run `running` with its approvals pending;
// here it is read back from its rows (its objective, its stored rounds, the evidence of
// its earlier tool calls, the paused round its approvals carry, its journal up to the
// pause) and handed to its conversation, whose run goes on with the paused round.

#include <algorithm>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/chat_service.hpp"
#include "troupe/actors/run_journal.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/approvals.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

namespace {

/// A paused run as its rows have it.
struct paused_run {
  storage::run_record run;
  storage::conversation_record conversation;
  std::string text;
  /// The seq of the last journal entry the run had published when it saved its round.
  std::int64_t seq = 0;
  std::shared_ptr<run_resume> resume;
  std::vector<journal_entry> entries;
  /// Why it cannot be resumed (empty: it can).
  std::string problem;
};

std::vector<tool_call> calls_of(std::string_view json) {
  std::vector<tool_call> out;
  if (json.empty()) {
    return out;
  }
  simdjson::dom::parser parser;
  simdjson::padded_string buffer(json);
  simdjson::dom::array calls;
  if (parser.parse(buffer).get(calls) != simdjson::SUCCESS) {
    return out;
  }
  for (auto c : calls) {
    std::string_view id;
    std::string_view name;
    std::string_view arguments;
    if (c["id"].get_string().get(id) != simdjson::SUCCESS ||
        c["name"].get_string().get(name) != simdjson::SUCCESS) {
      continue;
    }
    if (c["arguments"].get_string().get(arguments) != simdjson::SUCCESS) {
      arguments = "{}";
    }
    out.push_back(tool_call{std::string(id), std::string(name), std::string(arguments)});
  }
  return out;
}

/// The run's messages after its objective, and the objective itself.
expected<void> read_messages(storage::connection& c, paused_run& p) {
  auto messages = storage::list_messages(c, p.run.conversation_id);
  if (!messages) {
    return tl::unexpected(messages.error());
  }
  std::map<std::string, std::string> names;
  bool objective_seen = false;
  for (const auto& m : *messages) {
    if (!m.run_id || *m.run_id != p.run.id) {
      continue;
    }
    if (m.role == "user") {
      if (!objective_seen) {
        p.resume->objective_span = storage::stored_span{m.id, m.id};
        objective_seen = true;
      }
      p.text += (p.text.empty() ? "" : "\n\n") + m.content;
      continue;
    }
    chat_message out;
    if (m.role == "assistant") {
      out.role = chat_role::assistant;
      out.tool_calls = calls_of(m.tool_calls_json);
      for (const auto& call : out.tool_calls) {
        names[call.id] = call.name;
      }
    } else if (m.role == "tool") {
      out.role = chat_role::tool;
      out.tool_call_id = m.tool_call_id;
      if (auto it = names.find(m.tool_call_id); it != names.end()) {
        out.name = it->second;
      }
    } else {
      continue;
    }
    out.content = m.content;
    p.resume->messages.push_back(std::move(out));
    p.resume->spans.push_back(storage::stored_span{m.id, m.id});
  }
  if (!objective_seen) {
    p.problem = "its user message is not stored";
  }
  return {};
}

/// The evidence of the tool calls of the rounds before the paused one: its `tool` steps
/// (each recorded when its round ended), numbered by the model rounds before them.
expected<void> read_earlier_events(storage::connection& c, paused_run& p) {
  auto steps = storage::list_steps(c, p.run.id);
  if (!steps) {
    return tl::unexpected(steps.error());
  }
  int round = 0;
  for (const auto& s : *steps) {
    if (s.kind == "llm" && s.name == "llm_round" && s.status == "done") {
      ++round;
      continue;
    }
    if (s.kind != "tool") {
      continue;
    }
    harness::tool_event e;
    e.tool = s.name;
    e.status = harness::tool_status_from(s.status);
    e.output_summary = s.output_json;
    if (e.failed()) {
      e.error = s.output_json;
    }
    if (auto input = json_object::parse(s.input_json.empty() ? "{}" : s.input_json)) {
      e.call_id = input->text("call_id").value_or(std::nullopt).value_or(std::string());
      e.arguments_summary = input->text("arguments").value_or(std::nullopt).value_or(std::string());
    }
    e.round = round;
    p.resume->earlier_events.push_back(std::move(e));
  }
  return {};
}

/// Every top-level run left waiting for a human, oldest first.
expected<std::vector<paused_run>> read_paused_runs(storage::connection& c) {
  auto running = storage::list_runs_with_status(c, storage::run_status::running);
  if (!running) {
    return tl::unexpected(running.error());
  }
  std::vector<paused_run> out;
  for (auto& run : *running) {
    if (run.parent_run_id) {
      continue;
    }
    auto approvals = storage::list_run_approvals(c, run.uuid);
    if (!approvals) {
      return tl::unexpected(approvals.error());
    }
    const auto pending =
        std::find_if(approvals->rbegin(), approvals->rend(),
                     [](const storage::approval_record& a) { return a.status == "pending"; });
    if (pending == approvals->rend()) {
      continue;
    }
    auto conversation = storage::find_conversation(c, run.conversation_id);
    if (!conversation) {
      return tl::unexpected(conversation.error());
    }
    paused_run p;
    p.resume = std::make_shared<run_resume>();
    p.resume->round_json = pending->round_json;
    if (auto saved = json_object::parse(pending->round_json.empty() ? "{}" : pending->round_json)) {
      p.seq = std::max<std::int64_t>(0, saved->integer("seq").value_or(std::nullopt).value_or(0));
    }
    p.resume->seq = static_cast<std::uint64_t>(p.seq);
    p.resume->approvals = std::move(*approvals);
    p.run = std::move(run);
    p.conversation = std::move(*conversation);
    if (auto read = read_messages(c, p); !read) {
      return tl::unexpected(read.error());
    }
    if (auto read = read_earlier_events(c, p); !read) {
      return tl::unexpected(read.error());
    }
    // The journal as it was when the round was saved: what followed (the error a stop
    // recorded) is not the run's any more.
    auto events = storage::list_run_events(c, p.run.id, 0);
    if (!events) {
      return tl::unexpected(events.error());
    }
    for (const auto& e : *events) {
      if (e.seq > p.seq || e.seq != static_cast<std::int64_t>(p.entries.size()) + 1) {
        break;
      }
      p.entries.push_back(make_journal_entry(static_cast<std::uint64_t>(e.seq), e.event, e.data,
                                             e.event.empty() && e.data == "[DONE]"));
    }
    out.push_back(std::move(p));
  }
  return out;
}

} // namespace

asio::awaitable<std::size_t> chat_service::resume_paused_runs() {
  auto paused = options_.reads->with([](storage::connection& c) { return read_paused_runs(c); });
  if (!paused) {
    log::error("runs waiting for an approval cannot be read for recovery: {}",
               paused.error().message);
    co_return 0;
  }
  std::size_t resumed = 0;
  for (auto& p : *paused) {
    const auto run_row = p.run.id;
    const auto uuid = p.run.uuid;
    std::string failure = p.problem;
    if (failure.empty()) {
      // The journal's entries after the saved round (a stop's error) go; the resumed
      // run's follow them. (Ops and awaitables named: GCC 12 destroys some temporaries of
      // a co_await full-expression twice.)
      auto trim = storage::make_write("trim the journal of a resumed run",
                                      [run_row, seq = p.seq](storage::connection& c) {
                                        return c.run("DELETE FROM run_events WHERE run_id = ? "
                                                     "AND seq > ?",
                                                     run_row, seq);
                                      });
      auto trimming = write(system_, options_.writer, std::move(trim), store_write_timeout);
      auto trimmed = co_await std::move(trimming);
      if (!trimmed) {
        failure = "its journal could not be trimmed to the saved round: " + trimmed.error().message;
      }
    }
    if (failure.empty()) {
      chat_submission s;
      s.user_id = p.conversation.owner_user_id;
      s.conversation = p.conversation;
      s.text = p.text;
      s.run_id = uuid;
      s.run_row = run_row;
      s.memory_user = resumed_memory_user(*options_.reads, uuid);
      s.resume = p.resume;
      s.earlier_entries = std::move(p.entries);
      auto submitting = submit(std::move(s));
      auto submitted = co_await std::move(submitting);
      if (submitted) {
        ++resumed;
        continue;
      }
      failure = submitted.error().message;
    }
    log::warn("run {} (waiting for an approval) cannot be resumed: {}", uuid, failure);
    auto end = storage::make_write(
        "end a run that cannot be resumed",
        [run_row, uuid, why = "not resumed after a restart: " + failure](
            storage::connection& c) -> expected<void> {
          if (auto gone = storage::expire_run_approvals(c, uuid, why); !gone) {
            return tl::unexpected(gone.error());
          }
          return storage::set_run_status(c, run_row, storage::run_status::failed, why);
        });
    auto ending = write(system_, options_.writer, std::move(end), store_write_timeout);
    if (auto ended = co_await std::move(ending); !ended) {
      log::error("run {} could not be marked failed: {}", uuid, ended.error().message);
    }
  }
  if (resumed > 0) {
    log::info("resumed {} run(s) that wait for a human's approval", resumed);
  }
  co_return resumed;
}

} // namespace troupe::actors
