// The block-manager actor: owns the BlockBooker (and through it the
// BlockManager and BlockPool) of the engine's KV cache. It answers one
// (book_atom, BookingRequest) per step with a BookingReply (the scheduler
// decides, this actor books; see actors/block_booking.hpp), and publishes
// KV captures into the StatsBox at a bounded rate while someone reads them
// (on (snapshot_atom): sent to itself after a booking when one is due, so
// the booking's reply never waits for it, or by the scheduler when the
// engine is idle); the reader assembles the snapshot (see StatsBox).
// (reset_atom) replaces the booker with a fresh one (every block free, the
// prefix cache empty): the scheduler sends it when the executor was replaced,
// so no cached block names KV contents that are gone.
// Spawned detached (its own thread) when the engine's threads are dedicated,
// so no request actor can delay a booking.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <functional>
#include <memory>

#include "actors/block_booking.hpp"
#include "actors/stats_box.hpp"

namespace pagoda::actors {

struct BlockManagerActorConfig {
  bool detached = true;
  // A fresh booker of the same configuration (reset_atom); also what a
  // replacement actor starts from.
  std::function<std::unique_ptr<BlockBooker>()> fresh_booker;
  // Tests: true makes the nth booking (counted over every block-manager
  // actor sharing `bookings`) throw in the handler, which ends the actor.
  std::function<bool(uint64_t)> fault;
  std::shared_ptr<std::atomic<uint64_t>> bookings = std::make_shared<std::atomic<uint64_t>>(0);
};

caf::actor spawn_block_manager_actor(caf::actor_system& sys, std::unique_ptr<BlockBooker> booker,
                                     std::shared_ptr<StatsBox> stats,
                                     const BlockManagerActorConfig& config);

}  // namespace pagoda::actors
