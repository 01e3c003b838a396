// The index math of the CUDA decode kernels (gpu/cuda/decode_plan.hpp), run
// on the CPU: the kernels cannot run on a machine without a GPU, but their
// indexing is these functions, so it is checked here.
//  - GemvPlan: replaying the GEMV kernel's loops (CTA, warp, row, iteration,
//    unroll slot, lane) with the kernel's predicates reads every (row, K
//    chunk) of W exactly once, never past N or K; the 32 lanes of one load
//    read 32 consecutive chunks (512 contiguous bytes); the grid covers N.
//  - split-K: the partitions of a row cover its keys exactly once, and a row
//    writes its output directly exactly when it has one partition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/cuda/decode_plan.hpp"

namespace pagoda::gpu::cuda {
namespace {

// Replays gemv_kernel's loop nest; counts reads per (row, chunk).
template <int R, int U>
void check_gemv_cover_r(int64_t n, int64_t k) {
  using Plan = GemvPlan<R, U>;
  const Plan plan{n, k};
  const int64_t chunks = plan.chunks();
  std::vector<uint8_t> reads(size_t(n * chunks), 0);
  int64_t out_of_range = 0, non_contiguous = 0;
  for (int64_t cta = 0; cta < plan.num_ctas(); ++cta) {
    for (int warp = 0; warp < Plan::kWarps; ++warp) {
      const int64_t row0 = plan.row_begin(cta, warp);
      if (row0 >= n) continue;  // the kernel's whole-warp exit
      for (int r = 0; r < Plan::kRowsPerWarp; ++r) {
        const int64_t row = row0 + r;
        if (row >= n) continue;  // row_ok
        for (int64_t it = 0; it < plan.iterations(); ++it) {
          for (int u = 0; u < Plan::kUnroll; ++u) {
            for (int lane = 0; lane < 32; ++lane) {
              const int64_t c = plan.chunk_of(it, u, lane);
              if (c != plan.chunk_of(it, u, 0) + lane) ++non_contiguous;
              if (c >= chunks) continue;  // the load predicate
              if (c < 0) {
                ++out_of_range;
                continue;
              }
              ++reads[size_t(row * chunks + c)];
            }
          }
        }
      }
    }
  }
  const std::string label = "R=" + std::to_string(R) + " U=" + std::to_string(U) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
  EXPECT_EQ(out_of_range, 0) << label;
  EXPECT_EQ(non_contiguous, 0) << label;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < reads.size(); ++i) {
    if (reads[i] != 1) {
      ++bad;
      if (first < 0) first = int64_t(i);
    }
  }
  EXPECT_EQ(bad, 0) << label << ": (row, chunk) pairs not read exactly once; first at row "
                    << (first < 0 ? 0 : first / chunks) << " chunk "
                    << (first < 0 ? 0 : first % chunks);
  EXPECT_GE(plan.num_ctas() * Plan::kRowsPerCta, n) << label;
  EXPECT_LT((plan.num_ctas() - 1) * Plan::kRowsPerCta, n) << label;
  EXPECT_GE(plan.iterations() * 32 * Plan::kUnroll, chunks) << label;
  EXPECT_LT((plan.iterations() - 1) * 32 * Plan::kUnroll, chunks) << label;
}

// The (rows, unroll) pairs the kernel uses (gemv_rows_per_warp, gemv_unroll).
void check_gemv_cover(int64_t n, int64_t k) {
  check_gemv_cover_r<2, 4>(n, k);
  check_gemv_cover_r<2, 8>(n, k);  // not used now (gemv_unroll); kept valid
  check_gemv_cover_r<4, 4>(n, k);
}

TEST(GemvPlan, RowsPerWarpFitOneLanePerOutput) {
  for (int m = 1; m <= GemvPlan<>::kMaxM; ++m) {
    EXPECT_LE(gemv_rows_per_warp(m) * m, 32) << m;
    EXPECT_GE(gemv_rows_per_warp(m), 2) << m;
    const bool tested = (gemv_rows_per_warp(m) == 2 && (gemv_unroll(m) == 4 || gemv_unroll(m) == 8)) ||
                        (gemv_rows_per_warp(m) == 4 && gemv_unroll(m) == 4);
    EXPECT_TRUE(tested) << "M=" << m << ": add its (R, U) to check_gemv_cover";
  }
}

TEST(GemvPlan, EveryWeightChunkReadExactlyOnce) {
  // N below, at and past a CTA's rows; K below, at and past one iteration.
  for (int64_t n : {1, 2, 7, 8, 9, 37, 576, 1000}) {
    for (int64_t k : {8, 64, 1016, 1024, 1032, 4104}) check_gemv_cover(n, k);
  }
}

TEST(GemvPlan, Llama3SizedShape) { check_gemv_cover(4096, 4096); }

TEST(GemvPlan, LargeOffsetsStayInt64) {
  using Plan = GemvPlan<>;
  // The lm_head of a 128k vocabulary: row * chunks is past 2^31 elements
  // only in bytes, but a 1M-row weight's last row start is not.
  const Plan plan{int64_t{1} << 20, 14336};
  const int64_t last_cta = plan.num_ctas() - 1;
  const int64_t row = plan.row_begin(last_cta, Plan::kWarps - 1) + Plan::kRowsPerWarp - 1;
  EXPECT_EQ(row, (int64_t{1} << 20) - 1);
  EXPECT_GT(row * plan.chunks() * Plan::kVec, int64_t{1} << 32);
}

TEST(SplitKPlan, PartsCoverKeysAndOnlyMultiPartRowsMerge) {
  for (int32_t partition : {64, 256, 512}) {
    for (int32_t kv_end = 0; kv_end <= 1100; ++kv_end) {
      const int32_t parts = attention_num_parts(kv_end, partition);
      std::vector<int> seen(size_t(kv_end), 0);
      for (int32_t p = 0; p < parts; ++p) {  // the kernel's [lo, hi) of part p
        const int32_t lo = p * partition, hi = std::min(kv_end, lo + partition);
        EXPECT_LT(lo, std::max(kv_end, 1)) << "empty part " << p << " of " << kv_end;
        for (int32_t j = lo; j < hi; ++j) ++seen[size_t(j)];
      }
      for (int32_t j = 0; j < kv_end; ++j) {
        ASSERT_EQ(seen[size_t(j)], 1) << "key " << j << " of " << kv_end << ", P " << partition;
      }
      EXPECT_EQ(attention_writes_directly(kv_end, partition), kv_end <= partition)
          << kv_end << " keys, P " << partition;
    }
  }
  EXPECT_TRUE(attention_writes_directly(5000, 0)) << "unsplit rows always write directly";
}

}  // namespace
}  // namespace pagoda::gpu::cuda
