// The AVX2+FMA variant of quant_matmul's tile kernel (QuantIsa::Avx2). Every
// function carries target("avx2,fma,f16c") so the rest of the build stays
// portable; quant_matmul calls it only when cpu_features().avx2. The body is
// quant_tile_simd.hpp: maddubs+madd for the integer dot products, 2 weight
// rows × up to 4 activation rows per micro-kernel (2×4 fp32 accumulators fit
// the 16 ymm registers; 4 weight rows for decode measured ~5% slower).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c")))
#define PAGODA_VNNI 0
#define PAGODA_NR_DECODE 2
#define PAGODA_NR_BATCH 2

namespace pagoda::gpu::cpu::detail {

namespace {
#include "gpu/cpu/quant_tile_simd.hpp"
}  // namespace

PAGODA_SIMD void quant_tile_avx2(const LinearWeight& w, const ActBlock* act, float* y,
                                 int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  tile_any(w, act, y, m0, m1, n0, n1);
}

}  // namespace pagoda::gpu::cpu::detail

namespace pagoda::gpu::cpu::detail {

namespace {

// Largest |x| of 32 floats, and whether all are finite.
PAGODA_SIMD inline float block_amax(const float* x, bool& finite) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  for (int i = 0; i < 32; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));  // inf or NaN
    m = _mm256_max_ps(m, a);
  }
  finite = _mm256_movemask_ps(bad) == 0;
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

}  // namespace

// quantize_activations with AVX2: the same d, 1/d, round-to-nearest-even
// (vroundps under the default rounding mode, as std::nearbyint) and clamp as
// the scalar code, so the same bytes.
PAGODA_SIMD void quantize_activations_avx2(const float* x, int64_t M, int64_t K, ActBlock* out) {
  const int64_t nb = K / 32;
  for (int64_t i = 0; i < M * nb; ++i) {
    const float* xb = x + i * 32;
    ActBlock& o = out[i];
    bool finite = true;
    const float amax = block_amax(xb, finite);
    if (!finite) {
      o = ActBlock{std::nanf(""), std::nanf(""), 0, 0, {}};
      continue;
    }
    if (amax < 1e-30f) {
      o = ActBlock{0.0f, 0.0f, 0, 0, {}};
      continue;
    }
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(1.0f / d);
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * j), id),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    // int32 -> int8 in element order (packs interleave 128-bit lanes; undo with a permute).
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs), p8);
    const __m256i s32 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    const int sum = _mm_cvtsi128_si32(s);
    o.d = d;
    o.s = d * static_cast<float>(sum);
    o.sum = sum;
    const __m256i l32 = _mm256_add_epi32(q[0], q[1]);  // elements 0..15
    __m128i l = _mm_add_epi32(_mm256_castsi256_si128(l32), _mm256_extracti128_si256(l32, 1));
    l = _mm_add_epi32(l, _mm_shuffle_epi32(l, 0x4E));
    l = _mm_add_epi32(l, _mm_shuffle_epi32(l, 0xB1));
    o.sum_lo = _mm_cvtsi128_si32(l);
  }
}

}  // namespace pagoda::gpu::cpu::detail
