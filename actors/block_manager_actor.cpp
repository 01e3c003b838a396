#include "actors/block_manager_actor.hpp"

#include <chrono>
#include <stdexcept>

#include "actors/messages.hpp"

namespace pagoda::actors {
namespace {

struct BlockManagerState {
  std::shared_ptr<BlockBooker> booker;  // shared: behaviour lambdas must be copyable
  std::shared_ptr<StatsBox> stats;
  BlockManagerActorConfig config;
  bool snapshot_queued = false;  // a (snapshot_atom) to self is in the mailbox
};

using Self = caf::stateful_actor<BlockManagerState>*;

void publish_if_due(Self self) {
  auto& st = self->state;
  const auto now = std::chrono::steady_clock::now();
  if (st.stats->snapshot_due(now)) st.stats->publish_capture(st.booker->capture(), now);
}

// After a booking: the capture, when due, waits for a message of its own
// (the reply goes out first; the booking handler stays O(what it books)).
void queue_snapshot_if_due(Self self) {
  auto& st = self->state;
  if (st.snapshot_queued || !st.stats->snapshot_due(std::chrono::steady_clock::now())) return;
  st.snapshot_queued = true;
  self->send(self, snapshot_atom::value);
}

caf::behavior block_manager_fn(Self self, std::shared_ptr<BlockBooker> booker,
                               std::shared_ptr<StatsBox> stats, BlockManagerActorConfig config) {
  self->state.booker = std::move(booker);
  self->state.stats = std::move(stats);
  self->state.config = std::move(config);
  return {
      [self](book_atom, const BookingRequest& r) -> BookingReply {
        auto& st = self->state;
        const uint64_t nth = ++*st.config.bookings;
        if (st.config.fault && st.config.fault(nth)) {
          // Unhandled: CAF ends the actor; the requester gets an error.
          throw std::runtime_error("block manager: injected crash in booking " + std::to_string(nth));
        }
        BookingReply reply = st.booker->book(r);
        queue_snapshot_if_due(self);
        return reply;
      },
      [self](snapshot_atom) {
        self->state.snapshot_queued = false;
        publish_if_due(self);
      },
      [self](reset_atom) {
        auto& st = self->state;
        if (st.config.fresh_booker) st.booker = st.config.fresh_booker();
      },
  };
}

}  // namespace

caf::actor spawn_block_manager_actor(caf::actor_system& sys, std::unique_ptr<BlockBooker> booker,
                                     std::shared_ptr<StatsBox> stats,
                                     const BlockManagerActorConfig& config) {
  std::shared_ptr<BlockBooker> b(std::move(booker));
  if (config.detached) {
    return sys.spawn<caf::detached>(block_manager_fn, std::move(b), std::move(stats), config);
  }
  return sys.spawn(block_manager_fn, std::move(b), std::move(stats), config);
}

}  // namespace pagoda::actors
