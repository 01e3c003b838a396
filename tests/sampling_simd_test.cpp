// The AVX2 kernels of CPU sampling (gpu/cpu/sampling_simd.hpp) against plain
// loops written here: argmax, the sum of exps of the log-softmax, and a
// masked row's bitmask.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/sampling_simd.hpp"

namespace pagoda::gpu {
namespace {

// The AVX2 reductions against plain loops: the same argmax (ties to the
// lowest index, NaNs passed over, a NaN first element returned), and the sum
// of exps within 3e-7 relative of a double reference (terms below exp(-87)
// counted as 0, -inf as 0).
TEST(SamplingSimd, ArgmaxAndSumExpMatchReferences) {
  if (!cpu::cpu_features().avx2) GTEST_SKIP() << "CPU or OS lacks AVX2+FMA";
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 6.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t n = 1 + int32_t(rng() % 3000);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = trial % 3 == 0 ? std::round(g(rng)) : g(rng);  // ties when rounded
    if (trial % 7 == 1) x[rng() % n] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 11 == 2) x[0] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 5 == 3) x[rng() % n] = -std::numeric_limits<float>::infinity();
    if (trial % 13 == 4) x[rng() % n] -= 200.0f;  // below exp(-87) of the max
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) {
      if (x[size_t(i)] > x[size_t(best)]) best = i;
    }
    ASSERT_EQ(cpu::detail::argmax_avx2(x.data(), n), best) << "trial " << trial;
    const float mx = x[size_t(best)];
    if (std::isnan(mx)) continue;
    bool has_nan = false;
    double ref = 0;
    for (float v : x) {
      has_nan = has_nan || std::isnan(v);
      if (double(v) - mx >= -87.0) ref += std::exp(double(v) - mx);
    }
    if (has_nan) continue;
    const double got = cpu::detail::sum_exp_avx2(x.data(), n, mx);
    EXPECT_LE(std::fabs(got - ref), 3e-7 * ref) << "trial " << trial << " n " << n;
  }
}

// The bitmask: every token whose bit is clear is -inf, every other keeps its
// value (NaN and -inf included), for words of all ones, all zeros, sparse,
// dense and random bits.
TEST(SamplingSimd, MaskWordsMatchesTheBitLoop) {
  if (!cpu::cpu_features().avx2) GTEST_SKIP() << "CPU or OS lacks AVX2+FMA";
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 4.0f);
  for (int trial = 0; trial < 100; ++trial) {
    const int32_t words_n = 1 + int32_t(rng() % 200);
    std::vector<uint32_t> words(static_cast<size_t>(words_n));
    for (uint32_t& w : words) {
      switch (rng() % 5) {
        case 0: w = ~0u; break;
        case 1: w = 0u; break;
        case 2: w = 1u << (rng() % 32); break;
        case 3: w = ~(1u << (rng() % 32)); break;
        default: w = uint32_t(rng());
      }
    }
    std::vector<float> z(static_cast<size_t>(words_n) * 32);
    for (float& v : z) v = g(rng);
    z[rng() % z.size()] = std::numeric_limits<float>::quiet_NaN();
    z[rng() % z.size()] = kNegInf;
    std::vector<float> want = z;
    for (size_t t = 0; t < want.size(); ++t) {
      if (((words[t / 32] >> (t % 32)) & 1u) == 0) want[t] = kNegInf;
    }
    cpu::detail::mask_words_avx2(z.data(), words.data(), words_n);
    for (size_t t = 0; t < z.size(); ++t) {
      if (std::isnan(want[t])) {
        ASSERT_TRUE(std::isnan(z[t])) << "trial " << trial << " token " << t;
      } else {
        ASSERT_EQ(z[t], want[t]) << "trial " << trial << " token " << t;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::gpu
