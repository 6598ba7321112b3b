#include "troupe/actors/health.hpp"

namespace troupe::actors {

namespace {

struct health_state {
  std::uint64_t pings = 0;
  static inline const char* name = "health";
};

health_actor::behavior_type health_behavior(health_actor::stateful_pointer<health_state> self) {
  return {
      [self](ping_atom) -> std::uint64_t { return ++self->state.pings; },
  };
}

} // namespace

health_actor spawn_health(caf::actor_system& system) {
  return system.spawn(health_behavior);
}

} // namespace troupe::actors
