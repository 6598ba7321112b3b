// Context compression in a run (issue 16): before each LLM round the prompt's history is
// planned (runtime/prompt/compression.hpp); old tool outputs are pruned, and when that is
// not enough the agent's fast model (its main model when it has none) summarises the
// middle, under a deadline of its own. The summary and the range it covers are stored
// (storage/context_summaries.hpp) before the middle leaves the prompt; the full messages
// stay stored. A failed or unstored summary leaves the history as it was and is a
// recorded step; the run goes on.
//
// Memory writes come first without waiting here: compression runs before a round, and a
// round starts only once every tool call of the one before has returned, the memory
// tool's only after its write was committed (memory_tools.cpp); the memory evidence and
// the summary go through the same store_writer, in order.

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

/// Stores the summary record, then calls `done` (with the error when it was not stored).
/// A run that stores nothing has nothing to keep: `done` runs at once.
void store_summary(run_self self, storage::context_summary_record record, stored_callback done) {
  auto& st = self->state;
  if (!persists(st)) {
    done(std::nullopt);
    return;
  }
  if (st.spec.row_pending) {
    // The run's row is being written: the record names it, so it waits for it.
    st.row_waiters.push_back(
        [self, record = std::move(record), done = std::move(done)](bool ok) mutable {
          if (ok) {
            store_summary(self, std::move(record), std::move(done));
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
                storage::insert_context_summary_op(std::move(record)))
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
  const auto covered = plan.middle_size();
  storage::context_summary_record record;
  record.summary = summary;
  record.head_messages = static_cast<std::int64_t>(plan.head_end);
  record.tail_messages = static_cast<std::int64_t>(st.objective_index - plan.tail_begin);
  record.covered_messages = static_cast<std::int64_t>(covered);
  record.tokens_before = static_cast<std::int64_t>(done.tokens_before);
  record.model = model;
  const bool updated = plan.previous_summary.has_value();
  // The summary is durable before the history it covers leaves the prompt.
  store_summary(self, std::move(record),
                [self, compressed = std::move(compressed), summary = std::move(summary), covered,
                 updated, model, done = std::move(done),
                 then = std::move(then)](std::optional<std::string> error) mutable {
                  auto& state = self->state;
                  if (state.finished) {
                    return;
                  }
                  if (error) {
                    summary_failed(self, model,
                                   fmt::format("the summary could not be stored: {}", *error),
                                   std::move(done), then);
                    return;
                  }
                  state.messages = std::move(compressed);
                  state.objective_index = state.objective_index - covered + 1;
                  state.compressed = true;
                  note_compression(state);
                  done.summarised = true;
                  done.messages_covered = covered;
                  done.summary_chars = summary.size();
                  done.summary_tokens = prompt::estimate_tokens(summary);
                  done.tokens_after = fixed_tokens(state) + history_tokens(state.messages);
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
                  record_step(self, "llm", "context_compressed", "done", "{}", data);
                  publish(self, run_event_type::context_compressed, std::move(data));
                  then(std::move(done));
                });
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

} // namespace troupe::actors::detail
