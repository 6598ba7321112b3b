#include "troupe/actors/health.hpp"

#include "troupe/actors/shard_scheduler.hpp"

namespace troupe::actors {

namespace {

struct health_state {
  std::uint64_t pings = 0;
  static inline const char* name = "health";
};

health_actor::behavior_type health_behavior(homed_typed_actor<health_state, health_actor>* self) {
  return {
      [self](ping_atom) -> std::uint64_t { return ++self->state.pings; },
  };
}

} // namespace

health_actor spawn_health(caf::actor_system& system) {
  return system.spawn(health_behavior);
}

} // namespace troupe::actors
