// The AVX-512 variant of the paged-attention kernels (attn::Kernels, see
// paged_attention_kernels.hpp). Every function carries the target attribute,
// so the rest of the build stays baseline x86-64; the driver picks this table
// only when cpu_features().avx512 (F/BW/VL/DQ in cpuid and the OS-enabled
// zmm/opmask state). head_dim must be a multiple of 16.
//
// Scores: up to 4 heads per pass; for each group of 4 keys the keys' 16-float
// slices are loaded once and FMA'd into one accumulator per (head, key), lane
// d % 16 summing over d in order. The 16 accumulators of a head are then
// reduced by a fixed transpose tree (unpack_ps, unpack_pd, 2 x shuffle_f32x4)
// into one vector holding the 16 keys' scores. P.V: up to 4 heads x 64
// floats of accumulators stay in registers while the chunk's values stream
// through, one load per value slice shared by the heads.
// GCC 12's avx512fintrin.h self-initialises its "undefined" vectors (__Y = __Y),
// which -Wuninitialized reports wherever the intrinsics inline (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "gpu/cpu/paged_attention_kernels.hpp"

#define PAGODA_ATTN_TARGET __attribute__((target("avx2,fma,avx512f,avx512dq,avx512vl,avx512bw")))

namespace pagoda::gpu::cpu::attn {

namespace {

constexpr int kPass = 4;  // heads per register pass

// Calls pass(std::integral_constant<int, H>{}, h) for the heads [h, h + H) of
// every group of up to kPass heads in [0, nh): one instantiation per H.
template <class Pass>
PAGODA_ATTN_TARGET inline void by_head_groups(int32_t nh, const Pass& pass) {
  for (int32_t h = 0; h < nh; h += kPass) {
    switch (std::min(kPass, nh - h)) {
      case 4: pass(std::integral_constant<int, 4>{}, h); break;
      case 3: pass(std::integral_constant<int, 3>{}, h); break;
      case 2: pass(std::integral_constant<int, 2>{}, h); break;
      default: pass(std::integral_constant<int, 1>{}, h); break;
    }
  }
}
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

PAGODA_ATTN_TARGET inline __m512 exp_ps(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMin), _CMP_GE_OQ);
  const __m512 xc = _mm512_mask_mov_ps(_mm512_set1_ps(kExpMin), live, x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpC[7]);
  for (int i = 6; i >= 0; --i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC[i]));
  const __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(live, p, _mm512_castsi512_ps(e));
}

// a[i] of 4 keys -> lanes [k0 k1 k2 k3] per 128-bit lane, each the sum of
// that key's 4 elements in the lane.
PAGODA_ATTN_TARGET inline __m512 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
  const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
  const __m512d x = _mm512_castps_pd(s01), y = _mm512_castps_pd(s23);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
}

// Adds the 128-bit lanes pairwise: [a.0+a.1, a.2+a.3, b.0+b.1, b.2+b.3].
PAGODA_ATTN_TARGET inline __m512 fold_lanes(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Accumulators of H heads x keys 4g..4g+3 (keys >= n stay 0).
template <int H>
PAGODA_ATTN_TARGET inline void dot_group(const float* const* q, const float* k, int32_t g,
                                         int32_t n, int32_t D, __m512 (&acc)[H][4]) {
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < 4; ++i) acc[h][i] = _mm512_setzero_ps();
  }
  const int32_t present = std::min<int32_t>(4, n - 4 * g);
  if (present <= 0) return;
  const float* kg = k + int64_t{4 * g} * D;
  for (int32_t d = 0; d < D; d += 16) {
    __m512 kv[4];
    for (int i = 0; i < 4; ++i) {
      kv[i] = i < present ? _mm512_loadu_ps(kg + int64_t{i} * D + d) : _mm512_setzero_ps();
    }
    for (int h = 0; h < H; ++h) {
      const __m512 qv = _mm512_loadu_ps(q[h] + d);
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm512_fmadd_ps(qv, kv[i], acc[h][i]);
    }
  }
}

template <int H>
PAGODA_ATTN_TARGET void scores_pass(const float* const* q, const float* k, int32_t n, int32_t D,
                                    float scale, float* s) {
  __m512 quad[H][4];
  for (int32_t g = 0; g < 4; ++g) {
    __m512 acc[H][4];
    dot_group<H>(q, k, g, n, D, acc);
    for (int h = 0; h < H; ++h) quad[h][g] = reduce4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
  }
  const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1u);
  for (int h = 0; h < H; ++h) {
    const __m512 all = fold_lanes(fold_lanes(quad[h][0], quad[h][1]),
                                  fold_lanes(quad[h][2], quad[h][3]));
    const __m512 sc = _mm512_mul_ps(all, _mm512_set1_ps(scale));
    _mm512_store_ps(s + h * kChunk, _mm512_mask_mov_ps(_mm512_set1_ps(kNegInf), valid, sc));
  }
}

PAGODA_ATTN_TARGET void scores(const float* const* q, int32_t nh, const float* k, int32_t n,
                               int32_t D, float scale, float* s) {
  by_head_groups(nh, [&](auto H, int32_t h) {
    scores_pass<H()>(q + h, k, n, D, scale, s + h * kChunk);
  });
}

// Sum of the 16 lanes: (i + i+8), (i + i+4), (i + i+2), (0 + 1) (the AVX2 variant's order).
PAGODA_ATTN_TARGET inline float sum16(__m512 w) {
  const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(w), _mm512_extractf32x8_ps(w, 1));
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

// kt[d][j] = k[j][d] for j < n, 0 for n <= j < 16 (k: [n, D], kt: [D, 16]):
// 16 x 16 tiles through unpack_ps, unpack_pd and two rounds of shuffle_f32x4.
PAGODA_ATTN_TARGET void transpose(const float* k, int32_t n, int32_t D, float* kt) {
  for (int32_t dc = 0; dc < D; dc += 16) {
    __m512 r[16], a[16], b[16];
    for (int j = 0; j < 16; ++j) {
      r[j] = j < n ? _mm512_loadu_ps(k + int64_t{j} * D + dc) : _mm512_setzero_ps();
    }
    for (int i = 0; i < 8; ++i) {
      a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {  // b[4i + c], lane L: column 4L + c of rows 4i..4i+3
      const __m512d a0 = _mm512_castps_pd(a[4 * i]), a1 = _mm512_castps_pd(a[4 * i + 1]);
      const __m512d a2 = _mm512_castps_pd(a[4 * i + 2]), a3 = _mm512_castps_pd(a[4 * i + 3]);
      b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
      b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
      b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
      b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for (int c = 0; c < 4; ++c) {  // 128-bit lanes L of b[c], b[4+c], b[8+c], b[12+c] -> column 4L + c
      const __m512 c0 = _mm512_shuffle_f32x4(b[c], b[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
      const __m512 c1 = _mm512_shuffle_f32x4(b[c], b[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
      const __m512 c2 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
      const __m512 c3 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
      float* col = kt + int64_t{dc + c} * 16;
      _mm512_store_ps(col, _mm512_shuffle_f32x4(c0, c2, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_store_ps(col + 4 * 16, _mm512_shuffle_f32x4(c0, c2, _MM_SHUFFLE(3, 1, 3, 1)));
      _mm512_store_ps(col + 8 * 16, _mm512_shuffle_f32x4(c1, c3, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_store_ps(col + 12 * 16, _mm512_shuffle_f32x4(c1, c3, _MM_SHUFFLE(3, 1, 3, 1)));
    }
  }
}

// Scores from the transposed keys, the same operations as scores_pass: e_l
// (lane l of scores_pass's accumulator) = fma chain over d = l, l+16, ... of
// q[d] * kt[d]; then (e_l + e_l+2) pairs, (02 + 13) quads, and the two folds.
template <int H>
PAGODA_ATTN_TARGET void scores_t_pass(const float* const* q, const float* kt, int32_t n,
                                      int32_t D, float scale, float* s) {
  __m512 v[H], pair[H][2];  // v: quad L; pair: (v0 + v1), (v2 + v3)
  for (int L = 0; L < 4; ++L) {
    __m512 t[H][2];
    for (int c = 0; c < 2; ++c) {
      const int l0 = 4 * L + c, l2 = 4 * L + c + 2;
      __m512 e0[H], e2[H];
      for (int h = 0; h < H; ++h) e0[h] = e2[h] = _mm512_setzero_ps();
      for (int32_t d = 0; d < D; d += 16) {
        const __m512 k0 = _mm512_load_ps(kt + int64_t{d + l0} * 16);
        const __m512 k2 = _mm512_load_ps(kt + int64_t{d + l2} * 16);
        for (int h = 0; h < H; ++h) {
          e0[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d + l0]), k0, e0[h]);
          e2[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d + l2]), k2, e2[h]);
        }
      }
      for (int h = 0; h < H; ++h) t[h][c] = _mm512_add_ps(e0[h], e2[h]);
    }
    for (int h = 0; h < H; ++h) {
      const __m512 quad = _mm512_add_ps(t[h][0], t[h][1]);
      if (L % 2 == 0) v[h] = quad;
      else pair[h][L / 2] = _mm512_add_ps(v[h], quad);
    }
  }
  const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1u);
  for (int h = 0; h < H; ++h) {
    const __m512 all = _mm512_add_ps(pair[h][0], pair[h][1]);
    const __m512 sc = _mm512_mul_ps(all, _mm512_set1_ps(scale));
    _mm512_store_ps(s + h * kChunk, _mm512_mask_mov_ps(_mm512_set1_ps(kNegInf), valid, sc));
  }
}

PAGODA_ATTN_TARGET void scores_t(const float* const* q, int32_t nh, const float* kt, int32_t n,
                                 int32_t D, float scale, float* s) {
  by_head_groups(nh, [&](auto H, int32_t h) {
    scores_t_pass<H()>(q + h, kt, n, D, scale, s + h * kChunk);
  });
}

PAGODA_ATTN_TARGET void exp16(const float* x, float* y) {
  _mm512_storeu_ps(y, exp_ps(_mm512_loadu_ps(x)));
}

// The heads' new maxima first, then every alpha with one vector exp (lanes
// are independent: a head's alpha does not depend on nh), then the weights.
PAGODA_ATTN_TARGET void weights(float* s, int32_t nh, float* m, float* l, float* alpha) {
  for (int32_t h0 = 0; h0 < nh; h0 += 16) {
    const int32_t hn = std::min<int32_t>(16, nh - h0);
    alignas(64) float m_new[16], diff[16];
    for (int32_t h = 0; h < hn; ++h) {
      m_new[h] = std::max(m[h0 + h], _mm512_reduce_max_ps(_mm512_load_ps(s + (h0 + h) * kChunk)));
      diff[h] = m_new[h] == m[h0 + h] ? 0.0f : m[h0 + h] - m_new[h];  // exp(0) == 1 exactly
    }
    const __mmask16 lanes = static_cast<__mmask16>((1u << hn) - 1u);
    _mm512_mask_storeu_ps(alpha + h0, lanes, exp_ps(_mm512_maskz_loadu_ps(lanes, diff)));
    for (int32_t h = h0; h < h0 + hn; ++h) {
      float* sh = s + h * kChunk;
      if (m_new[h - h0] == kNegInf) {  // no key (only with -inf scores): nothing changes
        _mm512_store_ps(sh, _mm512_setzero_ps());
        alpha[h] = 1.0f;
        continue;
      }
      const __m512 w = exp_ps(_mm512_sub_ps(_mm512_load_ps(sh), _mm512_set1_ps(m_new[h - h0])));
      _mm512_store_ps(sh, w);
      l[h] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(l[h]), _mm_set_ss(alpha[h]), _mm_set_ss(sum16(w))));
      m[h] = m_new[h - h0];
    }
  }
}

// acc = acc * alpha + sum_j w[j] v[j] for H heads over W 16-float slices at d.
template <int H, int W>
PAGODA_ATTN_TARGET inline void pv_slices(float* const* acc, const float* alpha, const float* w,
                                         const float* v, int32_t n, int32_t D, int32_t d) {
  __m512 a[H][W];
  for (int h = 0; h < H; ++h) {
    const __m512 al = _mm512_set1_ps(alpha[h]);
    for (int c = 0; c < W; ++c) a[h][c] = _mm512_mul_ps(_mm512_loadu_ps(acc[h] + d + 16 * c), al);
  }
  for (int32_t j = 0; j < n; ++j) {
    __m512 vv[W];
    for (int c = 0; c < W; ++c) vv[c] = _mm512_loadu_ps(v + int64_t{j} * D + d + 16 * c);
    for (int h = 0; h < H; ++h) {
      const __m512 wj = _mm512_set1_ps(w[h * kChunk + j]);
      for (int c = 0; c < W; ++c) a[h][c] = _mm512_fmadd_ps(wj, vv[c], a[h][c]);
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int c = 0; c < W; ++c) _mm512_storeu_ps(acc[h] + d + 16 * c, a[h][c]);
  }
}

template <int H>
PAGODA_ATTN_TARGET void pv_pass(float* const* acc, const float* alpha, const float* w,
                                const float* v, int32_t n, int32_t D) {
  int32_t d = 0;
  for (; d + 64 <= D; d += 64) pv_slices<H, 4>(acc, alpha, w, v, n, D, d);
  for (; d < D; d += 16) pv_slices<H, 1>(acc, alpha, w, v, n, D, d);
}

PAGODA_ATTN_TARGET void pv(float* const* acc, const float* alpha, const float* w, int32_t nh,
                           const float* v, int32_t n, int32_t D) {
  by_head_groups(nh, [&](auto H, int32_t h) {
    pv_pass<H()>(acc + h, alpha + h, w + h * kChunk, v, n, D);
  });
}

PAGODA_ATTN_TARGET void scale(float* x, float a, int32_t D) {
  const __m512 av = _mm512_set1_ps(a);
  for (int32_t d = 0; d < D; d += 16) _mm512_storeu_ps(x + d, _mm512_mul_ps(_mm512_loadu_ps(x + d), av));
}

PAGODA_ATTN_TARGET void widen(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const auto w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))), 16);
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(w));
  }
  widen_bf16(src + i, n - i, dst + i);
}

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k{&scores, &weights, &pv, &scale, &exp16, 16, &transpose, &scores_t,
                         &softcap_avx2,  // the AVX2 soft-cap: the same bits as the AVX2 variant
                         &widen};
  return k;
}

}  // namespace pagoda::gpu::cpu::attn
