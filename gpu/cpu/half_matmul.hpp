// CPU matmul over 16-bit weights (F16 / BF16) kept in 16 bits: y[M, N] =
// x[M, K] · W[N, K]ᵀ with fp32 activations and fp32 accumulation. Half the
// memory traffic of converting the weights to fp32 at load, which is what a
// memory-bound decode step pays for.
//
// Layout (WeightLayout::kPacked16 with format F16 or BF16): rows grouped by
// 16 (the last group padded with zero rows); per group and 32-element slice
// b of K, one 1024-byte tile holding element (k, r) — k = 0..31 of the slice,
// r = 0..15 of the group — at byte 2·(16k + r). Tiles at (g·(K/32) + b)·1024.
// A SIMD register of the 16 (or 8) rows' weights at one k is one load.
//
// The math, the same bits in every variant: per output, in k order,
//     acc = fma(fp32(w[n, k]), x[m, k], acc),   acc starting at +0,
// with the exact fp16/bf16 -> fp32 widening. Error vs. the exact product:
// |err| <= γ(K)·Σ_k |w_k·x_k|.
//
// Variants: scalar, AVX2 (+FMA, F16C; 8 rows per ymm) and AVX-512F (16 rows
// per zmm), chosen with QuantIsa: Avx512Bw / Avx512Vnni -> AVX-512, Avx2 / AvxVnni ->
// AVX2, Scalar -> scalar. Thread-safety: as quant_matmul (one call at a time
// per pool).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "gpu/result.hpp"
#include "gpu/weight_format.hpp"

namespace pagoda::gpu::cpu {

inline constexpr int64_t kHalfTileBytes = 32 * 16 * 2;

// Bytes of W[n, k] packed (k % 32 == 0).
constexpr int64_t half_packed_bytes(int64_t n, int64_t k) {
  return (n + 15) / 16 * (k / 32) * kHalfTileBytes;
}

// Packs an F16 or BF16 kRows weight with k % 32 == 0 into `out` and returns
// its kPacked16 view (valid while `out` lives). An Error otherwise.
Result<LinearWeight> pack_half_weight(const LinearWeight& w, std::vector<uint8_t>& out);

// y[M, w.n] = x[M, w.k] · Wᵀ for a packed F16/BF16 weight; an Error (nothing
// written) for another format or layout, or an isa the CPU lacks.
Result<void> half_matmul(const LinearWeight& w, const float* x /*[M,K]*/, float* y /*[M,N]*/,
                         int64_t M, QuantIsa isa = best_quant_isa(),
                         ThreadPool& pool = ThreadPool::global());

namespace detail {

// y[m, n] for m in [m0, m1) and the rows of groups [g0, g1) that are < w.n.
using HalfTileFn = void (*)(const LinearWeight& w, const float* x, float* y, int64_t m0,
                            int64_t m1, int64_t g0, int64_t g1);
void half_tile_scalar(const LinearWeight& w, const float* x, float* y, int64_t m0, int64_t m1,
                      int64_t g0, int64_t g1);
void half_tile_avx2(const LinearWeight& w, const float* x, float* y, int64_t m0, int64_t m1,
                    int64_t g0, int64_t g1);
void half_tile_avx512(const LinearWeight& w, const float* x, float* y, int64_t m0, int64_t m1,
                      int64_t g0, int64_t g1);

// The register-tile walk both SIMD variants share, over "units" [u0, u1) (a
// 16-row group for AVX-512, half a group for AVX2) and rows [m0, m1): one row
// takes 4 units per pass (then 1), several rows take 2 units × 4 rows (then
// the remainders). run.template operator()<NU, MR>(m, u) computes NU units
// from u for rows m..m+MR-1.
template <class Run>
void walk_half_tiles(const Run& run, int64_t m0, int64_t m1, int64_t u0, int64_t u1) {
  if (m1 - m0 == 1) {
    int64_t u = u0;
    for (; u + 4 <= u1; u += 4) run.template operator()<4, 1>(m0, u);
    for (; u < u1; ++u) run.template operator()<1, 1>(m0, u);
    return;
  }
  for (int64_t u = u0; u < u1; u += 2) {
    const bool two = u + 2 <= u1;
    for (int64_t m = m0; m < m1;) {
      const bool four = m + 4 <= m1;
      if (four && two) run.template operator()<2, 4>(m, u);
      if (four && !two) run.template operator()<1, 4>(m, u);
      if (!four && two) run.template operator()<2, 1>(m, u);
      if (!four && !two) run.template operator()<1, 1>(m, u);
      m += four ? 4 : 1;
    }
  }
}

}  // namespace detail

}  // namespace pagoda::gpu::cpu
