// The AVX2 (+FMA, F16C) variant of half_matmul (gpu/cpu/half_matmul.hpp): a
// ymm holds one k of 8 rows (half a 16-row group: byte 16h of the k's 32
// bytes), widened exactly from fp16 (vcvtph2ps) or bf16 (a 16-bit shift);
// each output keeps its own fp32 FMA chain in k order, so the bits are the
// scalar kernel's. Register tiles: 4 half-groups × 1 row (decode), 2 × 4
// rows (batches). Called only when cpu_features().avx2.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gpu/cpu/half_matmul.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c")))

namespace pagoda::gpu::cpu::detail {

namespace {

template <bool kBf16>
PAGODA_SIMD inline __m256 widen(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}

// Outputs of half-group units u..u+NU-1 (unit u: rows 8u..8u+7) for rows
// m..m+MR-1, stored (only rows < w.n).
template <bool kBf16, int NU, int MR>
PAGODA_SIMD inline void run(const LinearWeight& w, const float* x, float* y, int64_t m, int64_t u) {
  const int64_t nb = w.k / 32;
  const auto* base = static_cast<const uint8_t*>(w.data);
  __m256 acc[NU][MR];
  for (int i = 0; i < NU * MR; ++i) acc[i / MR][i % MR] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* t[NU];
    for (int i = 0; i < NU; ++i) t[i] = base + (((u + i) / 2) * nb + b) * kHalfTileBytes + 16 * ((u + i) % 2);
    for (int j = 0; j < 32; ++j) {
      const int64_t k = b * 32 + j;
#pragma GCC unroll 4
      for (int i = 0; i < NU; ++i) {
        const __m256 wv = widen<kBf16>(t[i] + 32 * j);
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          acc[i][r] = _mm256_fmadd_ps(wv, _mm256_set1_ps(x[(m + r) * w.k + k]), acc[i][r]);
        }
      }
    }
  }
  for (int i = 0; i < NU; ++i) {
    const int64_t valid = std::min<int64_t>(8, w.n - (u + i) * 8);
    for (int r = 0; r < MR; ++r) {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, acc[i][r]);
      if (valid > 0) std::memcpy(y + (m + r) * w.n + (u + i) * 8, tmp, size_t(valid) * 4);
    }
  }
}

template <bool kBf16>
PAGODA_SIMD void tile(const LinearWeight& w, const float* x, float* y, int64_t m0, int64_t m1,
                      int64_t g0, int64_t g1) {
  walk_half_tiles([&]<int NU, int MR>(int64_t m, int64_t u) { run<kBf16, NU, MR>(w, x, y, m, u); },
                  m0, m1, 2 * g0, std::min(2 * g1, (w.n + 7) / 8));
}

}  // namespace

PAGODA_SIMD void half_tile_avx2(const LinearWeight& w, const float* x, float* y, int64_t m0,
                                int64_t m1, int64_t g0, int64_t g1) {
  if (w.format == WeightFormat::BF16) {
    tile<true>(w, x, y, m0, m1, g0, g1);
  } else {
    tile<false>(w, x, y, m0, m1, g0, g1);
  }
}

}  // namespace pagoda::gpu::cpu::detail
