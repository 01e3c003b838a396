// Philox4x32-10 against Random123's published known-answer vectors, plus the
// properties the sampler relies on (uniform range, counter independence).
//
// The vectors are the philox4x32 / 10-round lines of the `kat_vectors` file
// of D. E. Shaw Research's Random123 distribution (as also reproduced in
// DEShawResearch/fs123 core123/ut/ut_philox.cpp): counter words, key words,
// expected output words.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "gpu/philox.hpp"

namespace pagoda::gpu {
namespace {

struct Kat {
  PhiloxCounter ctr;
  PhiloxKey key;
  uint32_t expect[4];
};

TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}}, {{0x00000000, 0x00000000}},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, {{0xffffffff, 0xffffffff}},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, {{0xa4093822, 0x299f31d0}},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    PhiloxCounter out = philox4x32_10(k.ctr, k.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], k.expect[i]) << "word " << i;
  }
}

TEST(Philox, UniformStaysInsideOpenInterval) {
  EXPECT_EQ(uniform_from_bits(0), 1.0f / 16777216.0f);
  EXPECT_EQ(uniform_from_bits(0xff), 1.0f / 16777216.0f);
  EXPECT_EQ(uniform_from_bits(0xffffffffu), 1.0f - 1.0f / 16777216.0f);
  EXPECT_LT(uniform_from_bits(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform_from_bits(0x80000000u), 0.5f);
}

TEST(Philox, SamplingUniformIsAPureFunctionOfSeedStepToken) {
  // Same inputs, same draw; the four tokens of a block come from one call.
  PhiloxCounter block = philox_sampling_block(42, 7, 3);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(philox_sampling_uniform(42, 7, 12 + i), uniform_from_bits(block.v[i]));
  }
  // Changing seed (either half), step (either half) or token changes the draw.
  const float base = philox_sampling_uniform(42, 7, 13);
  EXPECT_NE(base, philox_sampling_uniform(43, 7, 13));
  EXPECT_NE(base, philox_sampling_uniform(42 + (1ull << 32), 7, 13));
  EXPECT_NE(base, philox_sampling_uniform(42, 8, 13));
  EXPECT_NE(base, philox_sampling_uniform(42, 7 + (1ull << 32), 13));
  EXPECT_NE(base, philox_sampling_uniform(42, 7, 14));
}

TEST(Philox, UniformMeanAndSpread) {
  // 40k draws: mean 1/2 (sd 0.0014) and the 10 deciles each near 4000 (sd ~60).
  double sum = 0;
  int decile[10] = {};
  for (uint32_t t = 0; t < 40000; ++t) {
    float u = philox_sampling_uniform(1234, 5, t);
    ASSERT_GT(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    decile[int(u * 10)]++;
  }
  EXPECT_NEAR(sum / 40000, 0.5, 0.008);
  for (int d = 0; d < 10; ++d) EXPECT_NEAR(decile[d], 4000, 350) << "decile " << d;
}

}  // namespace
}  // namespace pagoda::gpu
