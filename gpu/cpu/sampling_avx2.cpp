// AVX2 + FMA reductions of CPU sampling (gpu/cpu/sampling_simd.hpp).
#include <immintrin.h>

#include <cmath>

#include "gpu/cpu/sampling_simd.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma")))

namespace pagoda::gpu::cpu::detail {

namespace {

// exp(t) for 8 lanes of t in [-87, 0]: t = k·ln2 + r (|r| <= ln2/2, ln 2 in
// two parts so k·ln2_hi is exact), exp(r) by Taylor to degree 7 (truncation
// < 1e-8), times 2^k through the exponent bits (k >= -126: normal).
PAGODA_SIMD inline __m256 exp_neg(__m256 t) {
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), t);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

}  // namespace

PAGODA_SIMD int32_t argmax_avx2(const float* x, int32_t n) {
  if (std::isnan(x[0]) || n < 16) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) {
      if (x[i] > x[best]) best = i;
    }
    return best;
  }
  __m256 m = _mm256_set1_ps(x[0]);
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);  // NaN in x: keeps m
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  float mx = _mm_cvtss_f32(h);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  for (int32_t j = 0; j < n; ++j) {
    if (x[j] == mx) return j;
  }
  return 0;
}

PAGODA_SIMD double sum_exp_avx2(const float* x, int32_t n, float mx) {
  const __m256 vmx = _mm256_set1_ps(mx), lo = _mm256_set1_ps(-87.0f);
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmx);
    const __m256 keep = _mm256_cmp_ps(t, lo, _CMP_GE_OQ);  // also drops -inf and NaN
    const __m256 e = _mm256_and_ps(exp_neg(_mm256_max_ps(t, lo)), keep);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double d[4];
  _mm256_store_pd(d, _mm256_add_pd(a0, a1));
  double sum = (d[0] + d[1]) + (d[2] + d[3]);
  for (; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  return sum;
}

}  // namespace pagoda::gpu::cpu::detail
