// Unit tests for actors::BlockManager: one test per rule (on-demand blocks,
// slots, fork/CoW, prefix caching with verified hits, LRU and tail-first
// eviction, watermark, failure as value, snapshot, contiguous baseline).
#include "actors/block_manager.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace pagoda::actors {
namespace {

using Tokens = std::vector<TokenId>;

BlockManager make(int32_t blocks, int32_t bs = 4, double watermark = 0.0,
                  KvLayout layout = KvLayout::paged, int32_t max_len = 0) {
  BlockManagerConfig c;
  c.num_blocks = blocks;
  c.block_size = bs;
  c.watermark = watermark;
  c.layout = layout;
  c.max_model_len = max_len;
  auto m = BlockManager::create(c);
  EXPECT_TRUE(m.ok());
  return std::move(m).value();
}

Tokens iota_tokens(int n, TokenId start) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Slots that positions [from, from+n) of seq should have, from its table.
std::vector<Slot> expected_slots(const BlockManager& m, SeqId seq, int from, int n) {
  auto table = m.block_table(seq);
  std::vector<Slot> out;
  for (int p = from; p < from + n; ++p) {
    out.push_back(Slot(table[size_t(p / m.block_size())]) * m.block_size() + p % m.block_size());
  }
  return out;
}

#define EXPECT_INVARIANTS(m)                                           \
  do {                                                                 \
    auto r_ = (m).check_invariants();                                  \
    EXPECT_TRUE(r_.ok()) << (r_.ok() ? "" : r_.error().message);       \
  } while (0)

TEST(BlockManager, RejectsBadConfigAsValue) {
  BlockManagerConfig c;
  c.num_blocks = 8;
  c.block_size = 0;
  EXPECT_FALSE(BlockManager::create(c).ok());
  c.block_size = 4;
  c.watermark = 1.0;
  EXPECT_FALSE(BlockManager::create(c).ok());
  c.watermark = 0.0;
  c.layout = KvLayout::contiguous;
  EXPECT_FALSE(BlockManager::create(c).ok()) << "contiguous needs max_model_len";
}

TEST(BlockManager, AllocatesBlocksOnlyWhenATokenNeedsASlot) {
  BlockManager m = make(10);
  auto a = m.allocate(1, iota_tokens(5, 100));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->num_cached_tokens, 0);
  EXPECT_EQ(m.block_table(1).size(), 2u);
  EXPECT_EQ(m.num_used_blocks(), 2);
  EXPECT_EQ(a->slots, expected_slots(m, 1, 0, 5));
  const std::vector<BlockId> before(m.block_table(1).begin(), m.block_table(1).end());
  auto r = m.append_slots(1, Tokens{7, 8, 9});  // fills block 1 exactly
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(m.block_table(1).size(), 2u);
  EXPECT_EQ(r->slots, expected_slots(m, 1, 5, 3));
  EXPECT_TRUE(r->copies.empty());
  r = m.append_slots(1, Tokens{10});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(m.block_table(1).size(), 3u) << "the 9th token opens block 3";
  EXPECT_EQ(m.num_tokens(1), 9);
  auto table = m.block_table(1);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), table.begin())) << "append-only table";
  EXPECT_EQ(r->slots, (std::vector<Slot>{Slot(table[2]) * 4 + 0}));
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, ForkSharesEveryBlock) {
  BlockManager m = make(10);
  ASSERT_TRUE(m.allocate(1, iota_tokens(6, 0)).ok());
  auto copies = m.fork(1, 2);
  ASSERT_TRUE(copies.ok());
  EXPECT_TRUE(copies->empty());
  ASSERT_TRUE(std::ranges::equal(m.block_table(1), m.block_table(2)));
  PoolSnapshot snap = m.snapshot();
  for (BlockId b : m.block_table(1)) {
    EXPECT_EQ(snap.blocks[size_t(b)].ref_count, 2);
    EXPECT_EQ(snap.blocks[size_t(b)].seqs, (std::vector<SeqId>{1, 2}));
  }
  EXPECT_EQ(m.num_used_blocks(), 2);
  EXPECT_FALSE(m.fork(1, 2).ok()) << "child id already exists";
  EXPECT_FALSE(m.fork(9, 3).ok()) << "unknown parent";
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, CopyOnWriteOnASharedPartialBlock) {
  BlockManager m = make(10);
  ASSERT_TRUE(m.allocate(1, iota_tokens(6, 0)).ok());  // blocks: [full][2 of 4]
  ASSERT_TRUE(m.fork(1, 2).ok());
  const BlockId shared_full = m.block_table(1)[0];
  const BlockId shared_tail = m.block_table(1)[1];
  auto r = m.append_slots(2, Tokens{50});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->copies.size(), 1u);
  const BlockId dst = m.block_table(2)[1];
  EXPECT_EQ(r->copies[0], (BlockCopy{shared_tail, dst}));
  EXPECT_NE(dst, shared_tail);
  EXPECT_EQ(m.block_table(2)[0], shared_full) << "full blocks stay shared";
  EXPECT_EQ(m.block_table(1)[1], shared_tail) << "the other sharer keeps src";
  EXPECT_EQ(r->slots, (std::vector<Slot>{Slot(dst) * 4 + 2}));
  // Seq 1 is now the only holder of src: it writes in place, no copy.
  auto r1 = m.append_slots(1, Tokens{60});
  ASSERT_TRUE(r1.ok());
  EXPECT_TRUE(r1->copies.empty());
  EXPECT_EQ(r1->slots, (std::vector<Slot>{Slot(shared_tail) * 4 + 2}));
  EXPECT_EQ(m.num_used_blocks(), 3);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, ACopiedBlockIsCachedUnderItsWholeContents) {
  BlockManager m = make(10);
  ASSERT_TRUE(m.allocate(1, Tokens{1, 2, 3, 4, 5, 6}).ok());
  ASSERT_TRUE(m.fork(1, 2).ok());
  auto r = m.append_slots(2, Tokens{7, 8});  // CoW of [5 6], then full: [5 6 7 8]
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->copies.size(), 1u);
  auto c = m.allocate(3, Tokens{1, 2, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_cached_tokens, 8);
  EXPECT_EQ(m.block_table(3)[1], m.block_table(2)[1]);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, NoCopyWhenAppendingAfterAFullSharedBlock) {
  BlockManager m = make(10);
  ASSERT_TRUE(m.allocate(1, iota_tokens(8, 0)).ok());  // two full blocks
  ASSERT_TRUE(m.fork(1, 2).ok());
  auto r = m.append_slots(2, Tokens{99});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->copies.empty());
  EXPECT_EQ(m.block_table(2).size(), 3u);
  EXPECT_TRUE(std::equal(m.block_table(1).begin(), m.block_table(1).end(),
                         m.block_table(2).begin()));
  EXPECT_EQ(m.snapshot().blocks[size_t(m.block_table(1)[1])].ref_count, 2);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, BeamSearchForksAndFreesDeadBeams) {
  BlockManager m = make(20);
  ASSERT_TRUE(m.allocate(1, iota_tokens(10, 0)).ok());  // [full][full][2/4]
  for (SeqId c : {2, 3, 4}) ASSERT_TRUE(m.fork(1, c).ok());
  ASSERT_TRUE(m.free(1).ok());  // the parent beam is replaced by its children
  const BlockId h0 = m.block_table(2)[0], h1 = m.block_table(2)[1];
  EXPECT_EQ(m.snapshot().blocks[size_t(h0)].ref_count, 3);
  int copies = 0;
  for (SeqId c : {2, 3, 4}) {
    auto r = m.append_slots(c, Tokens{TokenId(100 + c)});
    ASSERT_TRUE(r.ok());
    copies += int(r->copies.size());
  }
  EXPECT_EQ(copies, 2) << "the last sharer of the partial block writes in place";
  const SeqId dead[] = {3};
  m.free_group(dead);
  EXPECT_EQ(m.snapshot().blocks[size_t(h0)].ref_count, 2);
  EXPECT_EQ(m.block_table(4)[0], h0);
  EXPECT_EQ(m.block_table(4)[1], h1) << "shared history stays shared";
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, PrefixHitsReuseCachedBlocksAndAreCountedInTokens) {
  BlockManager m = make(10);
  const Tokens prompt = iota_tokens(10, 500);  // 2 full blocks + 2 tokens
  auto a = m.allocate(1, prompt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->num_cached_tokens, 0);
  const std::vector<BlockId> first(m.block_table(1).begin(), m.block_table(1).end());
  ASSERT_TRUE(m.free(1).ok());
  EXPECT_EQ(m.num_cached_blocks(), 2) << "full blocks stay cached, the partial one is freed";
  EXPECT_EQ(m.num_free_blocks(), 8);
  auto b = m.allocate(2, prompt);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 8);
  EXPECT_EQ(b->slots, expected_slots(m, 2, 8, 2));
  EXPECT_EQ(m.block_table(2)[0], first[0]);
  EXPECT_EQ(m.block_table(2)[1], first[1]);
  EXPECT_EQ(m.num_cached_blocks(), 0) << "hits revive cached blocks";
  auto miss = m.allocate(3, iota_tokens(10, 900));
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(miss->num_cached_tokens, 0);
  EXPECT_EQ(m.prefix_cache_stats().queried_tokens, 30u);
  EXPECT_EQ(m.prefix_cache_stats().hit_tokens, 8u);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, AFullyCachedPromptStillComputesItsLastBlock) {
  BlockManager m = make(10);
  const Tokens prompt = iota_tokens(8, 0);
  ASSERT_TRUE(m.allocate(1, prompt).ok());
  auto b = m.allocate(2, prompt);  // both blocks cached; hit capped at 7 tokens
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 4);
  EXPECT_EQ(b->slots.size(), 4u);
  EXPECT_EQ(m.block_table(2)[0], m.block_table(1)[0]);
  EXPECT_NE(m.block_table(2)[1], m.block_table(1)[1]) << "own block, not deduplicated";
  EXPECT_EQ(m.snapshot().blocks[size_t(m.block_table(1)[0])].ref_count, 2);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, ABlockFilledByAppendingIsRegistered) {
  BlockManager m = make(10);
  ASSERT_TRUE(m.allocate(1, Tokens{1, 2, 3}).ok());
  ASSERT_TRUE(m.append_slots(1, Tokens{4}).ok());
  ASSERT_TRUE(m.append_slots(1, Tokens{5}).ok());
  auto b = m.allocate(2, Tokens{1, 2, 3, 4, 77});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 4);
  EXPECT_EQ(m.block_table(2)[0], m.block_table(1)[0]);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, IdenticalBlocksAreNotDedupedButTheChainContinues) {
  BlockManager m = make(10);
  ASSERT_TRUE(m.allocate(1, Tokens{1, 2, 3}).ok());
  ASSERT_TRUE(m.allocate(2, Tokens{1, 2, 3}).ok());  // a partial block: no hit
  ASSERT_TRUE(m.append_slots(1, Tokens{4}).ok());    // seq 1's block registered
  ASSERT_TRUE(m.append_slots(2, Tokens{4}).ok());    // identical: seq 2 keeps its own
  const BlockId own = m.block_table(2)[0];
  EXPECT_NE(own, m.block_table(1)[0]);
  ASSERT_TRUE(m.append_slots(2, Tokens{5, 6, 7, 8}).ok());  // block 2 registered via block 1's
  ASSERT_TRUE(m.free(2).ok());
  EXPECT_EQ(m.snapshot().blocks[size_t(own)].state, BlockState::free)
      << "an unregistered duplicate is not cached";
  auto c = m.allocate(3, Tokens{1, 2, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_cached_tokens, 8);
  EXPECT_EQ(m.block_table(3)[0], m.block_table(1)[0]);
  EXPECT_INVARIANTS(m);
}

uint64_t constant_hash(uint64_t, std::span<const TokenId>) { return 42; }
uint64_t parent_blind_hash(uint64_t, std::span<const TokenId> t) {
  return uint64_t(std::accumulate(t.begin(), t.end(), int64_t{0}));
}

TEST(BlockManager, HashCollisionsNeverReturnAWrongBlock) {
  BlockManagerConfig c;
  c.num_blocks = 20;
  c.block_size = 4;
  c.watermark = 0.0;
  c.hash_fn = &constant_hash;
  BlockManager m = std::move(BlockManager::create(c)).value();
  ASSERT_TRUE(m.allocate(1, iota_tokens(9, 0)).ok());
  auto y = m.allocate(2, iota_tokens(9, 50));  // every block collides
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->num_cached_tokens, 0);
  auto x = m.allocate(3, iota_tokens(9, 0));
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->num_cached_tokens, 4) << "block 0 verified; block 1 collided, never registered";
  EXPECT_INVARIANTS(m);

  c.hash_fn = &parent_blind_hash;  // same tokens under another parent collide
  BlockManager p = std::move(BlockManager::create(c)).value();
  ASSERT_TRUE(p.allocate(1, Tokens{1, 1, 1, 1, 7, 7, 7, 7, 0}).ok());
  ASSERT_TRUE(p.allocate(2, Tokens{2, 2, 2, 2, 5, 5, 5, 5, 0}).ok());
  auto q = p.allocate(3, Tokens{2, 2, 2, 2, 7, 7, 7, 7, 6, 6, 6, 6, 0});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->num_cached_tokens, 4)
      << "[2 2 2 2] hits; [7 7 7 7] after another prefix is another block";
  // Seq 3's [7 7 7 7] must not stand in for seq 1's, so its [6 6 6 6] must
  // not become reachable behind [1 1 1 1][7 7 7 7].
  auto w = p.allocate(4, Tokens{1, 1, 1, 1, 7, 7, 7, 7, 6, 6, 6, 6, 0});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->num_cached_tokens, 8);
  EXPECT_INVARIANTS(p);
}

TEST(BlockManager, CachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  BlockManager m = make(4);
  const Tokens a = iota_tokens(5, 0), b = iota_tokens(5, 100);
  ASSERT_TRUE(m.allocate(1, a).ok());
  ASSERT_TRUE(m.allocate(2, b).ok());
  ASSERT_TRUE(m.free(1).ok());  // a's block released first: least recent
  ASSERT_TRUE(m.free(2).ok());
  EXPECT_EQ(m.num_cached_blocks(), 2);
  ASSERT_TRUE(m.allocate(3, iota_tokens(12, 300)).ok());  // 2 free + 1 eviction
  EXPECT_EQ(m.prefix_cache_stats().evicted_blocks, 1u);
  ASSERT_TRUE(m.free(3).ok());
  auto hb = m.allocate(4, b);
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->num_cached_tokens, 4) << "the more recent entry survived";
  auto ha = m.allocate(5, a);
  ASSERT_TRUE(ha.ok());
  EXPECT_EQ(ha->num_cached_tokens, 0) << "the least recent entry was evicted";
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, FreeingReleasesTailBlocksFirstSoTheyAreEvictedFirst) {
  BlockManager m = make(4);
  const Tokens prompt = iota_tokens(13, 0);  // 3 full blocks + 1 token
  ASSERT_TRUE(m.allocate(1, prompt).ok());
  ASSERT_TRUE(m.free(1).ok());
  EXPECT_EQ(m.num_cached_blocks(), 3);
  ASSERT_TRUE(m.allocate(2, iota_tokens(6, 900)).ok());  // 1 free + 1 eviction
  ASSERT_TRUE(m.free(2).ok());
  auto h = m.allocate(3, prompt);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->num_cached_tokens, 8) << "the tail block went, the head blocks stayed";
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, CanAllocateCountsHitsAndRevivedBlocks) {
  BlockManager m = make(5);
  const Tokens shared = iota_tokens(8, 0);
  ASSERT_TRUE(m.allocate(1, concat(shared, Tokens{1})).ok());  // 3 blocks, 2 full
  ASSERT_TRUE(m.allocate(2, iota_tokens(4, 100)).ok());        // 1 block: 1 left
  const Tokens prompt = concat(shared, Tokens{42});
  EXPECT_EQ(m.can_allocate(prompt), AllocStatus::ok) << "2 hits on used blocks + 1 new";
  EXPECT_EQ(m.can_allocate(iota_tokens(9, 700)), AllocStatus::later);
  ASSERT_TRUE(m.allocate(3, prompt).ok());
  EXPECT_EQ(m.num_free_blocks(), 0);
  ASSERT_TRUE(m.free(1).ok());  // 2 shared blocks still held by 3; 1 freed
  ASSERT_TRUE(m.free(3).ok());  // now both shared blocks are cached (ref 0)
  ASSERT_TRUE(m.allocate(4, iota_tokens(5, 200)).ok());  // takes the 2 free ones
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_EQ(m.num_cached_blocks(), 2);
  // Reviving both cached hits leaves nothing for the third block.
  EXPECT_EQ(m.can_allocate(prompt), AllocStatus::later);
  EXPECT_FALSE(m.allocate(5, prompt).ok());
  EXPECT_EQ(m.can_allocate(iota_tokens(5, 0)), AllocStatus::ok) << "1 revived + 1 new";
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, WatermarkHoldsBackAdmissionButNotAppends) {
  BlockManager m = make(10, 4, 0.2);  // watermark 2 blocks
  EXPECT_EQ(m.watermark_blocks(), 2);
  EXPECT_EQ(m.can_allocate(iota_tokens(33, 0)), AllocStatus::never) << "9 blocks > 10 - 2";
  EXPECT_EQ(m.can_allocate(iota_tokens(32, 0)), AllocStatus::ok);
  ASSERT_TRUE(m.allocate(1, iota_tokens(24, 0)).ok());  // 6 used, 4 left
  EXPECT_EQ(m.can_allocate(iota_tokens(12, 500)), AllocStatus::later) << "would leave 1 < 2";
  EXPECT_FALSE(m.allocate(2, iota_tokens(12, 500)).ok());
  ASSERT_TRUE(m.allocate(2, iota_tokens(8, 500)).ok());  // leaves exactly 2
  const SeqId both[] = {1, 2};
  EXPECT_TRUE(m.can_append(both, 4));
  ASSERT_TRUE(m.append_slots(1, iota_tokens(4, 50)).ok());  // decodes dip into the watermark
  ASSERT_TRUE(m.append_slots(2, iota_tokens(4, 60)).ok());
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, FailuresAreValuesAndChangeNothing) {
  BlockManager m = make(3);
  ASSERT_TRUE(m.allocate(1, iota_tokens(6, 0)).ok());
  ASSERT_TRUE(m.fork(1, 2).ok());
  const PoolSnapshot before = m.snapshot();
  EXPECT_FALSE(m.allocate(3, iota_tokens(9, 100)).ok());
  EXPECT_FALSE(m.allocate(1, iota_tokens(2, 100)).ok()) << "duplicate id";
  EXPECT_FALSE(m.allocate(4, Tokens{}).ok()) << "empty prompt";
  const SeqId s1[] = {1};
  EXPECT_FALSE(m.can_append(s1, 7));  // CoW + 2 new blocks > 1 available
  EXPECT_FALSE(m.append_slots(1, iota_tokens(7, 0)).ok());
  EXPECT_FALSE(m.append_slots(77, Tokens{1}).ok()) << "unknown sequence";
  EXPECT_FALSE(m.free(77).ok());
  EXPECT_EQ(m.snapshot(), before);
  EXPECT_TRUE(m.can_append(s1, 2));  // CoW only
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, CopyOnWriteCountsAsABlockToAppend) {
  BlockManager m = make(2);
  ASSERT_TRUE(m.allocate(1, iota_tokens(6, 0)).ok());  // [full][2 of 4]: pool exhausted
  ASSERT_TRUE(m.fork(1, 2).ok());
  const SeqId s2[] = {2};
  EXPECT_FALSE(m.can_append(s2, 1)) << "the shared partial block must be copied first";
  const PoolSnapshot before = m.snapshot();
  EXPECT_FALSE(m.append_slots(2, Tokens{9}).ok());
  EXPECT_EQ(m.snapshot(), before);
  ASSERT_TRUE(m.free(1).ok());  // now seq 2 holds it alone: in place, no block needed
  EXPECT_TRUE(m.can_append(s2, 2));
  auto r = m.append_slots(2, Tokens{9, 10});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->copies.empty());
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, ChunkedPrefillGivesSlotsChunkByChunk) {
  BlockManager m = make(10);
  const Tokens prompt = iota_tokens(11, 0);
  auto a = m.allocate(1, prompt, 5);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->slots.size(), 5u);
  EXPECT_EQ(m.block_table(1).size(), 2u);
  auto r = m.append_slots(1, std::span(prompt).subspan(5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, expected_slots(m, 1, 5, 6));
  auto b = m.allocate(2, prompt);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 8) << "blocks filled by the chunks were registered";
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, SnapshotShowsStatesRefsAndHolders) {
  BlockManager m = make(6);
  ASSERT_TRUE(m.allocate(1, iota_tokens(5, 0)).ok());
  ASSERT_TRUE(m.fork(1, 2).ok());
  ASSERT_TRUE(m.allocate(3, iota_tokens(4, 50)).ok());
  ASSERT_TRUE(m.allocate(4, iota_tokens(5, 80)).ok());
  ASSERT_TRUE(m.free(4).ok());  // one cached, one free
  PoolSnapshot s = m.snapshot();
  EXPECT_EQ(s.total_blocks, 6);
  EXPECT_EQ(s.used_blocks, 3);
  EXPECT_EQ(s.cached_blocks, 1);
  EXPECT_EQ(s.free_blocks, 2);
  ASSERT_EQ(s.seqs.size(), 3u);
  EXPECT_EQ(s.seqs[0].seq, 1u);
  EXPECT_EQ(s.seqs[1].table, s.seqs[0].table);
  EXPECT_EQ(s.seqs[2].num_tokens, 4);
  const BlockSnapshot& own3 = s.blocks[size_t(s.seqs[2].table[0])];
  EXPECT_EQ(own3.state, BlockState::used);
  EXPECT_EQ(own3.seqs, (std::vector<SeqId>{3}));
  int cached = 0;
  for (const BlockSnapshot& b : s.blocks) {
    if (b.state == BlockState::cached) {
      cached++;
      EXPECT_EQ(b.ref_count, 0);
      EXPECT_TRUE(b.seqs.empty());
    }
  }
  EXPECT_EQ(cached, 1);
}

TEST(BlockManager, EverythingFreedLeavesFreePlusCachedEqualTotal) {
  BlockManager m = make(12);
  ASSERT_TRUE(m.allocate(1, iota_tokens(9, 0)).ok());
  ASSERT_TRUE(m.fork(1, 2).ok());
  ASSERT_TRUE(m.append_slots(2, iota_tokens(6, 40)).ok());
  ASSERT_TRUE(m.allocate(3, iota_tokens(9, 0)).ok());
  const SeqId all[] = {1, 2, 3};
  m.free_group(all);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_free_blocks() + m.num_cached_blocks(), m.total_blocks());
  EXPECT_GT(m.num_cached_blocks(), 0);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, ContiguousLayoutReservesMaxModelLenUpFront) {
  BlockManager m = make(10, 4, 0.0, KvLayout::contiguous, 10);  // 3 blocks per sequence
  EXPECT_EQ(m.can_allocate(iota_tokens(11, 0)), AllocStatus::never);
  EXPECT_EQ(m.can_allocate(iota_tokens(2, 0), 4), AllocStatus::never) << "12 blocks > 10";
  auto a = m.allocate(1, iota_tokens(2, 0));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(m.block_table(1).size(), 3u);
  EXPECT_EQ(m.num_used_blocks(), 3);
  EXPECT_EQ(a->slots, expected_slots(m, 1, 0, 2));
  auto r = m.append_slots(1, iota_tokens(8, 10));  // up to 10 tokens: no new blocks
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(m.num_used_blocks(), 3);
  EXPECT_EQ(r->slots, expected_slots(m, 1, 2, 8));
  EXPECT_FALSE(m.append_slots(1, Tokens{1}).ok()) << "beyond max_model_len";
  auto copies = m.fork(1, 2);
  ASSERT_TRUE(copies.ok());
  EXPECT_EQ(m.num_used_blocks(), 6);
  ASSERT_EQ(copies->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*copies)[i], (BlockCopy{m.block_table(1)[i], m.block_table(2)[i]}));
  }
  ASSERT_TRUE(m.allocate(3, iota_tokens(10, 0)).ok());
  EXPECT_EQ(m.prefix_cache_stats().hit_tokens, 0u) << "no prefix caching";
  EXPECT_FALSE(m.can_fork(1));
  EXPECT_FALSE(m.fork(1, 4).ok());
  const SeqId all[] = {1, 2, 3};
  m.free_group(all);
  EXPECT_EQ(m.num_free_blocks(), 10);
  EXPECT_INVARIANTS(m);
}

}  // namespace
}  // namespace pagoda::actors
