// The block-manager actor: owns the BlockBooker (and through it the
// BlockManager and BlockPool) of the engine's KV cache. It answers one
// (book_atom, BookingRequest) per step with a BookingReply (the scheduler
// decides, this actor books; see actors/block_booking.hpp), and publishes
// KV snapshots into the StatsBox at a bounded rate while someone reads them
// (after a booking, or on (snapshot_atom) when the engine is idle).
// Spawned detached (its own thread) when the engine's threads are dedicated,
// so no request actor can delay a booking.
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "actors/block_booking.hpp"
#include "actors/stats_box.hpp"

namespace pagoda::actors {

caf::actor spawn_block_manager_actor(caf::actor_system& sys, std::unique_ptr<BlockBooker> booker,
                                     std::shared_ptr<StatsBox> stats, bool detached);

}  // namespace pagoda::actors
