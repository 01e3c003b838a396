// The tiled prefill kernel's tile numbering (gpu/prefill_tiles.hpp): over
// random flattened batches (empty-free sequences of 1..300 rows, padding
// rows at the end, tile sizes 16/64), the grid of prefill_tile_count CTAs
// maps onto every (sequence, tile) pair exactly once, each pair's rows lie
// inside its sequence, and the CTAs without work are the surplus only.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gpu/prefill_tiles.hpp"

namespace pagoda::gpu {
namespace {

TEST(PrefillTiles, GridCoversEveryTileOnce) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 400; ++trial) {
    const int32_t tile_rows = trial % 2 ? 64 : 16;
    const int32_t S = 1 + int32_t(rng() % 40);
    std::vector<int32_t> qsl = {0};
    for (int32_t s = 0; s < S; ++s) {
      const int32_t len = rng() % 3 == 0 ? 1 : 1 + int32_t(rng() % 300);
      qsl.push_back(qsl.back() + len);
    }
    const int32_t T = qsl.back() + int32_t(rng() % 70);  // padding rows
    std::map<std::pair<int32_t, int32_t>, int> seen;
    const int64_t grid = prefill_tile_count(T, S, tile_rows);
    for (int32_t b = 0; b < grid; ++b) {
      int32_t seq = -1, tile = -1;
      if (!find_prefill_tile(qsl.data(), S, tile_rows, b, seq, tile)) continue;
      ASSERT_GE(seq, 0);
      ASSERT_LT(seq, S);
      ASSERT_GE(tile, 0);
      ASSERT_LT(int64_t{tile} * tile_rows, qsl[size_t(seq) + 1] - qsl[size_t(seq)]);
      ++seen[{seq, tile}];
    }
    size_t want = 0;
    for (int32_t s = 0; s < S; ++s) {
      const int32_t len = qsl[size_t(s) + 1] - qsl[size_t(s)];
      const int32_t tiles = (len + tile_rows - 1) / tile_rows;
      want += size_t(tiles);
      for (int32_t t = 0; t < tiles; ++t) {
        ASSERT_EQ((seen[{s, t}]), 1) << "trial " << trial << " seq " << s << " tile " << t;
      }
    }
    EXPECT_EQ(seen.size(), want) << "trial " << trial;
  }
}

TEST(PrefillTiles, NoSequencesNoWork) {
  const int32_t qsl[1] = {0};
  int32_t seq = 0, tile = 0;
  EXPECT_FALSE(find_prefill_tile(qsl, 0, 64, 0, seq, tile));
}

}  // namespace
}  // namespace pagoda::gpu
