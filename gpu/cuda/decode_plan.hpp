// Index math of the CUDA decode kernels as plain functions, so that the host
// checks them on the CPU (tests/decode_plan_test.cpp) and the kernels
// (gemv.cu, paged_attention.cu) call the very same code.
//
// GemvPlan<R, U>: the BF16 skinny GEMM y[M, N] = x[M, K] . W[N, K]^T for M <= 8
// (gemv.cu). A CTA has kWarps warps; warp w of CTA c owns the kRowsPerWarp = R
// consecutive output rows starting at row_begin(c, w), for all M rows of x
// (gemv_rows_per_warp(M): each x chunk a lane loads serves R weight rows, so
// more rows per warp for more x rows keeps x's share of the traffic down).
// K is walked in 16-byte chunks of kVec = 8 bf16 weights: in iteration it,
// lane l reads chunk chunk_of(it, u, l) for u < kUnroll = U (skipped when >=
// chunks()); lane l's chunks are l, l + 32, l + 64, ... in that order
// whatever R and U are (gemv_unroll(M): more loads in flight where few
// registers are used). Every (row, chunk) pair is read exactly once per CTA grid, so
// each weight element is read once for all M rows of x.
//
// Split-K attention: partition p of a row with kv_end keys covers
// [p * P, min((p + 1) * P, kv_end)); a row with one part (num_parts == 1)
// writes its output directly, only rows with more need the merge.
//
// Header-only, PAGODA_HD, no STL.
#pragma once

#include <cstdint>

#include "gpu/host_device.hpp"

namespace pagoda::gpu::cuda {

template <int R = 2, int U = 4>
struct GemvPlan {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerWarp = R;
  static constexpr int kRowsPerCta = kWarps * kRowsPerWarp;
  static constexpr int kVec = 8;     // bf16 weights per 16-byte load
  static constexpr int kUnroll = U;  // chunks in flight per lane and row
  static constexpr int kMaxM = 8;

  int64_t n = 0;  // output features (rows of W)
  int64_t k = 0;  // input features; a multiple of kVec

  PAGODA_HD int64_t num_ctas() const { return (n + kRowsPerCta - 1) / kRowsPerCta; }
  PAGODA_HD int64_t row_begin(int64_t cta, int warp) const {
    return (cta * kWarps + warp) * kRowsPerWarp;
  }
  PAGODA_HD int64_t chunks() const { return k / kVec; }
  // Iterations of the (warp-uniform) K loop.
  PAGODA_HD int64_t iterations() const {
    return (chunks() + 32 * kUnroll - 1) / (32 * kUnroll);
  }
  PAGODA_HD int64_t chunk_of(int64_t it, int u, int lane) const {
    return (it * kUnroll + u) * 32 + lane;
  }
};

// Weight rows per warp of the GEMV for M rows of x: 2 for M <= 2, else 4
// (R * M <= 32: lane r * M + m writes y[m, row r]). K's walk (chunk_of) does
// depend on neither R nor U, so a row's arithmetic is the same for every M.
PAGODA_HD constexpr int gemv_rows_per_warp(int m) { return m <= 2 ? 2 : 4; }
// Chunks in flight per lane and row for M rows of x: 4 for every M. (8 for
// M <= 2 was measured on an H200, docs/benchmarks.md "GPU runs": 3-5% less
// bandwidth at M = 1 on every Llama-3-8B shape, so it is not used.)
PAGODA_HD constexpr int gemv_unroll(int) { return 4; }

// Partitions of a row that attends kv_end keys, partition size P > 0.
PAGODA_HD inline int32_t attention_num_parts(int32_t kv_end, int32_t partition) {
  return kv_end <= 0 ? 1 : (kv_end + partition - 1) / partition;
}

// Whether partition `part` of such a row writes the row's output itself
// (unsplit, or a row with a single partition) rather than a partial for the
// merge kernel.
PAGODA_HD inline bool attention_writes_directly(int32_t kv_end, int32_t partition) {
  return partition <= 0 || attention_num_parts(kv_end, partition) == 1;
}

}  // namespace pagoda::gpu::cuda
