// The run's memory block (issue 15): before the first LLM round, the user's memories
// that match the objective are recalled on the blocking pool (memory_service::recall),
// rendered into the `memory_context` slot of the system message, and every item that
// entered the prompt gets a `used` evidence row naming this run. A user the memory
// service knows to have no active item is not recalled at all.

#include <memory>
#include <utility>
#include <vector>

#include "run_state.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/storage/memory.hpp"

namespace troupe::actors::detail {

namespace {

// A coroutine function (parameters by value), not a capturing coroutine lambda.
asio::awaitable<expected<memory::rendered_block>> recall_on(std::shared_ptr<memory_service> memory,
                                                            memory_recall_request request) {
  auto recalling = memory->recall(std::move(request));
  co_return co_await std::move(recalling);
}

void on_recalled(run_self self, memory::rendered_block block) {
  auto& st = self->state;
  if (block.ids.empty()) {
    return;
  }
  (void)st.blocks.set(prompt::memory_block, std::move(block.text));
  std::vector<storage::row_id> ids(block.ids.begin(), block.ids.end());
  // The conversation's row comes with the run's (a new conversation learns it then).
  write_with_row(self, [ids](storage::row_id run_row, storage::row_id conversation_row) {
    const std::optional<storage::row_id> conversation =
        conversation_row != 0 ? std::optional(conversation_row) : std::nullopt;
    return storage::make_write("record memory use", [ids, conversation, run_row](auto& c) {
      return storage::record_memory_use(c, ids, run_row, conversation);
    });
  });
  json_writer w;
  w.begin_object().key("items").begin_array();
  for (const auto id : ids) {
    w.value(id);
  }
  w.end_array().end_object();
  record_step(self, "memory", "recall", "done", "{}", std::move(w).str());
}

} // namespace

namespace {

/// The first round: the model's, or a resumed run's paused round.
void first_round(run_self self) {
  if (self->state.spec.resume) {
    resume_round(self);
  } else {
    next_round(self);
  }
}

} // namespace

void recall_memory(run_self self) {
  auto& st = self->state;
  const auto& spec = st.spec;
  // A user known to have no memory costs nothing: no hop to the blocking pool.
  if (!spec.io.memory || !spec.agent.memory || spec.memory_owner() == 0 || spec.depth > 0 ||
      spec.io.memory->known_without_memories(spec.memory_owner())) {
    first_round(self);
    return;
  }
  memory_recall_request request;
  request.user = spec.memory_owner();
  if (spec.agent_row != 0) {
    request.agent = spec.agent_row;
  }
  request.objective = spec.objective;
  request.limits.max_items = spec.agent.memory_max_items;
  request.limits.max_chars = spec.agent.memory_max_chars;
  auto id = std::make_shared<std::uint64_t>(0);
  auto task =
      start_io(self, spec.io.http->get_executor(), recall_on(spec.io.memory, std::move(request)),
               [self, id](expected<expected<memory::rendered_block>> r) {
                 self->state.inflight.erase(*id);
                 if (self->state.finished) {
                   return;
                 }
                 if (r && *r) {
                   on_recalled(self, std::move(**r));
                 } else {
                   const auto& e = !r ? r.error() : r->error();
                   log::warn("run {}: memory recall failed, the run goes on without "
                             "it: {}",
                             self->state.spec.run_id, e.message);
                 }
                 first_round(self);
               });
  *id = track(self, std::move(task));
}

} // namespace troupe::actors::detail
