// The AVX2+FMA kernel of quant_matmul (see quant_matmul.hpp for the math).
// Every function here carries target("avx2,fma,f16c") so the rest of the
// build stays portable; quant_matmul only calls it when
// cpu_supports_avx2_kernel() (F16C converts the fp16 block scales).
//
// Per 32-element block: the weight quants are widened to 32 int8 lanes, the
// int8×int8 products are summed pairwise into int16 (maddubs: no saturation,
// |pair| <= 2·128·127 < 2^15) and then into 8 int32 partial sums (madd),
// converted to fp32 (exact, |partial| < 2^24) and accumulated with one FMA
// by the block scale d_w·d_x. A micro-kernel covers NR weight rows × MR
// activation rows (MR <= 4), so each weight block is unpacked once per up to
// four activation rows and each activation block loaded once per NR rows.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace pagoda::gpu::cpu::detail {

namespace {

// Weight quants of one block as 32 int8 lanes in element order, plus scales.
// Q8_0 and Q4_0 give signed values; Q4_1 gives unsigned nibbles 0..15.
struct WeightBlock {
  __m256i q;
  float d;
  float m;  // Q4_1 only
};

// fp16 -> fp32 with F16C (exact, like fp16_to_fp32).
PAGODA_AVX2 inline float half(uint16_t h) { return _cvtsh_ss(h); }

PAGODA_AVX2 inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(packed, mask);                     // elements 0..15
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);  // elements 16..31
  return _mm256_set_m128i(hi, lo);
}

template <WeightFormat F>
PAGODA_AVX2 inline WeightBlock load_block(const uint8_t* p) {
  if constexpr (F == WeightFormat::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)), half(b->d), 0.0f};
  } else if constexpr (F == WeightFormat::Q4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(p);
    const __m256i q = _mm256_sub_epi8(unpack_nibbles(b->qs), _mm256_set1_epi8(8));
    return {q, half(b->d), 0.0f};
  } else {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
    return {unpack_nibbles(b->qs), half(b->d), half(b->m)};
  }
}

// Eight int32 partial sums of u·s over 32 lanes (u unsigned, s signed).
PAGODA_AVX2 inline __m256i dot_u8_i8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

PAGODA_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Micro-kernel: out[i][r] = dot(weight row w[i], activation row a[r]) for NR
// weight rows × MR activation rows; each weight block is unpacked once and
// each activation block loaded once per block step.
template <WeightFormat F, int NR, int MR>
PAGODA_AVX2 inline void micro(const uint8_t* const* w, const ActBlock* const* a, int64_t nb,
                              float (*out)[4]) {
  constexpr int64_t kBytes = block_bytes(F);
  __m256 acc[NR][MR];
  float macc[NR][MR];
  #pragma GCC unroll 4
  for (int i = 0; i < NR; ++i) {
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) acc[i][r] = _mm256_setzero_ps(), macc[i][r] = 0.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    WeightBlock wb[NR];
    __m256i u[NR];
    #pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) {
      wb[i] = load_block<F>(w[i] + b * kBytes);
      // Signed weights: |w| (unsigned) times x carrying w's sign (sign trick).
      u[i] = F == WeightFormat::Q4_1 ? wb[i].q : _mm256_sign_epi8(wb[i].q, wb[i].q);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const ActBlock& ab = a[r][b];
      const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
      #pragma GCC unroll 4
      for (int i = 0; i < NR; ++i) {
        const __m256i si = F == WeightFormat::Q4_1 ? s : _mm256_sign_epi8(s, wb[i].q);
        const __m256 p = _mm256_cvtepi32_ps(dot_u8_i8(u[i], si));
        acc[i][r] = _mm256_fmadd_ps(_mm256_set1_ps(wb[i].d * ab.d), p, acc[i][r]);
        // An explicit fma: left to -ffp-contract, GCC fused this in some
        // instantiations (MR, NR) and not in others, so a row's result
        // depended on how many rows shared the call.
        if constexpr (F == WeightFormat::Q4_1) macc[i][r] = std::fma(wb[i].m, ab.s, macc[i][r]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int i = 0; i < NR; ++i) {
    #pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) out[i][r] = hsum(acc[i][r]) + macc[i][r];
  }
}

// Computes and stores y[m + r, n + i] for r < rows (1..4), i < NR.
template <WeightFormat F, int NR>
PAGODA_AVX2 inline void run_micro(const LinearWeight& w, const ActBlock* const* a, int rows,
                                  int64_t m, int64_t n, float* y) {
  const int64_t nb = w.k / kQuantBlock, row_bytes = w.row_bytes();
  const uint8_t* wrows[NR];
  for (int i = 0; i < NR; ++i) wrows[i] = static_cast<const uint8_t*>(w.data) + (n + i) * row_bytes;
  float out[NR][4] = {};  // micro<> writes out[i][0..rows)
  switch (rows) {
    case 4: micro<F, NR, 4>(wrows, a, nb, out); break;
    case 3: micro<F, NR, 3>(wrows, a, nb, out); break;
    case 2: micro<F, NR, 2>(wrows, a, nb, out); break;
    default: micro<F, NR, 1>(wrows, a, nb, out); break;
  }
  for (int i = 0; i < NR; ++i) {
    for (int r = 0; r < rows; ++r) y[(m + r) * w.n + n + i] = out[i][r];
  }
}

// Steps over 4 activation rows at a time and 2 weight rows per micro-kernel
// call (2×4 accumulators fit the 16 ymm registers; 4 weight rows for decode
// measured ~5% slower here).
template <WeightFormat F>
PAGODA_AVX2 void tile(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                      int64_t m1, int64_t n0, int64_t n1) {
  constexpr int kMR = 4;
  const int64_t nb = w.k / kQuantBlock;
  for (int64_t m = m0; m < m1; m += kMR) {
    const int rows = static_cast<int>(std::min<int64_t>(kMR, m1 - m));
    const ActBlock* a[kMR];
    for (int r = 0; r < kMR; ++r) a[r] = act + (m + std::min(r, rows - 1)) * nb;
    int64_t n = n0;
    for (; n + 2 <= n1; n += 2) run_micro<F, 2>(w, a, rows, m, n, y);
    for (; n < n1; ++n) run_micro<F, 1>(w, a, rows, m, n, y);
  }
}

}  // namespace

PAGODA_AVX2 void quant_tile_avx2(const LinearWeight& w, const ActBlock* act, float* y,
                                 int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  switch (w.format) {
    case WeightFormat::Q8_0: tile<WeightFormat::Q8_0>(w, act, y, m0, m1, n0, n1); return;
    case WeightFormat::Q4_0: tile<WeightFormat::Q4_0>(w, act, y, m0, m1, n0, n1); return;
    case WeightFormat::Q4_1: tile<WeightFormat::Q4_1>(w, act, y, m0, m1, n0, n1); return;
    default: return;
  }
}

}  // namespace pagoda::gpu::cpu::detail
