#include "troupe/actors/tool_call.hpp"

#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/run.hpp"
#include "troupe/actors/shard_scheduler.hpp"

namespace troupe::actors {

namespace {

struct tool_call_state {
  tool_call_spec spec;
  caf::actor_addr owner;
  caf::response_promise promise;
  io_task task;
  bool started = false;
  bool done = false;
};

using tool_call_self = homed_typed_actor<tool_call_state, tool_call_actor>*;

asio::awaitable<tools::tool_result> invoke(std::shared_ptr<const tools::tool> impl,
                                           std::shared_ptr<const tools::sandbox_runner> sandbox,
                                           std::string arguments, tools::tool_context context) {
  context.sandbox = sandbox.get();
  co_return co_await impl->invoke(std::move(arguments), std::move(context));
}

/// Answers the run once and quits; a running coroutine is cancelled first.
void end(tool_call_self self, tools::tool_result result, bool cancel) {
  auto& st = self->state;
  if (st.done) {
    return;
  }
  st.done = true;
  if (cancel) {
    st.task.cancel();
  }
  if (st.promise.pending()) {
    st.promise.deliver(std::move(result));
  }
  self->quit();
}

tool_call_actor::behavior_type tool_call_behavior(tool_call_self self, tool_call_spec spec,
                                                  caf::actor_addr owner) {
  self->state.spec = std::move(spec);
  self->state.owner = std::move(owner);
  if (self->state.owner) {
    self->monitor(self->state.owner);
  }
  // The run is gone (finished, cancelled, crashed): nobody waits for this call.
  self->set_down_handler([self](caf::down_msg&) {
    end(self, tools::tool_failure("cancelled", "the run ended"), true);
  });
  return {
      [self](run_atom) -> caf::result<tools::tool_result> {
        auto& st = self->state;
        if (st.started) {
          return caf::make_error(caf::sec::invalid_argument);
        }
        st.started = true;
        st.promise = self->make_response_promise();
        st.task =
            start_io(self, st.spec.executor,
                     invoke(st.spec.impl, st.spec.sandbox, st.spec.arguments, st.spec.context),
                     [self](expected<tools::tool_result> r) {
                       if (!r) {
                         end(self, tools::tool_failure("tool_error", r.error().message), false);
                         return;
                       }
                       end(self, std::move(*r), false);
                     });
        self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.spec.timeout),
                           call_timeout_atom::value);
        return caf::delegated<tools::tool_result>{};
      },
      [self](call_timeout_atom) {
        end(self,
            tools::tool_failure("timeout",
                                fmt::format("the tool did not finish within {} ms and was stopped",
                                            self->state.spec.timeout.count())),
            true);
      },
      [self](cancel_atom) {
        end(self, tools::tool_failure("cancelled", "the call was cancelled"), true);
      },
      handle_io_completion(),
  };
}

} // namespace

tool_call_actor spawn_tool_call(caf::actor_system& system, tool_call_spec spec,
                                caf::actor_addr owner) {
  return system.spawn(tool_call_behavior, std::move(spec), std::move(owner));
}

} // namespace troupe::actors
