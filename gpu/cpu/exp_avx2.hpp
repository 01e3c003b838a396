// The exp of the CPU kernels' SIMD code (paged attention's softmax, the
// sampling log-softmax, SiLU), for x <= 0: x < kExpMin (or NaN) gives exactly
// 0 (true value < 1.7e-38); else n = round(x log2 e), r = x - n ln2
// (Cody-Waite, two constants, |r| <= ln2/2), exp(r) by its degree-7 Taylor
// polynomial (truncation < 6e-9 relative) in Horner form with FMA, times 2^n
// built in the exponent bits (n >= -126: a normal number). exp(0) == 1
// exactly. Measured relative error over [-87, 0]: 7.7e-8, about 1 fp32 ulp
// (tests/paged_attention_test.cpp bounds it at 3e-7; tests/sampling_test.cpp
// and tests/gpu_ops_test.cpp test its users). The AVX-512 attention kernels
// use the same constants and steps on 16 lanes (the same bits per lane).
// Header-only; exp_avx2 carries its own target attribute, so it may be called
// only from AVX2 + FMA code.
#pragma once

#include <immintrin.h>

namespace pagoda::gpu::cpu::detail {

inline constexpr float kExpMin = -87.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;  // 9 significant bits: n * kLn2Hi is exact
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpC[8] = {1.0f,          1.0f,           0.5f,
                                   1.0f / 6.0f,   1.0f / 24.0f,   1.0f / 120.0f,
                                   1.0f / 720.0f, 1.0f / 5040.0f};  // 1 / i!

__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_GE_OQ);
  const __m256 xc = _mm256_blendv_ps(_mm256_set1_ps(kExpMin), x, live);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpC[7]);
  for (int i = 6; i >= 0; --i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC[i]));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(live, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

}  // namespace pagoda::gpu::cpu::detail
