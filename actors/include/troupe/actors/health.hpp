#pragma once

/// \file
/// The health actor: answers pings so `GET /healthz` proves the actor scheduler is
/// running and responsive, not just that a socket accepts.

#include <cstdint>

#include <caf/all.hpp>

namespace troupe::actors {

using ping_atom = caf::atom_constant<caf::atom("ping")>;

/// Answers `ping` with the number of pings served so far (including this one).
using health_actor = caf::typed_actor<caf::replies_to<ping_atom>::with<std::uint64_t>>;

/// Spawns the health actor.
health_actor spawn_health(caf::actor_system& system);

} // namespace troupe::actors
