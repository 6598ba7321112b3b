// The conversation registry: one shard actor per scheduler shard maps conversation ids to
// live conversation actors and creates each one once (the mailbox serialises creation).

#include "troupe/actors/conversation.hpp"
#include "troupe/actors/shard_scheduler.hpp"

#include <functional>
#include <map>
#include <string>

namespace troupe::actors {

namespace {

struct shard_state {
  conversation_factory factory;
  std::map<std::string, conversation_actor, std::less<>> live;
};

conversation_shard_actor::behavior_type
registry_shard(homed_typed_actor<shard_state, conversation_shard_actor>* self,
               conversation_factory factory) {
  self->state.factory = std::move(factory);
  // On shutdown, live conversations go with their shard.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    for (const auto& [id, conversation] : self->state.live) {
      self->send_exit(conversation, msg.reason);
    }
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
      [self](get_atom, const std::string& id) -> conversation_actor {
        auto& live = self->state.live;
        if (auto it = live.find(id); it != live.end()) {
          return it->second;
        }
        // Creation happens here, one message at a time: a second request for the same
        // id finds the actor the first one created.
        auto conversation = self->state.factory(self->system(), id);
        if (conversation) {
          self->monitor(conversation);
          live.emplace(id, conversation);
        }
        return conversation;
      },
      [self](peek_atom, const std::string& id) -> conversation_actor {
        auto& live = self->state.live;
        if (auto it = live.find(id); it != live.end()) {
          return it->second;
        }
        return conversation_actor{};
      },
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
