// The tiled tensor-core prefill kernel (gpu/cuda/prefill_attention.cu)
// through CudaBackend::paged_attention, against the CPU twin and the fp64
// reference, on the gpu-notes §8 generator (shuffled physical blocks, NaN in
// every unused slot, block and padded table entry, NaN q in padding rows):
// whole prompts and chunks over prior context at odd lengths around the
// 64-row tile and the 16-row threshold, next to decode rows and short chunks
// (the row kernel's), for D {64, 128} x GQA groups {1, 2, 4, 7, 8} x block
// sizes {8, 16, 32}; split-K for the other rows; batch == per sequence
// bitwise; block_table_rows indirection bitwise the dense layout; every row
// tiled (threshold 1). q and K/V are bf16-representable, so what remains is
// the kernel's rounding of P to bf16: |out - ref| <= 4e-3 + 1.6e-2 |ref|
// (2^-8 max|v| with |v| <= 1; gpu-notes §8). Rows of the row kernel must be
// bitwise those of a backend with the tiled kernel off, and the tiled rows
// must differ from those somewhere (evidence that the tiled kernel ran).
// Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <cstring>

#include "gpu/cuda/cuda_ops.cuh"
#include "tests/attention_problem.hpp"
#include "tests/attention_rows.hpp"
#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

constexpr double kTiledAtol = 4e-3;
constexpr double kTiledRtol = 1.6e-2;
constexpr int kMinRows = 16;

class CudaPrefill : public CudaTest {
 protected:
  BackendOptions backend_options() const override {
    BackendOptions o;
    o.tiled_prefill = true;
    o.tiled_prefill_min_rows = kMinRows;
    return o;
  }
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    BackendOptions o;
    o.tiled_prefill = false;
    auto r = cuda::CudaBackend::create(o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    rowwise_ = std::move(r).value();
  }
  std::unique_ptr<cuda::CudaBackend> rowwise_;
};

// Prompts and chunks (q_len >= 16: tiled) beside rows of the row kernel.
std::vector<Seq> prefill_seqs(int BS) {
  return {{17, 17},      // a whole prompt just above the threshold
          {50, 1},       // decode
          {97, 33},      // a chunk over 64 cached tokens, odd length
          {40, 5},       // a short chunk (row kernel)
          {300, 64},     // one full tile over 236 cached
          {15, 15},      // a whole prompt just below the threshold
          {130, 130},    // two full tiles and two rows
          {BS + 1, 16},  // exactly the threshold
          {700, 150},    // long: three tiles over 550 cached
          {1000, 1}};
}

Problem prefill_problem(Shape sh, uint32_t seed) {
  Problem p = make_problem(sh, prefill_seqs(sh.BS), 3, seed, Values::kBf16);
  for (float& x : p.q) x = round_bf16(x);  // NaN padding rows stay NaN
  return p;
}

// Rows [qsl[s], qsl[s+1]) of sequences with >= kMinRows rows, as a mask.
std::vector<bool> tiled_rows(const Problem& p) {
  std::vector<bool> m(size_t(p.T), false);
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    if (p.seqs[s].q_len < kMinRows) continue;
    for (int r = p.qsl[s]; r < p.qsl[s + 1]; ++r) m[size_t(r)] = true;
  }
  return m;
}

TEST_F(CudaPrefill, MatrixAgainstCpuTwinAndFp64) {
  std::vector<Shape> shapes;
  for (int D : {64, 128}) {
    for (auto [hq, hk] : {std::pair{4, 4}, {8, 4}, {8, 2}, {28, 4}, {16, 2}}) {
      shapes.push_back({hq, hk, D, 16});
    }
  }
  shapes.push_back({8, 2, 128, 8});
  shapes.push_back({8, 2, 128, 32});
  shapes.push_back({9, 3, 64, 32});
  for (const Shape& sh : shapes) {
    const std::string label = "Hq=" + std::to_string(sh.Hq) + " Hk=" + std::to_string(sh.Hk) +
                              " D=" + std::to_string(sh.D) + " BS=" + std::to_string(sh.BS);
    const Problem p = prefill_problem(sh, uint32_t(sh.Hq * 1000 + sh.Hk * 100 + sh.D + sh.BS));
    const auto got = run_attention(*gpu_, p, KvDtype::kBF16, 0);
    const auto row = run_attention(*rowwise_, p, KvDtype::kBF16, 0);
    const auto want = run_attention(*cpu_, p, KvDtype::kF32, 0);
    expect_close(got, want, kTiledAtol, kTiledRtol, label + " vs cpu");
    if (sh.BS == 16 && sh.Hq == 8) {
      expect_close(got, reference(p), kTiledAtol, kTiledRtol, label + " vs fp64");
    }
    const std::vector<bool> tiled = tiled_rows(p);
    const size_t width = size_t(sh.Hq) * sh.D;
    size_t row_kernel_diffs = 0, tiled_diffs = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const bool same = std::memcmp(&got[i], &row[i], sizeof(float)) == 0;
      (tiled[i / width] ? tiled_diffs : row_kernel_diffs) += same ? 0 : 1;
    }
    EXPECT_EQ(row_kernel_diffs, 0u) << label << ": rows of the row kernel changed";
    EXPECT_GT(tiled_diffs, 0u) << label << ": tiled rows bitwise equal to the row kernel's "
                                           "(did the tiled kernel run?)";
    for (size_t i = size_t(p.qsl.back()) * width; i < got.size(); ++i) {
      if (got[i] != 0.0f) {
        ADD_FAILURE() << label << ": padding output " << i << " = " << got[i];
        break;
      }
    }
  }
}

// Split-K changes only the row kernel's rows; the tiled rows are bitwise the same.
TEST_F(CudaPrefill, SplitKForTheOtherRows) {
  const Problem p = prefill_problem({32, 8, 128, 16}, 7);
  const auto want = run_attention(*cpu_, p, KvDtype::kF32, 0);
  const auto base = run_attention(*gpu_, p, KvDtype::kBF16, 0);
  const std::vector<bool> tiled = tiled_rows(p);
  const size_t width = size_t(32) * 128;
  for (int P : {64, 512, -1}) {
    const auto got = run_attention(*gpu_, p, KvDtype::kBF16, P);
    expect_close(got, want, kTiledAtol, kTiledRtol, "partition " + std::to_string(P));
    size_t diffs = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (tiled[i / width]) diffs += std::memcmp(&got[i], &base[i], sizeof(float)) != 0;
    }
    EXPECT_EQ(diffs, 0u) << "partition " << P << " changed tiled rows";
  }
}

TEST_F(CudaPrefill, BatchEqualsPerSequenceBitwise) {
  const Problem p = prefill_problem({28, 4, 128, 16}, 21);
  const auto batch = run_attention(*gpu_, p, KvDtype::kBF16, 0);
  const size_t row = size_t(p.sh.Hq) * p.sh.D;
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    const auto alone = run_attention(*gpu_, single(p, s), KvDtype::kBF16, 0);
    const std::vector<float> part(batch.begin() + ptrdiff_t(p.qsl[s] * row),
                                  batch.begin() + ptrdiff_t(p.qsl[s + 1] * row));
    expect_bitwise(alone, part, "seq " + std::to_string(s));
  }
}

TEST_F(CudaPrefill, IndirectTableRowsEqualDenseBitwise) {
  for (int BS : {8, 16, 32}) {
    const Problem p = prefill_problem({8, 2, 64, BS}, uint32_t(300 + BS));
    const IndirectTables it = indirect_tables(p, uint32_t(BS));
    expect_bitwise(run_attention_rows(*gpu_, p, it, KvDtype::kBF16, 0),
                   run_attention(*gpu_, p, KvDtype::kBF16, 0), "BS=" + std::to_string(BS));
  }
}

// Threshold 1: every sequence, decode rows included, goes through the tiled
// kernel (single-row tiles, tiles of one row past a full one).
TEST_F(CudaPrefill, EveryRowTiled) {
  BackendOptions o;
  o.tiled_prefill_min_rows = 1;
  auto all = cuda::CudaBackend::create(o);
  ASSERT_TRUE(all.ok()) << all.error().message;
  for (int D : {64, 128}) {
    const Problem p = prefill_problem({8, 2, D, 16}, uint32_t(D));
    expect_close(run_attention(**all, p, KvDtype::kBF16, 0),
                 run_attention(*cpu_, p, KvDtype::kF32, 0), kTiledAtol, kTiledRtol,
                 "all tiled, D=" + std::to_string(D));
  }
  EXPECT_TRUE((*all)->check().ok());
}

TEST_F(CudaPrefill, SupportedShapes) {
  PagedAttentionParams a;
  a.layout = KvCacheLayout{2, 128, 16, 10};
  a.num_q_heads = 8;
  a.dtype = KvDtype::kBF16;
  EXPECT_TRUE(cuda::tiled_prefill_supported(a));
  a.dtype = KvDtype::kF32;
  EXPECT_FALSE(cuda::tiled_prefill_supported(a)) << "F32 caches take the row kernel";
  a.dtype = KvDtype::kBF16;
  a.layout.head_dim = 96;
  EXPECT_FALSE(cuda::tiled_prefill_supported(a));
  EXPECT_FALSE(cuda::launch_tiled_prefill(a, 16, gpu_->stream()).ok());
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaPrefill, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
