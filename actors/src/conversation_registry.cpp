// The conversation registry: one shard actor per scheduler shard maps conversation ids to
// live conversation actors and creates each one once (the mailbox serialises creation; a
// passivated conversation's reads run off the shard while it serves other ids).

#include "troupe/actors/conversation.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "troupe/actors/bridge.hpp"
#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/log.hpp"

namespace troupe::actors {

namespace {

/// The requests waiting for a conversation that is loading.
using waiting_requests = std::vector<caf::typed_response_promise<conversation_actor>>;

struct shard_state {
  conversation_factory factory;
  std::map<std::string, conversation_actor, std::less<>> live;
  /// Conversations being loaded, with the requests that wait for each.
  std::map<std::string, waiting_requests, std::less<>> loading;
};

using shard_self = homed_typed_actor<shard_state, conversation_shard_actor>*;

/// Answers everyone waiting for `id` with `conversation` (invalid: it could not be made).
void answer_waiting(shard_self self, const std::string& id,
                    const conversation_actor& conversation) {
  auto& loading = self->state.loading;
  auto it = loading.find(id);
  if (it == loading.end()) {
    return;
  }
  auto waiting = std::move(it->second);
  loading.erase(it);
  for (auto& promise : waiting) {
    promise.deliver(conversation);
  }
}

/// Starts loading a passivated conversation: its reads run off this shard (the factory's
/// `load`), and the shard spawns the actor when they are done.
void start_load(shard_self self, const std::string& id) {
  auto& factory = self->state.factory;
  auto executor = factory.executor ? factory.executor() : boost::asio::any_io_executor{};
  if (!executor) {
    log::warn("conversation {} cannot start: no executor to load it on", id);
    answer_waiting(self, id, conversation_actor{});
    return;
  }
  start_io(self, std::move(executor), factory.load(id),
           [self, id](expected<expected<conversation_spec>> loaded) {
             if (loaded && !*loaded) {
               loaded = tl::unexpected(loaded->error());
             }
             if (!loaded) {
               log::warn("conversation {} cannot start: {}", id, loaded.error().message);
               answer_waiting(self, id, conversation_actor{});
               return;
             }
             auto conversation = spawn_conversation(self->system(), std::move(**loaded));
             if (conversation) {
               self->monitor(conversation);
               self->state.live.emplace(id, conversation);
             }
             answer_waiting(self, id, conversation);
           });
}

conversation_shard_actor::behavior_type registry_shard(shard_self self,
                                                       conversation_factory factory) {
  self->state.factory = std::move(factory);
  // On shutdown, live conversations go with their shard; requests waiting for a load
  // are told it will not come.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    for (const auto& [id, conversation] : self->state.live) {
      self->send_exit(conversation, msg.reason);
    }
    for (auto& [id, waiting] : self->state.loading) {
      for (auto& promise : waiting) {
        promise.deliver(conversation_actor{});
      }
    }
    self->state.loading.clear();
    self->quit(msg.reason);
  });
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& live = self->state.live;
    for (auto it = live.begin(); it != live.end(); ++it) {
      if (it->second.address() == msg.source) {
        live.erase(it);
        break;
      }
    }
  });
  return {
      [self](get_atom, const std::string& id) -> caf::result<conversation_actor> {
        auto& st = self->state;
        if (auto it = st.live.find(id); it != st.live.end()) {
          return it->second;
        }
        // Creation happens here, one message at a time: a second request for the same
        // id finds the actor the first one created, or waits for the same load.
        if (auto it = st.loading.find(id); it != st.loading.end()) {
          auto promise = self->make_response_promise<conversation_actor>();
          it->second.push_back(promise);
          return promise;
        }
        if (auto prepared = st.factory.take_prepared(self->system(), id)) {
          self->monitor(prepared);
          st.live.emplace(id, prepared);
          return prepared;
        }
        auto promise = self->make_response_promise<conversation_actor>();
        st.loading[id].push_back(promise);
        start_load(self, id);
        return promise;
      },
      [self](peek_atom, const std::string& id) -> conversation_actor {
        auto& live = self->state.live;
        if (auto it = live.find(id); it != live.end()) {
          return it->second;
        }
        return conversation_actor{};
      },
      handle_io_completion(),
  };
}

} // namespace

conversation_registry::conversation_registry(caf::actor_system& system,
                                             conversation_factory factory, std::size_t shards) {
  if (auto* scheduler_shards = shards_of(system)) {
    // One registry shard per scheduler shard, homed there and keyed like the
    // conversations: a lookup runs on the shard its conversation lives on.
    scheduler_shards_ = scheduler_shards;
    for (std::size_t i = 0; i < scheduler_shards->size(); ++i) {
      shards_.push_back(spawn_on(system, i, registry_shard, factory));
    }
    return;
  }
  if (shards == 0) {
    shards = 1;
  }
  for (std::size_t i = 0; i < shards; ++i) {
    shards_.push_back(system.spawn(registry_shard, factory));
  }
}

void conversation_registry::stop() {
  for (const auto& shard : shards_) {
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
}

const conversation_shard_actor& conversation_registry::shard_for(std::string_view id) const {
  if (scheduler_shards_ != nullptr) {
    return shards_[scheduler_shards_->shard_for(id) % shards_.size()];
  }
  return shards_[std::hash<std::string_view>{}(id) % shards_.size()];
}

} // namespace troupe::actors
