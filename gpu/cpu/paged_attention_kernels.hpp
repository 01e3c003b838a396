// The inner kernels of the CPU paged attention (gpu/cpu/paged_attention.cpp),
// one table per ISA variant: portable C++ (paged_attention_portable.cpp),
// AVX2+FMA (paged_attention_avx2.cpp) and AVX-512 F/DQ/VL/BW
// (paged_attention_avx512.cpp). The driver walks a work item's blocks and
// rows and calls these on chunks of at most kChunk keys of one block, for all
// q heads of the item that belong to one query row at once, so that a chunk's
// K and V (kChunk x D floats each) are loaded once and stay in L1 while every
// head of the row, and then the next row of the tile, uses them.
//
// Arrays of heads: q[h], acc[h] point at head h's D floats; s / w are
// [nh, kChunk] (head h at h * kChunk, 64-byte aligned); m, l, alpha are [nh].
// k and v point at the chunk's first key / value: [n, D] contiguous.
// Requires 1 <= n <= kChunk, 1 <= nh, D a multiple of d_multiple.
//
// Determinism: each variant's result for one (row, head) depends only on that
// row's q, keys and values: never on nh, on the other heads or on how many
// heads a variant processes per register pass. AVX2 and AVX-512 give the
// same bits (the same operations in the same order on 8- or 16-float
// vectors; tested); the portable variant (no FMA, 8-lane dots, std::exp)
// differs from them in the last bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/exp_avx2.hpp"

namespace pagoda::gpu::cpu::attn {

inline constexpr int32_t kChunk = 16;  // keys per online-softmax step

struct Kernels {
  // s[h][l] = scale * (q[h] . k[l]) for l < n, -inf for n <= l < kChunk.
  void (*scores)(const float* const* q, int32_t nh, const float* k, int32_t n, int32_t D,
                 float scale, float* s);
  // Online-softmax step per head h: m' = max(m[h], max_l s[h][l]);
  // s[h][l] := exp(s[h][l] - m') (exactly 0 where s is -inf), alpha[h] :=
  // exp(m[h] - m') (exactly 1 when m' == m[h], 0 when m[h] == -inf),
  // l[h] := l[h] * alpha[h] + sum_l s[h][l], m[h] := m'.
  void (*weights)(float* s, int32_t nh, float* m, float* l, float* alpha);
  // acc[h][d] := acc[h][d] * alpha[h], then += w[h][j] * v[j][d] for j = 0..n-1 in order.
  void (*pv)(float* const* acc, const float* alpha, const float* w, int32_t nh, const float* v,
             int32_t n, int32_t D);
  // x[d] *= a for d < D.
  void (*scale)(float* x, float a, int32_t D);
  // y[l] = exp(x[l]) for 16 lanes, x <= 0 (the exp the weights use; for tests).
  void (*exp16)(const float* x, float* y);
  int32_t d_multiple;  // head_dim must be a multiple of this
  // Optional (nullptr when a variant has none), for tiles of several rows:
  // transpose once per chunk, kt[d][l] = k[l][d] for l < n and 0 for n <= l <
  // kChunk (kt: [D, kChunk], 64-byte aligned); then scores_t gives exactly the
  // bits of scores for any heads of any row whose keys are the first n <= that
  // chunk's n (the rest are masked as in scores).
  void (*transpose)(const float* k, int32_t n, int32_t D, float* kt);
  void (*scores_t)(const float* const* q, int32_t nh, const float* kt, int32_t n, int32_t D,
                   float scale, float* s);
  // Gemma's logit soft-cap: s[h][l] := cap * tanh(s[h][l] / cap) for l < n
  // (entries l >= n keep their -inf). Portable: std::tanh; AVX2 and AVX-512
  // both run softcap_avx2 below (the same bits).
  void (*softcap)(float* s, int32_t nh, int32_t n, float cap);
  // dst[i] = the fp32 value of bf16 src[i] for i < n (exact; every variant
  // gives the same bits): a bf16 cache's chunk widened for the kernels above.
  void (*widen)(const uint16_t* src, int64_t n, float* dst);
};

const Kernels& portable_kernels();
const Kernels& avx2_kernels();    // requires cpu_features().avx2
const Kernels& avx512_kernels();  // requires cpu_features().avx512

// The kernels of `isa` when it runs here and takes head_dim D, else the
// portable ones (paged_attention_isa.cpp).
const Kernels& kernels_for(AttnIsa isa, int32_t D);

// The exp of the SIMD variants (the portable one uses std::exp): exp_avx2.hpp
// (its constants are shared with the AVX-512 variant's 16-lane copy).
using detail::kExpC;
using detail::kExpMin;
using detail::kLn2Hi;
using detail::kLn2Lo;
using detail::kLog2e;

// tanh(x) = sign(x) (1 - t) / (1 + t), t = exp(-2 |x|) by exp_avx2 (exactly 0
// for |x| > 43.5, giving +-1): about 2 ulp of the result except near 0, where
// the absolute error stays below 1e-7 (tests/paged_attention_test.cpp).
__attribute__((target("avx2,fma"))) inline void softcap_avx2(float* s, int32_t nh, int32_t n,
                                                             float cap) {
  const __m256 capv = _mm256_set1_ps(cap), one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f), minus_two = _mm256_set1_ps(-2.0f);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int32_t h = 0; h < nh; ++h) {
    for (int32_t half = 0; half < kChunk / 8; ++half) {
      float* p = s + h * kChunk + 8 * half;
      const __m256 valid = _mm256_castsi256_ps(
          _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * half), lane));
      const __m256 x = _mm256_div_ps(_mm256_loadu_ps(p), capv);
      const __m256 ax = _mm256_andnot_ps(sign, x);
      const __m256 t = detail::exp_avx2(_mm256_mul_ps(minus_two, ax));
      const __m256 th = _mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t));
      const __m256 capped = _mm256_mul_ps(_mm256_or_ps(th, _mm256_and_ps(sign, x)), capv);
      _mm256_storeu_ps(p, _mm256_blendv_ps(_mm256_loadu_ps(p), capped, valid));
    }
  }
}

// Portable helpers (the portable variant and split-K's merge; widen_bf16 is
// also the SIMD variants' tail): acc[i] += w * v[i] and x[i] *= a over n floats, in 8-wide blocks so that the
// compiler vectorises them.
inline void axpy(float* __restrict acc, float w, const float* __restrict v, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t j = 0; j < 8; ++j) acc[i + j] += w * v[i + j];
  }
  for (; i < n; ++i) acc[i] += w * v[i];
}

inline void widen_bf16(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &bits, sizeof(float));
  }
}

inline void scale_in_place(float* x, float a, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t j = 0; j < 8; ++j) x[i + j] *= a;
  }
  for (; i < n; ++i) x[i] *= a;
}

}  // namespace pagoda::gpu::cpu::attn
