// The AVX-512 BW variant (QuantIsa::Avx512Bw: F/BW/VL/DQ without VNNI,
// Skylake-class Xeons) of quant_matmul's row-layout tile kernel, and the
// 512-bit activation quantizer that both AVX-512 variants use. Called only
// when cpu_features().avx512 (cpuid and the OS-enabled zmm/opmask state).
//
// Tile kernel: one zmm holds one block of two weight rows (row n in the low
// 256 bits, row n+1 in the high), against the activation block broadcast to
// both halves, so each 256-bit half performs exactly the 8-lane operations
// of quant_tile_simd.hpp for its row: the exact partials P_l through
// vpmaddubsw(|w|, ±x) + vpmaddwd (AVX-512 has no vpsignb: x is negated
// under the mask of negative weights; zero weights give |w| = 0; pairs <=
// 2·128·127 < 2^15, no saturation; Q4_1's unsigned nibbles need no sign),
// then acc_l = fma(d_w·d_x, P_l, acc_l) per block in order and the same
// horizontal sum per half. So every result bit is the scalar kernel's.
// Register tile: 2 row pairs × up to 4 activation rows (8 accumulators).
#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cmath>

#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define PAGODA_VNNI 0
#define PAGODA_NR_DECODE 2
#define PAGODA_NR_BATCH 2

namespace pagoda::gpu::cpu::detail {

namespace {
// load_block, weight_operand, hsum: the 256-bit helpers, per row.
#include "gpu/cpu/quant_tile_simd.hpp"

// Two 256-bit halves as one zmm.
PAGODA_SIMD inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// out[i][r] = dot(weight row w[i], activation row a[r]), i < 2·NP, r < MR.
template <WeightFormat F, int NP, int MR>
PAGODA_SIMD inline void micro512(const uint8_t* const* w, const ActBlock* const* a, int64_t nb,
                                 float (*out)[4]) {
  constexpr int64_t kBytes = block_bytes(F);
  constexpr bool kOffset = F == WeightFormat::Q4_1;
  const __m512i ones = _mm512_set1_epi16(1);
  __m512 acc[NP][MR];
  __m128 macc[2 * NP];
  for (int i = 0; i < 2 * NP; ++i) macc[i] = _mm_setzero_ps();
  for (int p = 0; p < NP * MR; ++p) acc[p / MR][p % MR] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i u[NP];
    __mmask64 neg[NP];
    __m512 dw[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const WeightBlock w0 = load_block<F>(w[2 * p] + b * kBytes);
      const WeightBlock w1 = load_block<F>(w[2 * p + 1] + b * kBytes);
      const WeightOperand o0 = weight_operand<F>(w0.q), o1 = weight_operand<F>(w1.q);
      u[p] = join(o0.u, o1.u);
      neg[p] = kOffset ? __mmask64(0) : _mm512_movepi8_mask(join(o0.aux, o1.aux));
      dw[p] = _mm512_insertf32x8(_mm512_set1_ps(w0.d), _mm256_set1_ps(w1.d), 1);
      if constexpr (kOffset) {
        const __m128 s4 = _mm_setr_ps(a[0][b].s, a[MR > 1 ? 1 : 0][b].s, a[MR > 2 ? 2 : 0][b].s,
                                      a[MR > 3 ? 3 : 0][b].s);
        macc[2 * p] = _mm_fmadd_ps(_mm_set1_ps(w0.m), s4, macc[2 * p]);
        macc[2 * p + 1] = _mm_fmadd_ps(_mm_set1_ps(w1.m), s4, macc[2 * p + 1]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const ActBlock& ab = a[r][b];
      const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs)));
      const __m512 dx = _mm512_set1_ps(ab.d);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const __m512i s = _mm512_mask_sub_epi8(x, neg[p], _mm512_setzero_si512(), x);
        const __m512 pr = _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_maddubs_epi16(u[p], s), ones));
        acc[p][r] = _mm512_fmadd_ps(_mm512_mul_ps(dw[p], dx), pr, acc[p][r]);
      }
    }
  }
  for (int i = 0; i < 2 * NP; ++i) {
    alignas(16) float m[4];
    _mm_store_ps(m, macc[i]);
    for (int r = 0; r < MR; ++r) {
      const __m512 v = acc[i / 2][r];
      const __m256 half_v = i % 2 == 0 ? _mm512_castps512_ps256(v) : _mm512_extractf32x8_ps(v, 1);
      out[i][r] = hsum(half_v) + m[r];
    }
  }
}

// y[m + r, n + i] for r < rows (1..4), i < min(2·NP, n1 - n); rows past n1
// repeat row n1 - 1 (computed, not stored).
template <WeightFormat F, int NP>
PAGODA_SIMD inline void run512(const LinearWeight& w, const ActBlock* const* a, int rows,
                               int64_t m, int64_t n, int64_t n1, float* y) {
  const int64_t nb = w.k / kQuantBlock, row_bytes = w.row_bytes();
  const uint8_t* wrows[2 * NP];
  for (int i = 0; i < 2 * NP; ++i) {
    wrows[i] = static_cast<const uint8_t*>(w.data) + std::min(n + i, n1 - 1) * row_bytes;
  }
  float out[2 * NP][4] = {};
  switch (rows) {
    case 4: micro512<F, NP, 4>(wrows, a, nb, out); break;
    case 3: micro512<F, NP, 3>(wrows, a, nb, out); break;
    case 2: micro512<F, NP, 2>(wrows, a, nb, out); break;
    default: micro512<F, NP, 1>(wrows, a, nb, out); break;
  }
  const int valid = int(std::min<int64_t>(2 * NP, n1 - n));
  for (int i = 0; i < valid; ++i) {
    for (int r = 0; r < rows; ++r) y[(m + r) * w.n + n + i] = out[i][r];
  }
}

template <WeightFormat F>
PAGODA_SIMD void tile512(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                         int64_t m1, int64_t n0, int64_t n1) {
  constexpr int kMR = 4, kNP = 2;
  const int64_t nb = w.k / kQuantBlock;
  for (int64_t m = m0; m < m1; m += kMR) {
    const int rows = static_cast<int>(std::min<int64_t>(kMR, m1 - m));
    const ActBlock* a[kMR];
    for (int r = 0; r < kMR; ++r) a[r] = act + (m + std::min(r, rows - 1)) * nb;
    int64_t n = n0;
    for (; n + 2 * kNP <= n1; n += 2 * kNP) run512<F, kNP>(w, a, rows, m, n, n1, y);
    if (n < n1) run512<F, 1>(w, a, rows, m, n, n1, y);  // 1 or 2 rows; 3 loops twice
    if (n + 2 < n1) run512<F, 1>(w, a, rows, m, n + 2, n1, y);
  }
}

}  // namespace

PAGODA_SIMD void quant_tile_avx512bw(const LinearWeight& w, const ActBlock* act, float* y,
                                     int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  switch (w.format) {
    case WeightFormat::Q8_0: tile512<WeightFormat::Q8_0>(w, act, y, m0, m1, n0, n1); return;
    case WeightFormat::Q4_0: tile512<WeightFormat::Q4_0>(w, act, y, m0, m1, n0, n1); return;
    case WeightFormat::Q4_1: tile512<WeightFormat::Q4_1>(w, act, y, m0, m1, n0, n1); return;
    default: return;
  }
}

// quantize_activations with 512-bit vectors: a block is two zmm. amax is a
// max (exact in any order), then the scalar code's d, 1/d, fp32 product,
// round-to-nearest-even (vrndscaleps) and clamp; vpmovsdb narrows in element
// order (values are in [-127, 127], so its saturation never acts).
PAGODA_SIMD void quantize_activations_avx512(const float* x, int64_t M, int64_t K, ActBlock* out) {
  const int64_t nb = K / 32;
  const __m512 inf = _mm512_set1_ps(INFINITY);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int64_t i = 0; i < M * nb; ++i) {
    const float* xb = x + i * 32;
    ActBlock& o = out[i];
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
    const __mmask16 bad = _mm512_cmp_ps_mask(a0, inf, _CMP_NLT_UQ) |
                          _mm512_cmp_ps_mask(a1, inf, _CMP_NLT_UQ);  // inf or NaN
    if (bad != 0) {
      o = ActBlock{std::nanf(""), std::nanf(""), 0, 0, {}};
      continue;
    }
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    if (amax < 1e-30f) {
      o = ActBlock{0.0f, 0.0f, 0, 0, {}};
      continue;
    }
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(1.0f / d);
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512i q0 = _mm512_cvtps_epi32(
        _mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(_mm512_mul_ps(v0, id), kRound), lo), hi));
    const __m512i q1 = _mm512_cvtps_epi32(
        _mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(_mm512_mul_ps(v1, id), kRound), lo), hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o.qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o.qs + 16), _mm512_cvtsepi32_epi8(q1));
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    o.d = d;
    o.s = d * static_cast<float>(sum);
    o.sum = sum;
    o.sum_lo = _mm512_reduce_add_epi32(q0);
  }
}

}  // namespace pagoda::gpu::cpu::detail
