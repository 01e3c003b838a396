// Unit tests for actors::BlockPool: block states, ref counts, the free list
// vs the LRU list of cached blocks, registration and verified lookup.
#include "actors/block_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace pagoda::actors {
namespace {

constexpr int32_t kBs = 4;

void fill(BlockPool& pool, BlockId b, std::vector<TokenId> toks) {
  ASSERT_EQ(toks.size(), size_t(kBs));
  std::ranges::copy(toks, pool.tokens(b).begin());
}

void expect_ok(const BlockPool& pool) {
  auto r = pool.check_invariants();
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
}

TEST(BlockPool, FreshPoolIsAllFreeAndHandsOutAscendingIds) {
  BlockPool pool(5, kBs);
  EXPECT_EQ(pool.total_blocks(), 5);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_EQ(pool.num_used_blocks(), 0);
  for (BlockId want = 0; want < 5; ++want) {
    auto b = pool.take();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(*b, want);
    EXPECT_EQ(pool.ref_count(*b), 1);
    EXPECT_EQ(pool.state(*b), BlockState::used);
  }
  EXPECT_FALSE(pool.take().has_value()) << "an exhausted pool must say so as a value";
  EXPECT_EQ(pool.num_used_blocks(), 5);
  expect_ok(pool);
}

TEST(BlockPool, UnrefToZeroFreesUnregisteredAndCachesRegistered) {
  BlockPool pool(4, kBs);
  BlockId a = *pool.take(), b = *pool.take();
  fill(pool, b, {1, 2, 3, 4});
  ASSERT_EQ(pool.register_full(b, 77, kRootParent), std::optional<BlockId>(b));
  pool.ref(a);  // ref 2
  pool.unref(a);
  EXPECT_EQ(pool.state(a), BlockState::used);
  pool.unref(a);
  pool.unref(b);
  EXPECT_EQ(pool.state(a), BlockState::free);
  EXPECT_EQ(pool.state(b), BlockState::cached);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_EQ(pool.num_available_blocks(), 4);
  expect_ok(pool);
}

TEST(BlockPool, TakePrefersFreeBlocksThenEvictsCachedOnes) {
  BlockPool pool(2, kBs);
  BlockId a = *pool.take();
  fill(pool, a, {5, 6, 7, 8});
  ASSERT_TRUE(pool.register_full(a, 11, kRootParent).has_value());
  pool.unref(a);  // cached; block 1 is still free
  BlockId b = *pool.take();
  EXPECT_NE(b, a) << "a free block must be used before evicting a cached one";
  EXPECT_TRUE(pool.is_registered(a));
  EXPECT_EQ(pool.num_evictions(), 0u);
  BlockId c = *pool.take();
  EXPECT_EQ(c, a);
  EXPECT_FALSE(pool.is_registered(a));
  EXPECT_EQ(pool.num_evictions(), 1u);
  const std::vector<TokenId> toks{5, 6, 7, 8};
  EXPECT_FALSE(pool.lookup(11, toks, kRootParent).has_value());
  expect_ok(pool);
}

TEST(BlockPool, EvictsLeastRecentlyReleasedFirst) {
  BlockPool pool(3, kBs);
  std::vector<BlockId> ids;
  for (int i = 0; i < 3; ++i) {
    BlockId b = *pool.take();
    fill(pool, b, {i, i, i, i});
    ASSERT_TRUE(pool.register_full(b, 100 + uint64_t(i), kRootParent).has_value());
    ids.push_back(b);
  }
  pool.unref(ids[2]);
  pool.unref(ids[0]);
  pool.unref(ids[1]);
  EXPECT_EQ(*pool.take(), ids[2]);
  EXPECT_EQ(*pool.take(), ids[0]);
  EXPECT_EQ(*pool.take(), ids[1]);
  expect_ok(pool);
}

TEST(BlockPool, RefRevivesACachedBlockOutOfTheLruList) {
  BlockPool pool(2, kBs);
  BlockId a = *pool.take(), b = *pool.take();
  fill(pool, a, {1, 1, 1, 1});
  fill(pool, b, {2, 2, 2, 2});
  ASSERT_TRUE(pool.register_full(a, 1, kRootParent).has_value());
  ASSERT_TRUE(pool.register_full(b, 2, kRootParent).has_value());
  pool.unref(a);
  pool.unref(b);
  pool.ref(a);  // revived: used again, no longer evictable
  EXPECT_EQ(pool.state(a), BlockState::used);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  expect_ok(pool);
  EXPECT_EQ(*pool.take(), b);
  EXPECT_FALSE(pool.take().has_value());
  pool.unref(a);  // released again: cached, at the MRU end
  EXPECT_EQ(pool.state(a), BlockState::cached);
  expect_ok(pool);
}

TEST(BlockPool, LookupVerifiesTokensAndParent) {
  BlockPool pool(3, kBs);
  BlockId p = *pool.take(), c = *pool.take();
  fill(pool, p, {1, 2, 3, 4});
  fill(pool, c, {9, 9, 9, 9});
  ASSERT_TRUE(pool.register_full(p, 500, kRootParent).has_value());
  const BlockRef parent = pool.identity(p);
  ASSERT_TRUE(pool.register_full(c, 600, parent).has_value());
  const std::vector<TokenId> right{9, 9, 9, 9}, wrong{9, 9, 9, 8};
  EXPECT_EQ(pool.lookup(600, right, parent), std::optional<BlockId>(c));
  EXPECT_FALSE(pool.lookup(600, wrong, parent).has_value()) << "token mismatch = collision";
  EXPECT_FALSE(pool.lookup(600, right, kRootParent).has_value()) << "parent mismatch";
  EXPECT_FALSE(pool.lookup(601, right, parent).has_value());
  BlockRef stale = parent;
  stale.generation += 1;
  EXPECT_FALSE(pool.lookup(600, right, stale).has_value()) << "another lifetime of the parent";
}

TEST(BlockPool, RegisterReturnsExistingIdenticalBlockAndRejectsCollisions) {
  BlockPool pool(4, kBs);
  BlockId a = *pool.take(), dup = *pool.take(), other = *pool.take(), orphan = *pool.take();
  fill(pool, a, {3, 1, 4, 1});
  fill(pool, dup, {3, 1, 4, 1});
  fill(pool, other, {2, 7, 1, 8});
  fill(pool, orphan, {3, 1, 4, 1});
  ASSERT_EQ(pool.register_full(a, 42, kRootParent), std::optional<BlockId>(a));
  EXPECT_EQ(pool.register_full(dup, 42, kRootParent), std::optional<BlockId>(a));
  EXPECT_FALSE(pool.is_registered(dup)) << "no retroactive dedupe: dup stays unregistered";
  EXPECT_FALSE(pool.register_full(other, 42, kRootParent).has_value()) << "same hash, other tokens";
  EXPECT_FALSE(pool.register_full(orphan, 42, BlockRef{other, 1}).has_value())
      << "same hash and tokens but another parent";
  expect_ok(pool);
  for (BlockId b : {a, dup, other, orphan}) pool.unref(b);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  expect_ok(pool);
}

TEST(BlockPool, GenerationNamesOneLifetime) {
  BlockPool pool(1, kBs);
  BlockId a = *pool.take();
  fill(pool, a, {1, 2, 3, 4});
  ASSERT_TRUE(pool.register_full(a, 9, kRootParent).has_value());
  const BlockRef first = pool.identity(a);
  EXPECT_TRUE(pool.is_live_registered(first));
  pool.unref(a);
  EXPECT_TRUE(pool.is_live_registered(first)) << "cached blocks keep their identity";
  ASSERT_EQ(*pool.take(), a);  // evicted and reused
  EXPECT_FALSE(pool.is_live_registered(first));
  EXPECT_NE(pool.identity(a).generation, first.generation);
  expect_ok(pool);
}

}  // namespace
}  // namespace pagoda::actors
