// BlockManager::release_outside_window (sliding-window models): exactly the
// blocks wholly before a query's window go back (every boundary of query
// position, window and block size against the definition "a query at p reads
// keys > p - W"), as holes at the front of the table; the last block and
// blocks the prefix-cache chain has not passed stay; forks share holes, free
// skips them, invariants hold throughout; released blocks keep their cache
// entries, so a later prompt hits them; no window, the contiguous layout or
// an unknown sequence release nothing. The booking and the engine with a
// windowed model: engine_window_test.
#include "actors/block_manager.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace pagoda::actors {
namespace {

using Tokens = std::vector<TokenId>;

BlockManager make(int32_t window, int32_t blocks = 64, int32_t bs = 16, bool caching = true,
                  KvLayout layout = KvLayout::paged) {
  BlockManagerConfig c;
  c.num_blocks = blocks;
  c.block_size = bs;
  c.watermark = 0.0;
  c.enable_prefix_caching = caching;
  c.layout = layout;
  c.max_model_len = layout == KvLayout::contiguous ? 256 : 0;
  c.sliding_window = window;
  auto m = BlockManager::create(c);
  EXPECT_TRUE(m.ok());
  return std::move(m).value();
}

Tokens prompt(int n, TokenId start = 100) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

#define EXPECT_INVARIANTS(m)                                     \
  do {                                                           \
    auto r_ = (m).check_invariants();                            \
    EXPECT_TRUE(r_.ok()) << (r_.ok() ? "" : r_.error().message); \
  } while (0)

TEST(BlockWindow, ReleasesExactlyTheBlocksNoLaterQueryReads) {
  for (int32_t bs : {4, 16}) {
    for (int32_t w : {1, 5, 16, 20, 33}) {
      for (int32_t q = 0; q <= 100; ++q) {
        BlockManager m = make(w, 64, bs);
        ASSERT_TRUE(m.allocate(1, prompt(100)).ok());
        const int32_t released = m.release_outside_window(1, q);
        const auto table = m.block_table(1);
        int32_t holes = 0;
        for (size_t i = 0; i < table.size(); ++i) {
          const int32_t last_key = int32_t(i + 1) * bs - 1;
          if (table[i] == kNoBlock) {
            ++holes;
            EXPECT_LE(last_key, q - w) << "bs " << bs << " w " << w << " q " << q << ": block " << i
                                       << " holds a key the query reads";
          } else if (i + 1 < table.size() && (i + 1) * size_t(bs) <= 100) {
            // A kept full block that is not the last must hold a key the query reads.
            EXPECT_GT(last_key, q - w) << "bs " << bs << " w " << w << " q " << q << ": block " << i
                                       << " could have gone back";
          }
        }
        EXPECT_EQ(released, holes);
        EXPECT_EQ(m.num_used_blocks(), int32_t(table.size()) - holes);
        EXPECT_INVARIANTS(m);
        EXPECT_EQ(m.release_outside_window(1, q), 0) << "a second call releases nothing";
      }
    }
  }
}

TEST(BlockWindow, HolesAreSharedByForksAndSkippedByFree) {
  BlockManager m = make(20);
  ASSERT_TRUE(m.allocate(1, prompt(100)).ok());  // 7 blocks, the last partly filled
  EXPECT_EQ(m.release_outside_window(1, 100), 5);  // keys 0..79 (blocks 0..4) are before 81
  EXPECT_EQ(m.window_released_blocks(), 5);
  ASSERT_TRUE(m.fork(1, 2).ok());
  EXPECT_EQ(std::vector<BlockId>(m.block_table(2).begin(), m.block_table(2).end()),
            std::vector<BlockId>(m.block_table(1).begin(), m.block_table(1).end()));
  EXPECT_INVARIANTS(m);
  ASSERT_TRUE(m.append_slots(2, prompt(40, 500)).ok());  // copy-on-write of the shared last block
  EXPECT_EQ(m.release_outside_window(2, 140), 2);  // now keys < 121: blocks 5 and 6
  EXPECT_INVARIANTS(m);
  ASSERT_TRUE(m.free(1).ok());
  ASSERT_TRUE(m.free(2).ok());
  EXPECT_INVARIANTS(m);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_free_blocks() + m.num_cached_blocks(), m.total_blocks());
}

TEST(BlockWindow, ReleasedBlocksStayInThePrefixCache) {
  BlockManager m = make(20);
  ASSERT_TRUE(m.allocate(1, prompt(100)).ok());
  ASSERT_EQ(m.release_outside_window(1, 100), 5);
  EXPECT_EQ(m.num_cached_blocks(), 5);  // registered, ref 0: cached, not free
  auto again = m.allocate(2, prompt(100));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->num_cached_tokens, 96);  // the 6 full blocks, the released 5 revived
  EXPECT_EQ(m.num_cached_blocks(), 0);
  EXPECT_INVARIANTS(m);
  // Without the prefix cache the released blocks are simply free.
  BlockManager plain = make(20, 64, 16, /*caching=*/false);
  ASSERT_TRUE(plain.allocate(1, prompt(100)).ok());
  const int32_t free_before = plain.num_free_blocks();
  EXPECT_EQ(plain.release_outside_window(1, 100), 5);
  EXPECT_EQ(plain.num_free_blocks(), free_before + 5);
  EXPECT_INVARIANTS(plain);
}

TEST(BlockWindow, PendingBlocksAndTheLastBlockStay) {
  BlockManager m = make(1, 64, 4);
  ASSERT_TRUE(m.allocate(1, prompt(6)).ok());
  AppendResult r;
  ASSERT_TRUE(m.append_pending(1, 6, r).ok());  // positions 6..11 pending: blocks 1 and 2
  // Window 1 at query 12: keys < 12 are out, but the chain has passed only
  // block 0 (block 1 holds pending slots), so only block 0 goes.
  EXPECT_EQ(m.release_outside_window(1, 12), 1);
  EXPECT_INVARIANTS(m);
  for (int32_t p = 6; p < 12; ++p) ASSERT_TRUE(m.commit(1, p, 7).ok());
  EXPECT_EQ(m.release_outside_window(1, 12), 1) << "block 1 once committed; block 2 is the last";
  EXPECT_EQ(m.block_table(1).back() != kNoBlock, true);
  EXPECT_INVARIANTS(m);
}

TEST(BlockWindow, NothingWithoutAWindowContiguousOrUnknown) {
  BlockManager none = make(0);
  ASSERT_TRUE(none.allocate(1, prompt(100)).ok());
  EXPECT_EQ(none.release_outside_window(1, 100), 0);
  BlockManager contiguous = make(20, 64, 16, false, KvLayout::contiguous);
  ASSERT_TRUE(contiguous.allocate(1, prompt(100)).ok());
  EXPECT_EQ(contiguous.release_outside_window(1, 100), 0);
  EXPECT_EQ(contiguous.release_outside_window(99, 100), 0);
  EXPECT_INVARIANTS(contiguous);
}

}  // namespace
}  // namespace pagoda::actors
