#include "actors/block_manager_actor.hpp"

#include <chrono>

#include "actors/messages.hpp"

namespace pagoda::actors {
namespace {

struct BlockManagerState {
  std::shared_ptr<BlockBooker> booker;  // shared: behaviour lambdas must be copyable
  std::shared_ptr<StatsBox> stats;
};

using Self = caf::stateful_actor<BlockManagerState>*;

void publish_if_due(Self self) {
  auto& st = self->state;
  const auto now = std::chrono::steady_clock::now();
  if (st.stats->snapshot_due(now)) st.stats->publish_snapshot(st.booker->snapshot(), now);
}

caf::behavior block_manager_fn(Self self, std::shared_ptr<BlockBooker> booker,
                               std::shared_ptr<StatsBox> stats) {
  self->state.booker = std::move(booker);
  self->state.stats = std::move(stats);
  return {
      [self](book_atom, const BookingRequest& r) -> BookingReply {
        BookingReply reply = self->state.booker->book(r);
        publish_if_due(self);
        return reply;
      },
      [self](snapshot_atom) { publish_if_due(self); },
  };
}

}  // namespace

caf::actor spawn_block_manager_actor(caf::actor_system& sys, std::unique_ptr<BlockBooker> booker,
                                     std::shared_ptr<StatsBox> stats, bool detached) {
  std::shared_ptr<BlockBooker> b(std::move(booker));
  if (detached) return sys.spawn<caf::detached>(block_manager_fn, std::move(b), std::move(stats));
  return sys.spawn(block_manager_fn, std::move(b), std::move(stats));
}

}  // namespace pagoda::actors
