// The AVX-512F variant of half_matmul (gpu/cpu/half_matmul.hpp): a zmm holds
// one k of a group's 16 rows, widened exactly from fp16 (vcvtph2ps) or bf16
// (a 16-bit shift); each output keeps its own fp32 FMA chain in k order, so
// the bits are the scalar kernel's. Register tiles: 4 groups × 1 row
// (decode), 2 groups × 4 rows (batches). Called only when
// cpu_features().avx512 (through QuantIsa::Avx512Bw or Avx512Vnni).
#include <immintrin.h>

// GCC 12 warns inside its own headers that _mm512_cvtph_ps / _mm512_cvtepi32_ps
// read an "uninitialized" pass-through operand (their unmasked forms ignore it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>

#include "gpu/cpu/half_matmul.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))

namespace pagoda::gpu::cpu::detail {

namespace {

template <bool kBf16>
PAGODA_SIMD inline __m512 widen(const uint8_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  return _mm512_cvtph_ps(h);
}

// Outputs of groups g..g+NG-1 for rows m..m+MR-1, stored (masked past w.n).
template <bool kBf16, int NG, int MR>
PAGODA_SIMD inline void run(const LinearWeight& w, const float* x, float* y, int64_t m, int64_t g) {
  const int64_t nb = w.k / 32;
  const auto* base = static_cast<const uint8_t*>(w.data);
  __m512 acc[NG][MR];
  for (int i = 0; i < NG * MR; ++i) acc[i / MR][i % MR] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* t[NG];
    for (int i = 0; i < NG; ++i) t[i] = base + ((g + i) * nb + b) * kHalfTileBytes;
    for (int j = 0; j < 32; ++j) {
      const int64_t k = b * 32 + j;
#pragma GCC unroll 4
      for (int i = 0; i < NG; ++i) {
        const __m512 wv = widen<kBf16>(t[i] + 32 * j);
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          acc[i][r] = _mm512_fmadd_ps(wv, _mm512_set1_ps(x[(m + r) * w.k + k]), acc[i][r]);
        }
      }
    }
  }
  for (int i = 0; i < NG; ++i) {
    const int64_t valid = std::min<int64_t>(16, w.n - (g + i) * 16);
    for (int r = 0; r < MR; ++r) {
      _mm512_mask_storeu_ps(y + (m + r) * w.n + (g + i) * 16, __mmask16((1u << valid) - 1),
                            acc[i][r]);
    }
  }
}

template <bool kBf16>
PAGODA_SIMD void tile(const LinearWeight& w, const float* x, float* y, int64_t m0, int64_t m1,
                      int64_t g0, int64_t g1) {
  walk_half_tiles([&]<int NG, int MR>(int64_t m, int64_t g) { run<kBf16, NG, MR>(w, x, y, m, g); },
                  m0, m1, g0, g1);
}

}  // namespace

PAGODA_SIMD void half_tile_avx512(const LinearWeight& w, const float* x, float* y, int64_t m0,
                                  int64_t m1, int64_t g0, int64_t g1) {
  if (w.format == WeightFormat::BF16) {
    tile<true>(w, x, y, m0, m1, g0, g1);
  } else {
    tile<false>(w, x, y, m0, m1, g0, g1);
  }
}

}  // namespace pagoda::gpu::cpu::detail
