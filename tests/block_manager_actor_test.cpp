// The block-manager actor's KV map: after a reader asked (StatsBox::
// read_snapshot), a booking is followed by a published capture (in a
// message of the actor's own, after the booking's reply); the snapshot the
// reader assembles equals the one a twin booker, given the same bookings,
// builds directly (BlockBooker::snapshot); no capture is published while no
// reader asked.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <chrono>
#include <thread>

#include "actors/block_manager_actor.hpp"
#include "actors/messages.hpp"

namespace pagoda::actors {
namespace {

BlockBooker make_booker() {
  BlockManagerConfig c;
  c.num_blocks = 64;
  c.block_size = 4;
  return BlockBooker(std::move(BlockManager::create(c)).value());
}

// Admits `groups` one-sequence groups of 9-token prompts (3 blocks each);
// groups 1 and 2 share their first 8 tokens (a prefix-cache hit).
BookingRequest admissions(int32_t groups) {
  BookingRequest r;
  r.step_id = 1;
  r.budget = 1000;
  r.max_num_seqs = 16;
  for (int32_t g = 1; g <= groups; ++g) {
    auto prompt = std::make_shared<std::vector<TokenId>>();
    for (int32_t t = 0; t < 9; ++t) prompt->push_back(TokenId(g <= 2 && t < 8 ? t + 1 : 100 * g + t));
    GroupAdmit a;
    a.group = RequestId(g);
    a.slots = 1;
    a.seqs.push_back(SeqAdmit{SeqId(g), 0, prompt});
    r.waiting.push_back(std::move(a));
  }
  return r;
}

struct ActorRig {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<StatsBox> stats = std::make_shared<StatsBox>();
  caf::actor actor;
  ActorRig() {
    auto booker = std::make_unique<BlockBooker>(make_booker());
    actor = spawn_block_manager_actor(sys, std::move(booker), stats, BlockManagerActorConfig{});
  }
  ~ActorRig() { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); }
  BookingReply book(const BookingRequest& r) {
    caf::scoped_actor self{sys};
    BookingReply out;
    self->request(actor, caf::infinite, book_atom::value, r)
        .receive([&](const BookingReply& reply) { out = reply; }, [](caf::error&) { ADD_FAILURE(); });
    return out;
  }
};

TEST(BlockManagerActor, PublishesACaptureAfterABookingWhileSomeoneReads) {
  ActorRig rig;
  EXPECT_EQ(rig.stats->read_snapshot().pool.total_blocks, 0);  // nothing yet; marks interest
  BlockBooker twin = make_booker();
  const BookingRequest r = admissions(3);
  const BookingReply got = rig.book(r);
  EXPECT_EQ(got.admitted.size(), 3u);
  twin.book(r);
  KvSnapshot snap;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (snap.pool.total_blocks == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    snap = rig.stats->read_snapshot();
  }
  const KvSnapshot want = twin.snapshot();
  EXPECT_EQ(snap.pool, want.pool);
  ASSERT_EQ(snap.owners.size(), want.owners.size());
  for (size_t i = 0; i < want.owners.size(); ++i) EXPECT_EQ(snap.owners[i].seq, want.owners[i].seq);
  EXPECT_EQ(snap.pool.used_blocks, 7);  // 3 + 3 + 3, less the 2 groups 1 and 2 share
  int shared = 0;
  for (const BlockSnapshot& b : snap.pool.blocks) shared += b.seqs.size() == 2 ? 1 : 0;
  EXPECT_EQ(shared, 2) << "the two prefix blocks groups 1 and 2 share list both holders";
}

TEST(BlockManagerActor, PublishesNothingWhileNoOneReads) {
  ActorRig rig;
  rig.book(admissions(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  caf::anon_send(rig.actor, snapshot_atom::value);
  rig.book(BookingRequest{});  // after the (snapshot_atom) in the mailbox
  EXPECT_EQ(rig.stats->read_snapshot().pool.total_blocks, 0);
}

}  // namespace
}  // namespace pagoda::actors
