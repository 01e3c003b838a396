// The scale-out cores (actors/scale_out/route_policy.hpp): block hashes of prompts,
// the routing score, the retry decision and the nodes' hash record.
#include "actors/scale_out/route_policy.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace pagoda::actors {
namespace {

std::vector<TokenId> iota_tokens(size_t n, TokenId first = 1) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(PromptBlockHashes, FullBlocksOnlyChainedFromTheRoot) {
  const auto t = iota_tokens(35);
  const auto h = prompt_block_hashes(t, 16, t.size());
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], hash_block(kRootBlockHash, std::span<const TokenId>(t).first(16)));
  EXPECT_EQ(h[1], hash_block(h[0], std::span<const TokenId>(t).subspan(16, 16)));
  // max_tokens caps it (prefix caching reuses at most len - 1 tokens).
  EXPECT_EQ(prompt_block_hashes(iota_tokens(32), 16, 31).size(), 1u);
  EXPECT_TRUE(prompt_block_hashes(t, 0, t.size()).empty());
}

TEST(PromptBlockHashes, EqualPrefixesShareLeadingHashesOnly) {
  auto a = iota_tokens(48);
  auto b = a;
  b[20] = 999;  // differs in block 1
  const auto ha = prompt_block_hashes(a, 16, 48), hb = prompt_block_hashes(b, 16, 48);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);
  EXPECT_NE(ha[2], hb[2]);  // chained: a later equal block still differs
}

TEST(CachedPrefixBlocks, CountsOnlyTheLeadingRun) {
  const std::vector<uint64_t> h = {1, 2, 3, 4};
  EXPECT_EQ(cached_prefix_blocks({1, 2, 4}, h), 2u);
  EXPECT_EQ(cached_prefix_blocks({2, 3, 4}, h), 0u);
  EXPECT_EQ(cached_prefix_blocks({1, 2, 3, 4}, h), 4u);
}

NodeView idle(int32_t free_blocks = 100) {
  NodeView v;
  v.up = true;
  v.blocks_free = free_blocks;
  v.blocks_total = 100;
  return v;
}

TEST(ChooseNode, NoUpNodeIsMinusOne) {
  std::vector<NodeView> nodes(2);
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 0).node, -1);
  EXPECT_EQ(choose_node({}, RouteWeights{}, 0).node, -1);
}

TEST(ChooseNode, EqualIdleNodesTakeTurns) {
  std::vector<NodeView> nodes = {idle(), idle(), idle()};
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 0).node, 0);
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 1).node, 1);
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 5).node, 2);
  nodes[2].up = false;
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 2).node, 0);
}

TEST(ChooseNode, LessLoadedWins) {
  std::vector<NodeView> nodes = {idle(), idle()};
  nodes[0].waiting = 3;
  nodes[0].running_seqs = 4;
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 0).node, 1);
  // Its own in-flight requests count before a report shows them.
  nodes = {idle(), idle()};
  nodes[1].in_flight = 2;
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 1).node, 0);
}

TEST(ChooseNode, CachedPrefixBeatsModerateLoadButNotAHeavyOne) {
  const std::vector<uint64_t> prompt = {11, 12, 13, 14};
  const std::unordered_set<uint64_t> cached = {11, 12, 13};
  std::vector<NodeView> nodes = {idle(), idle()};
  nodes[1].cached = &cached;
  for (NodeView& v : nodes) v.prompt_hashes = prompt;
  nodes[1].running_seqs = 1;
  nodes[0].running_seqs = 0;
  RouteChoice c = choose_node(nodes, RouteWeights{}, 0);
  EXPECT_EQ(c.node, 1);
  EXPECT_EQ(c.prefix_blocks, 3u);
  // With load dominant, the idle node wins.
  RouteWeights load_first;
  load_first.prefix = 0.1;
  load_first.load = 5.0;
  EXPECT_EQ(choose_node(nodes, load_first, 0).node, 0);
}

TEST(ChooseNode, MoreFreeBlocksBreakAnOtherwiseEqualScore) {
  std::vector<NodeView> nodes = {idle(40), idle(90)};
  EXPECT_EQ(choose_node(nodes, RouteWeights{}, 0).node, 1);
  RouteWeights no_free;
  no_free.free = 0.0;
  EXPECT_EQ(choose_node(nodes, no_free, 0).node, 0);
}

TEST(OnNodeLost, RetriesOnlyWhatStreamedNothing) {
  EXPECT_EQ(on_node_lost(false, 0, 2), LossAction::retry);
  EXPECT_EQ(on_node_lost(false, 1, 2), LossAction::retry);
  EXPECT_EQ(on_node_lost(false, 2, 2), LossAction::fail);
  EXPECT_EQ(on_node_lost(true, 0, 2), LossAction::fail);
}

TEST(HashLru, KeepsTheNewestUpToCapacity) {
  HashLru lru(3);
  for (uint64_t h : {1, 2, 3}) lru.touch(h);
  lru.touch(1);  // 1 is newest again
  lru.touch(4);  // evicts 2, the oldest
  EXPECT_FALSE(lru.contains(2));
  EXPECT_EQ(lru.size(), 3u);
  EXPECT_EQ(lru.recent(10), (std::vector<uint64_t>{4, 1, 3}));
  EXPECT_EQ(lru.recent(2), (std::vector<uint64_t>{4, 1}));
  HashLru none(0);
  none.touch(1);
  EXPECT_EQ(none.size(), 0u);
}

}  // namespace
}  // namespace pagoda::actors
