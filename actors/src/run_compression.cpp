// Context compression in a run (issue 16): before each LLM round the prompt's history is
// planned (runtime/prompt/compression.hpp); old tool outputs are pruned, and when that is
// not enough the agent's fast model (its main model when it has none) summarises the
// middle, under a deadline of its own. The summary and the range it covers are stored
// (storage/context_summaries.hpp) before the middle leaves the prompt; the full messages
// stay stored. A failed or unstored summary leaves the history as it was and is a
// recorded step; the run goes on.
//
// Memory writes come first: before the summary call, the run waits for the memory writer
// of its user to settle every change this conversation queued (memory_facade::settle).
// Ordering alone is not enough: a memory tool call that timed out or was cancelled leaves
// its change queued in the writer, still to be applied, while the run goes on. A settle
// that fails skips the summary for this round (a recorded step); the history stays.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "run_state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/prompt/compression.hpp"
#include "troupe/runtime/prompt/token_estimate.hpp"
#include "troupe/storage/context_summaries.hpp"

namespace troupe::actors::detail {

namespace {

/// The longest a summary call may take (each of its deadlines is cut to this).
constexpr std::chrono::milliseconds summary_deadline{120'000};

std::size_t context_window_of(const run_state& st) {
  return st.spec.agent.context_window != 0 ? st.spec.agent.context_window : default_context_window;
}

/// What the request carries besides the history: the system message and the tools.
std::size_t fixed_tokens(const run_state& st) {
  const auto system = prompt::render_system_text(st.spec.agent.system_prompt, st.blocks);
  return (system.empty() ? 0 : prompt::estimate_tokens(system) + prompt::message_overhead_tokens) +
         st.tool_tokens;
}

std::size_t history_tokens(const std::vector<chat_message>& messages) {
  std::size_t n = 0;
  for (const auto& m : messages) {
    n += prompt::estimate_tokens(m);
  }
  return n;
}

/// Runs on the io executor: the whole (not streamed) summary answer.
asio::awaitable<completion_outcome> summary_call(std::shared_ptr<net::provider_client> client,
                                                 completion_request request) {
  co_return co_await client->complete(std::move(request));
}

using stored_callback = std::function<void(std::optional<std::string> error)>;

/// What the summary's write reads once it runs: the spans of the messages it covers and
/// of those it leaves, and the summary message's own span, which it fills.
struct summary_spans {
  std::vector<storage::message_span> covered;
  std::vector<storage::message_span> uncovered;
  storage::message_span summary;
};

/// Stores the summary record, then calls `done` (with the error when it was not stored).
/// A run that stores nothing has nothing to keep: `done` runs at once.
void store_summary(run_self self, storage::context_summary_record record, summary_spans spans,
                   stored_callback done) {
  auto& st = self->state;
  if (!persists(st)) {
    done(std::nullopt);
    return;
  }
  if (st.spec.row_pending) {
    // The run's row is being written: the record names it, so it waits for it.
    st.row_waiters.push_back([self, record = std::move(record), spans = std::move(spans),
                              done = std::move(done)](bool ok) mutable {
      if (ok) {
        store_summary(self, std::move(record), std::move(spans), std::move(done));
      }
    });
    return;
  }
  if (st.spec.conversation_row == 0) {
    done(std::nullopt);
    return;
  }
  record.run_id = st.spec.run_row;
  record.conversation_id = st.spec.conversation_row;
  record.created_at = unix_millis_now();
  self->request(*st.spec.io.writer, store_write_timeout, write_atom::value,
                storage::insert_context_summary_op(std::move(record), std::move(spans.covered),
                                                   std::move(spans.uncovered),
                                                   std::move(spans.summary)))
      .then(
          [done](write_result& r) {
            done(r ? std::nullopt : std::optional<std::string>(r.error().message));
          },
          [done](caf::error& e) { done(from_caf_error(e).message); });
}

/// A summary that could not be made or kept: the history stays, the step says why.
void summary_failed(run_self self, const std::string& model, const std::string& why,
                    compression_done done, const std::function<void(compression_done)>& then) {
  auto& st = self->state;
  st.summariser_failed = true;
  json_writer w;
  w.begin_object().key("round").value(st.round).key("model").value(model);
  w.key("error").value(why).key("history_kept").value(true).end_object();
  record_step(self, "llm", "context_compression", "failed", "{}", std::move(w).str());
  done.skipped = fmt::format("the summary failed: {}", why);
  then(std::move(done));
}

void on_summary(run_self self, expected<completion_outcome> r, prompt::compression_plan plan,
                std::string model, compression_done done,
                std::function<void(compression_done)> then) {
  auto& st = self->state;
  std::string failure;
  if (!r) {
    failure = r.error().message;
  } else if (r->failure) {
    failure = fmt::format("{}: {}", to_string(r->failure->kind), r->failure->message);
  } else if (r->answer.text.find_first_not_of(" \t\r\n") == std::string::npos) {
    failure = "the summary was empty";
  }
  if (!failure.empty()) {
    summary_failed(self, model, failure, std::move(done), then);
    return;
  }
  if (r->answer.usage) {
    st.result.usage.prompt_tokens += r->answer.usage->prompt_tokens;
    st.result.usage.completion_tokens += r->answer.usage->completion_tokens;
    st.result.usage.total_tokens += r->answer.usage->total_tokens;
  }
  auto summary = std::move(r->answer.text);
  auto compressed = prompt::compressed_history(st.messages, plan, summary);
  // The spans move with their messages; the summary message gets the range it covers,
  // filled by its write.
  st.spans.resize(st.messages.size());
  summary_spans spans;
  spans.summary = std::make_shared<storage::stored_span>();
  std::vector<storage::message_span> compressed_spans(compressed.size());
  compressed_spans[std::min(plan.head_end, compressed.size() - 1)] = spans.summary;
  for (std::size_t i = 0; i < st.messages.size(); ++i) {
    if (auto at = prompt::compressed_index(plan, i)) {
      if (*at < compressed_spans.size()) {
        compressed_spans[*at] = st.spans[i];
      }
      spans.uncovered.push_back(st.spans[i]);
    } else {
      spans.covered.push_back(st.spans[i]);
    }
  }
  const auto covered = plan.covered();
  const auto objective = prompt::compressed_index(plan, st.objective_index);
  // The estimate of the next round's prompt: the system message with the note, the
  // tools and the compressed history.
  auto blocks = st.blocks;
  (void)blocks.set(prompt::compression_note_block, std::string(prompt::compression_note()));
  const auto system = prompt::render_system_text(st.spec.agent.system_prompt, blocks);
  const auto tokens_after =
      (system.empty() ? 0 : prompt::estimate_tokens(system) + prompt::message_overhead_tokens) +
      st.tool_tokens + history_tokens(compressed);
  storage::context_summary_record record;
  record.summary = summary;
  // The counts a reader falls back on when the range is unknown: of the history before
  // the run, the head kept and the tail kept (none when the run's own rounds were
  // summarised).
  record.head_messages = static_cast<std::int64_t>(std::min(plan.head_end, st.objective_index));
  record.tail_messages = static_cast<std::int64_t>(
      plan.tail_begin < st.objective_index ? st.objective_index - plan.tail_begin : 0);
  record.covered_messages = static_cast<std::int64_t>(covered);
  record.tokens_before = static_cast<std::int64_t>(done.tokens_before);
  record.tokens_after = static_cast<std::int64_t>(tokens_after);
  record.model = model;
  const bool updated = plan.previous_summary.has_value();
  // The summary is durable before the history it covers leaves the prompt.
  store_summary(
      self, std::move(record), std::move(spans),
      [self, compressed = std::move(compressed), compressed_spans = std::move(compressed_spans),
       objective, summary = std::move(summary), covered, updated, model, tokens_after,
       done = std::move(done), then = std::move(then)](std::optional<std::string> error) mutable {
        auto& state = self->state;
        if (state.finished) {
          return;
        }
        if (error) {
          summary_failed(self, model, fmt::format("the summary could not be stored: {}", *error),
                         std::move(done), then);
          return;
        }
        state.messages = std::move(compressed);
        state.spans = std::move(compressed_spans);
        // The objective is never summarised: it is in the head, kept after the
        // summary, or in the tail.
        state.objective_index = objective.value_or(state.messages.size() - 1);
        state.compressed = true;
        note_compression(state);
        done.summarised = true;
        done.messages_covered = covered;
        done.summary_chars = summary.size();
        done.summary_tokens = prompt::estimate_tokens(summary);
        done.tokens_after = tokens_after;
        json_writer w;
        w.begin_object().key("round").value(state.round);
        w.key("tokens_before").value(done.tokens_before);
        w.key("tokens_after").value(done.tokens_after);
        w.key("messages_covered").value(covered);
        w.key("summary_tokens").value(done.summary_tokens);
        w.key("pruned_tool_outputs").value(done.pruned);
        w.key("model").value(model).key("updated_previous").value(updated);
        w.end_object();
        auto data = std::move(w).str();
        // The step is named as the event is.
        record_step(self, "llm", "context.compressed", "done", "{}", data);
        publish(self, run_event_type::context_compressed, std::move(data));
        then(std::move(done));
      });
}

/// Runs on the io executor: waits until the user's memory writer has applied every change
/// of this conversation queued before.
asio::awaitable<expected<void>> settle_call(std::shared_ptr<memory_service> memory,
                                            storage::row_id user, storage::row_id conversation) {
  auto settling = memory->settle(user, conversation);
  co_return co_await std::move(settling);
}

/// Calls `then` once the memory writes this run's conversation queued are durable (with
/// the failure when they could not be waited for); at once without memory.
void settle_memory(run_self self, std::function<void(std::optional<std::string>)> then) {
  auto& st = self->state;
  if (!st.spec.io.memory || st.spec.owner_user == 0) {
    then(std::nullopt);
    return;
  }
  // Before the run's row is known (a new conversation), every change of the user counts.
  const auto conversation = st.spec.conversation_row;
  auto id = std::make_shared<std::uint64_t>(0);
  auto task = start_io(self, st.spec.io.http->get_executor(),
                       settle_call(st.spec.io.memory, st.spec.owner_user, conversation),
                       [self, id, then = std::move(then)](expected<expected<void>> r) mutable {
                         self->state.inflight.erase(*id);
                         if (self->state.finished) {
                           return;
                         }
                         if (!r || !*r) {
                           then((!r ? r.error() : r->error()).message);
                           return;
                         }
                         then(std::nullopt);
                       });
  *id = track(self, std::move(task));
}

/// Asks the fast model (else the main one) for the summary of the plan's middle.
void request_summary(run_self self, prompt::compression_plan plan, compression_done done,
                     std::function<void(compression_done)> then) {
  auto& st = self->state;
  const auto window = context_window_of(st);
  auto model = st.spec.agent.fast_model.empty() ? st.spec.agent.model : st.spec.agent.fast_model;
  auto request = prompt::summary_request(st.messages, plan, model, window);
  auto config = st.spec.provider;
  config.deadlines.first_byte = std::min(config.deadlines.first_byte, summary_deadline);
  config.deadlines.idle = std::min(config.deadlines.idle, summary_deadline);
  config.deadlines.total = std::min(config.deadlines.total, summary_deadline);
  auto client = std::make_shared<net::provider_client>(*st.spec.io.http, std::move(config));
  st.summarising = true;
  auto id = std::make_shared<std::uint64_t>(0);
  auto task = start_io(self, st.spec.io.http->get_executor(),
                       summary_call(std::move(client), std::move(request)),
                       [self, id, plan = std::move(plan), model, done = std::move(done),
                        then = std::move(then)](expected<completion_outcome> r) mutable {
                         self->state.inflight.erase(*id);
                         self->state.summarising = false;
                         if (self->state.finished) {
                           return;
                         }
                         on_summary(self, std::move(r), std::move(plan), std::move(model),
                                    std::move(done), std::move(then));
                       });
  *id = track(self, std::move(task));
}

} // namespace

void note_compression(run_state& st) {
  const bool summarised = std::any_of(st.messages.begin(), st.messages.end(),
                                      [](const chat_message& m) { return prompt::is_summary(m); });
  if (summarised) {
    (void)st.blocks.set(prompt::compression_note_block, std::string(prompt::compression_note()));
  } else {
    st.blocks.clear(prompt::compression_note_block);
  }
}

void compress_context(run_self self, bool force, std::function<void(compression_done)> then) {
  auto& st = self->state;
  note_compression(st);
  (void)st.blocks.set(prompt::plan_block, st.plan.render());
  const auto window = context_window_of(st);
  prompt::compression_input input;
  input.history = st.messages;
  input.fixed_tokens = fixed_tokens(st);
  input.context_window = window;
  input.settings = st.spec.agent.compression;
  input.pinned = st.objective_index;
  input.force = force;
  auto plan = prompt::plan_compression(input);
  compression_done done;
  done.tokens_before = plan.estimated_tokens;
  done.tokens_after = plan.estimated_tokens;
  if (!plan.acts()) {
    done.skipped = plan.skipped;
    then(std::move(done));
    return;
  }
  prompt::apply_pruning(st.messages, plan);
  done.pruned = plan.prune.size();
  done.tokens_after = plan.pruned_tokens;
  if (!plan.prune.empty()) {
    json_writer w;
    w.begin_object().key("round").value(st.round).key("pruned_tool_outputs").value(done.pruned);
    w.key("tokens_before").value(done.tokens_before).key("tokens_after").value(done.tokens_after);
    w.end_object();
    record_step(self, "llm", "context_pruned", "done", "{}", std::move(w).str());
  }
  if (!plan.summarise) {
    done.skipped = "pruning the tool outputs was enough";
    then(std::move(done));
    return;
  }
  if (st.summariser_failed && !force) {
    done.skipped = "the summariser failed earlier in this run";
    then(std::move(done));
    return;
  }
  // Pending memory writes of this conversation complete before it compacts.
  settle_memory(self, [self, plan = std::move(plan), done = std::move(done),
                       then = std::move(then)](std::optional<std::string> failure) mutable {
    if (failure) {
      auto& state = self->state;
      json_writer w;
      w.begin_object().key("round").value(state.round);
      w.key("error").value(*failure).key("history_kept").value(true).end_object();
      record_step(self, "llm", "context_compression", "failed", "{}", std::move(w).str());
      done.skipped = fmt::format("pending memory writes did not settle: {}", *failure);
      then(std::move(done));
      return;
    }
    request_summary(self, std::move(plan), std::move(done), std::move(then));
  });
}

} // namespace troupe::actors::detail
