// The AVX2+FMA variant of the paged-attention kernels (attn::Kernels, see
// paged_attention_kernels.hpp). Every function carries the target attribute,
// so the rest of the build stays baseline x86-64; the driver picks this table
// only when cpu_features().avx2. head_dim must be a multiple of 16.
//
// Bit for bit the AVX-512 variant's arithmetic on 8-float vectors, so that an
// AVX2-only machine gives the same results: a 16-lane accumulator of a dot
// product is two ymm halves (lanes d % 16 < 8 and >= 8, each summing over d
// in order), reduced by the same tree (unpack_ps, unpack_pd, then the four
// 128-bit lanes as (0+1) + (2+3)); the weights' sum uses the same order
// (sum16 in both files), P.V and the rescale are elementwise. Scores for 2
// heads per pass (one 8-lane half of the d-blocks at a time, 16 registers),
// P.V with 2 heads x 32 floats of accumulators in registers.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "gpu/cpu/paged_attention_kernels.hpp"

#define PAGODA_ATTN_TARGET __attribute__((target("avx2,fma")))

namespace pagoda::gpu::cpu::attn {

namespace {

constexpr int kPass = 2;  // heads per register pass
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

PAGODA_ATTN_TARGET inline __m256 exp_ps(__m256 x) { return detail::exp_avx2(x); }

// a[i] of 4 keys -> lanes [k0 k1 k2 k3] per 128-bit lane (partial sums).
PAGODA_ATTN_TARGET inline __m256 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s01 = _mm256_add_ps(_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
  const __m256 s23 = _mm256_add_ps(_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
  const __m256d x = _mm256_castps_pd(s01), y = _mm256_castps_pd(s23);
  return _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                       _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
}

// Two groups' partials -> the 8 keys' sums in key order.
PAGODA_ATTN_TARGET inline __m256 fold_lanes(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

PAGODA_ATTN_TARGET inline float hmax(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

// Sum of 16 lanes (lo: 0-7, hi: 8-15) in the AVX-512 variant's order:
// (i + i+8), then (i + i+4), (i + i+2), (0 + 1).
PAGODA_ATTN_TARGET inline float sum16(__m256 lo, __m256 hi) {
  const __m256 v = _mm256_add_ps(lo, hi);
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

// Accumulators of H heads x keys 4g..4g+3 (keys >= n stay 0) over the half
// `part` (0: d % 16 < 8, 1: d % 16 >= 8) of every 16-float block of d.
template <int H>
PAGODA_ATTN_TARGET inline void dot_group(const float* const* q, const float* k, int32_t g,
                                         int32_t part, int32_t n, int32_t D,
                                         __m256 (&acc)[H][4]) {
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_setzero_ps();
  }
  const int32_t present = std::min<int32_t>(4, n - 4 * g);
  if (present <= 0) return;
  const float* kg = k + int64_t{4 * g} * D;
  for (int32_t d = 8 * part; d < D; d += 16) {
    __m256 kv[4];
    for (int i = 0; i < 4; ++i) {
      kv[i] = i < present ? _mm256_loadu_ps(kg + int64_t{i} * D + d) : _mm256_setzero_ps();
    }
    for (int h = 0; h < H; ++h) {
      const __m256 qv = _mm256_loadu_ps(q[h] + d);
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_fmadd_ps(qv, kv[i], acc[h][i]);
    }
  }
}

template <int H>
PAGODA_ATTN_TARGET void scores_pass(const float* const* q, const float* k, int32_t n, int32_t D,
                                    float scale, float* s) {
  __m256 quad[2][H][4];  // [part][head][group]: 128-bit lane = 4 keys' partial sums
  for (int32_t g = 0; g < 4; ++g) {
    for (int32_t part = 0; part < 2; ++part) {
      __m256 acc[H][4];
      dot_group<H>(q, k, g, part, n, D, acc);
      for (int h = 0; h < H; ++h) {
        quad[part][h][g] = reduce4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
      }
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int32_t half = 0; half < 2; ++half) {  // keys 8 half .. 8 half + 7
    const __m256 valid = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * half), lane));
    for (int h = 0; h < H; ++h) {
      const __m256 lo = fold_lanes(quad[0][h][2 * half], quad[0][h][2 * half + 1]);
      const __m256 hi = fold_lanes(quad[1][h][2 * half], quad[1][h][2 * half + 1]);
      const __m256 sc = _mm256_mul_ps(_mm256_add_ps(lo, hi), _mm256_set1_ps(scale));
      _mm256_store_ps(s + h * kChunk + 8 * half,
                      _mm256_blendv_ps(_mm256_set1_ps(kNegInf), sc, valid));
    }
  }
}

PAGODA_ATTN_TARGET void scores(const float* const* q, int32_t nh, const float* k, int32_t n,
                               int32_t D, float scale, float* s) {
  for (int32_t h = 0; h < nh; h += kPass) {
    if (nh - h >= 2) {
      scores_pass<2>(q + h, k, n, D, scale, s + h * kChunk);
    } else {
      scores_pass<1>(q + h, k, n, D, scale, s + h * kChunk);
    }
  }
}

PAGODA_ATTN_TARGET void exp16(const float* x, float* y) {
  _mm256_storeu_ps(y, exp_ps(_mm256_loadu_ps(x)));
  _mm256_storeu_ps(y + 8, exp_ps(_mm256_loadu_ps(x + 8)));
}

PAGODA_ATTN_TARGET void weights(float* s, int32_t nh, float* m, float* l, float* alpha) {
  for (int32_t h = 0; h < nh; ++h) {
    float* sh = s + h * kChunk;
    const __m256 x0 = _mm256_load_ps(sh), x1 = _mm256_load_ps(sh + 8);
    const float m_new = std::max(m[h], hmax(_mm256_max_ps(x0, x1)));
    if (m_new == kNegInf) {  // no key (only with -inf scores): nothing changes
      _mm256_store_ps(sh, _mm256_setzero_ps());
      _mm256_store_ps(sh + 8, _mm256_setzero_ps());
      alpha[h] = 1.0f;
      continue;
    }
    const __m256 mv = _mm256_set1_ps(m_new);
    const __m256 w0 = exp_ps(_mm256_sub_ps(x0, mv)), w1 = exp_ps(_mm256_sub_ps(x1, mv));
    _mm256_store_ps(sh, w0);
    _mm256_store_ps(sh + 8, w1);
    alpha[h] = m_new == m[h] ? 1.0f : _mm256_cvtss_f32(exp_ps(_mm256_set1_ps(m[h] - m_new)));
    l[h] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(l[h]), _mm_set_ss(alpha[h]), _mm_set_ss(sum16(w0, w1))));
    m[h] = m_new;
  }
}

// acc = acc * alpha + sum_j w[j] v[j] for H heads over W 8-float slices at d.
template <int H, int W>
PAGODA_ATTN_TARGET inline void pv_slices(float* const* acc, const float* alpha, const float* w,
                                         const float* v, int32_t n, int32_t D, int32_t d) {
  __m256 a[H][W];
  for (int h = 0; h < H; ++h) {
    const __m256 al = _mm256_set1_ps(alpha[h]);
    for (int c = 0; c < W; ++c) a[h][c] = _mm256_mul_ps(_mm256_loadu_ps(acc[h] + d + 8 * c), al);
  }
  for (int32_t j = 0; j < n; ++j) {
    __m256 vv[W];
    for (int c = 0; c < W; ++c) vv[c] = _mm256_loadu_ps(v + int64_t{j} * D + d + 8 * c);
    for (int h = 0; h < H; ++h) {
      const __m256 wj = _mm256_broadcast_ss(w + h * kChunk + j);
      for (int c = 0; c < W; ++c) a[h][c] = _mm256_fmadd_ps(wj, vv[c], a[h][c]);
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int c = 0; c < W; ++c) _mm256_storeu_ps(acc[h] + d + 8 * c, a[h][c]);
  }
}

template <int H>
PAGODA_ATTN_TARGET void pv_pass(float* const* acc, const float* alpha, const float* w,
                                const float* v, int32_t n, int32_t D) {
  int32_t d = 0;
  for (; d + 32 <= D; d += 32) pv_slices<H, 4>(acc, alpha, w, v, n, D, d);
  for (; d < D; d += 8) pv_slices<H, 1>(acc, alpha, w, v, n, D, d);
}

PAGODA_ATTN_TARGET void pv(float* const* acc, const float* alpha, const float* w, int32_t nh,
                           const float* v, int32_t n, int32_t D) {
  for (int32_t h = 0; h < nh; h += kPass) {
    if (nh - h >= 2) {
      pv_pass<2>(acc + h, alpha + h, w + h * kChunk, v, n, D);
    } else {
      pv_pass<1>(acc + h, alpha + h, w + h * kChunk, v, n, D);
    }
  }
}

PAGODA_ATTN_TARGET void scale(float* x, float a, int32_t D) {
  const __m256 av = _mm256_set1_ps(a);
  for (int32_t d = 0; d < D; d += 8) _mm256_storeu_ps(x + d, _mm256_mul_ps(_mm256_loadu_ps(x + d), av));
}

PAGODA_ATTN_TARGET void widen(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const auto w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
  }
  widen_bf16(src + i, n - i, dst + i);
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{&scores, &weights, &pv, &scale, &exp16, 16, nullptr, nullptr,
                         &softcap_avx2, &widen};
  return k;
}

}  // namespace pagoda::gpu::cpu::attn
