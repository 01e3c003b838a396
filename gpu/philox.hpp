// Philox4x32-10: the counter-based RNG of Salmon et al., "Parallel Random
// Numbers: As Easy as 1, 2, 3" (SC'11), as in D. E. Shaw Research's Random123.
// A draw is a pure function of (counter, key): no state, so a CUDA thread and
// the CPU twin produce the same bits for the same (seed, step, token).
//
// Everything here is header-only, allocation-free and callable from host and
// device code (PAGODA_HD). Thread-safe (pure functions).
#pragma once

#include <cstdint>

#include "gpu/host_device.hpp"

namespace pagoda::gpu {

struct PhiloxCounter {
  uint32_t v[4];
};

struct PhiloxKey {
  uint32_t v[2];
};

namespace philox_detail {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

PAGODA_HD inline void mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

PAGODA_HD inline PhiloxCounter round(PhiloxCounter c, PhiloxKey k) {
  uint32_t hi0, lo0, hi1, lo1;
  mul_hi_lo(kMul0, c.v[0], hi0, lo0);
  mul_hi_lo(kMul1, c.v[2], hi1, lo1);
  return PhiloxCounter{{hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
}

}  // namespace philox_detail

// The 10-round Philox4x32 bijection: four 32-bit random words per counter.
PAGODA_HD inline PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  counter = philox_detail::round(counter, key);
  for (int r = 1; r < 10; ++r) {
    key.v[0] += philox_detail::kWeyl0;
    key.v[1] += philox_detail::kWeyl1;
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

// Maps 32 random bits to a float uniform in [2^-24, 1 - 2^-24] (24 bits of
// resolution, every value exact in float). Both ends stay away from 0 and 1 so
// that -log(u) is finite and non-zero: the exponential race never sees an
// infinite score.
PAGODA_HD inline float uniform_from_bits(uint32_t bits) {
  uint32_t k = bits >> 8;  // [0, 2^24 - 1]
  if (k == 0) k = 1;
  return static_cast<float>(k) * (1.0f / 16777216.0f);
}

// The sampler's draw for one vocabulary entry: a uniform that depends only on
// (seed, step, token). Counter = (token / 4, step lo, step hi, 'SAMP'), key =
// the 64-bit seed; the word token % 4 of the block is used. Four consecutive
// tokens share one Philox call, so a loop over the vocabulary may compute one
// block per 4 tokens (philox_sampling_block) and take its words in order.
constexpr uint32_t kSamplingStream = 0x53414D50u;  // 'SAMP'

PAGODA_HD inline PhiloxCounter philox_sampling_block(uint64_t seed, uint64_t step,
                                                     uint32_t token_block) {
  PhiloxCounter c{{token_block, static_cast<uint32_t>(step),
                   static_cast<uint32_t>(step >> 32), kSamplingStream}};
  PhiloxKey k{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return philox4x32_10(c, k);
}

PAGODA_HD inline float philox_sampling_uniform(uint64_t seed, uint64_t step, uint32_t token) {
  PhiloxCounter block = philox_sampling_block(seed, step, token / 4);
  return uniform_from_bits(block.v[token % 4]);
}

}  // namespace pagoda::gpu
