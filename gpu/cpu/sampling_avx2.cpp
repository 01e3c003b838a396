// AVX2 + FMA reductions of CPU sampling (gpu/cpu/sampling_simd.hpp).
#include <immintrin.h>

#include <cmath>

#include "gpu/cpu/exp_avx2.hpp"
#include "gpu/cpu/sampling_simd.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma")))

namespace pagoda::gpu::cpu::detail {

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
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));  // < -87, NaN: 0
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double d[4];
  _mm256_store_pd(d, _mm256_add_pd(a0, a1));
  double sum = (d[0] + d[1]) + (d[2] + d[3]);
  for (; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  return sum;
}

PAGODA_SIMD void mask_words_avx2(float* z, const uint32_t* words, int32_t num_words) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  for (int32_t w = 0; w < num_words; ++w) {
    const uint32_t bits = words[w];
    if (bits == ~uint32_t(0)) continue;
    float* zw = z + int64_t{w} * 32;  // [32] this word's logits
    for (int32_t g = 0; g < 4; ++g) {  // 8 tokens per group: lanes whose bit is clear -> -inf
      const __m256i b = _mm256_set1_epi32(int32_t((bits >> (8 * g)) & 0xFFu));
      const __m256i clear = _mm256_cmpeq_epi32(_mm256_and_si256(b, lane_bit), _mm256_setzero_si256());
      const __m256 v = _mm256_loadu_ps(zw + 8 * g);
      _mm256_storeu_ps(zw + 8 * g, _mm256_blendv_ps(v, neg_inf, _mm256_castsi256_ps(clear)));
    }
  }
}

}  // namespace pagoda::gpu::cpu::detail
