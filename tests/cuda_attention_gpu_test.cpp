// CUDA paged attention against the CPU twin (and an fp64 reference) with the
// gpu-notes §8 generator (tests/attention_problem.hpp): the matrix
// D {64, 128} x GQA group {1, 2, 3, 4, 8} x block size {8, 16, 32} x cache
// {F32, BF16} over decode rows around block boundaries, a 1000-token context
// and chunked prefill; split-K sizes; batch == per-sequence bitwise; groups
// above 8 (chunked CTAs); 64 decode sequences; cache offsets past 2^31
// elements; block-table rows through block_table_rows (bitwise the dense
// layout); and an end-to-end prefill-then-decode through kv_cache_write.
// BF16 runs use bf16-representable K/V, so both sides see the same values and
// the fp32 tolerance applies. Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include "gpu/cuda/cuda_ops.cuh"
#include "tests/attention_problem.hpp"
#include "tests/attention_rows.hpp"
#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaAttention = CudaTest;

std::string dtype_name(KvDtype d) { return d == KvDtype::kF32 ? "f32" : "bf16"; }

TEST_F(CudaAttention, MatrixAgainstCpuTwinAndFp64) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
    for (int BS : {8, 16, 32}) {
      for (int D : {64, 128}) {
        for (int G : {1, 2, 3, 4, 8}) {
          const int Hk = G == 3 ? 3 : 2;  // G = 3: SmolLM2's 9 q heads over 3 kv heads
          const Problem p = make_problem({G * Hk, Hk, D, BS}, mixed_seqs(BS), 3,
                                         uint32_t(BS * 1000 + D * 10 + G), Values::kBf16);
          const std::string label = dtype_name(dtype) + " BS=" + std::to_string(BS) +
                                    " D=" + std::to_string(D) + " G=" + std::to_string(G);
          const auto got = run_attention(*gpu_, p, dtype, 0);
          const auto want = run_attention(*cpu_, p, KvDtype::kF32, 0);
          expect_close(got, want, kAttnAtol, kAttnRtol, label + " vs cpu");
          if (BS == 16) expect_close(got, reference(p), kAttnAtol, kAttnRtol, label + " vs fp64");
          const size_t pad_begin = size_t(p.qsl.back()) * p.sh.Hq * D;
          for (size_t i = pad_begin; i < got.size(); ++i) {
            if (got[i] != 0.0f) {
              ADD_FAILURE() << label << ": padding output " << i << " = " << got[i];
              break;
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaAttention, SplitKPartitionSizes) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
    const Problem p = make_problem({8, 2, 128, 16}, mixed_seqs(16), 2, 99, Values::kBf16);
    const auto want = run_attention(*cpu_, p, KvDtype::kF32, 0);
    for (int P : {0, 8, 40, 64, 512, 4096, -1}) {
      expect_close(run_attention(*gpu_, p, dtype, P), want, kAttnAtol, kAttnRtol,
                   dtype_name(dtype) + " partition " + std::to_string(P));
    }
  }
}

TEST_F(CudaAttention, AutoSplitsFewLongRows) {
  const Problem p = make_problem({9, 3, 64, 16}, {{1000, 1}, {700, 1}}, 0, 5, Values::kBf16);
  PagedAttentionParams a;
  a.layout = KvCacheLayout{3, 64, 16, p.num_blocks};
  a.num_q_heads = 9;
  a.partition_size = -1;
  a.meta.num_tokens = p.T;
  a.meta.max_context_len = 1000;
  EXPECT_GT(cuda::attention_partition_size(a, gpu_->sm_count()), 0) << "2 rows x 3 kv heads";
  expect_close(run_attention(*gpu_, p, KvDtype::kBF16, -1),
               run_attention(*cpu_, p, KvDtype::kF32, 0), kAttnAtol, kAttnRtol, "auto split");
}

TEST_F(CudaAttention, BatchEqualsPerSequenceBitwise) {
  for (int P : {0, 64}) {
    const Problem p = make_problem({9, 3, 64, 16}, mixed_seqs(16), 2, 1234, Values::kBf16);
    const auto batch = run_attention(*gpu_, p, KvDtype::kBF16, P);
    const size_t row = size_t(p.sh.Hq) * p.sh.D;
    for (size_t s = 0; s < p.seqs.size(); ++s) {
      const auto alone = run_attention(*gpu_, single(p, s), KvDtype::kBF16, P);
      const std::vector<float> part(batch.begin() + ptrdiff_t(p.qsl[s] * row),
                                    batch.begin() + ptrdiff_t(p.qsl[s + 1] * row));
      expect_bitwise(alone, part, "P=" + std::to_string(P) + " seq " + std::to_string(s));
    }
  }
}

TEST_F(CudaAttention, GroupsAboveEight) {
  for (Shape sh : {Shape{24, 2, 128, 16}, Shape{16, 1, 128, 16}, Shape{12, 2, 64, 32},
                   Shape{14, 2, 128, 8}}) {
    const Problem p =
        make_problem(sh, mixed_seqs(sh.BS), 1, uint32_t(sh.Hq * 31 + sh.Hk), Values::kBf16);
    expect_close(run_attention(*gpu_, p, KvDtype::kBF16, 0),
                 run_attention(*cpu_, p, KvDtype::kF32, 0), kAttnAtol, kAttnRtol,
                 "Hq=" + std::to_string(sh.Hq) + " Hk=" + std::to_string(sh.Hk));
  }
}

TEST_F(CudaAttention, SixtyFourDecodeSequences) {
  std::mt19937 rng(77);
  std::vector<Seq> seqs;
  for (int s = 0; s < 64; ++s) seqs.push_back({1 + int(rng() % 600), 1});
  const Problem p = make_problem({32, 8, 128, 16}, seqs, 0, 8, Values::kBf16);
  const auto want = run_attention(*cpu_, p, KvDtype::kF32, 0);
  expect_close(run_attention(*gpu_, p, KvDtype::kBF16, 0), want, kAttnAtol, kAttnRtol, "64 seqs");
  expect_close(run_attention(*gpu_, p, KvDtype::kBF16, -1), want, kAttnAtol, kAttnRtol,
               "64 seqs auto");
}

// block_table_rows: the same tables at shuffled rows of a wider, taller table
// (the rest NaN blocks) give the dense layout's output bit for bit.
TEST_F(CudaAttention, IndirectTableRowsEqualDenseBitwise) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16}) {
    for (int BS : {8, 16, 32}) {
      const Problem p = make_problem({9, 3, 64, BS}, mixed_seqs(BS), 2, uint32_t(70 + BS),
                                     Values::kBf16);
      const IndirectTables it = indirect_tables(p, uint32_t(BS));
      for (int P : {0, 64, -1}) {
        const std::string label =
            dtype_name(dtype) + " BS=" + std::to_string(BS) + " P=" + std::to_string(P);
        expect_bitwise(run_attention_rows(*gpu_, p, it, dtype, P),
                       run_attention(*gpu_, p, dtype, P), label);
      }
    }
  }
}

// Physical blocks past 2^31 elements: the compact problem's blocks are moved
// to ids >= 2^31 / block_stride in a ~8.6 GB BF16 cache.
TEST_F(CudaAttention, CacheOffsetsPastTwoToThe31) {
  const Shape sh{16, 8, 128, 16};
  const Problem p = make_problem(sh, {{300, 1}, {300, 20}, {45, 1}}, 0, 21, Values::kBf16);
  const int64_t block_elems = int64_t{sh.Hk} * sh.BS * sh.D;
  const int64_t first = (int64_t{1} << 31) / block_elems;
  const int64_t big_blocks = first + p.num_blocks;
  auto kb = gpu_->allocate(size_t(big_blocks * block_elems * 2));
  auto vb = gpu_->allocate(size_t(big_blocks * block_elems * 2));
  if (!kb || !vb) GTEST_SKIP() << "cannot allocate 2 x " << big_blocks * block_elems * 2 << " bytes";
  const auto k16 = to_bf16(p.kc), v16 = to_bf16(p.vc);
  const size_t block_bytes = size_t(block_elems) * 2;
  for (int64_t b = 0; b < p.num_blocks; ++b) {  // compact block b -> first + b
    const size_t at = size_t(first + b) * block_bytes;
    ASSERT_TRUE(gpu_->upload(*kb, at, &k16[size_t(b * block_elems)], block_bytes).ok());
    ASSERT_TRUE(gpu_->upload(*vb, at, &v16[size_t(b * block_elems)], block_bytes).ok());
  }
  std::vector<int32_t> tables = p.tables;
  for (auto& id : tables) id += int32_t(first);
  DeviceBuffer q = put(*gpu_, p.q), tb = put(*gpu_, tables), qsl = put(*gpu_, p.qsl),
               ctx = put(*gpu_, p.ctx), out = put(*gpu_, std::vector<float>(p.q.size(), kNaN));
  const AttentionIo io{q.as<const float>(),     kb->data(),
                       vb->data(),              tb.as<const int32_t>(),
                       qsl.as<const int32_t>(), ctx.as<const int32_t>(),
                       out.as<float>()};
  PagedAttentionParams a = attention_params(p, io, KvDtype::kBF16, 0);
  a.layout.num_blocks = big_blocks;
  for (int P : {0, 128}) {
    a.partition_size = P;
    gpu_->paged_attention(a);
    expect_close(get<float>(*gpu_, out, p.q.size()), run_attention(*cpu_, p, KvDtype::kF32, 0),
                 kAttnAtol, kAttnRtol, "offsets past 2^31, P=" + std::to_string(P));
  }
}

// Two sequences through kv_cache_write + paged_attention per step: prefill
// chunks (20 and 9 tokens), then a 17-token chunk beside a decode, then two
// decodes. The CPU twin runs the same steps on an F32 cache; K/V values are
// bf16-representable so that both caches hold the same numbers.
struct Step {
  std::vector<int> new_tokens;  // per sequence
};

std::vector<std::vector<float>> run_steps(Backend& be, KvDtype dtype, const std::vector<Step>& steps) {
  const int Hq = 9, Hk = 3, D = 64, BS = 8;
  auto cache = be.create_kv_cache(KvCacheSpec{1, Hk, D, BS, dtype}, 12);
  EXPECT_TRUE(cache.ok());
  const std::vector<std::vector<int32_t>> table = {{5, 2, 7, 11, 9}, {0, 3, 10, 1, 4}};
  std::vector<int32_t> flat_table;
  for (const auto& t : table) flat_table.insert(flat_table.end(), t.begin(), t.end());
  DeviceBuffer tb = put(be, flat_table);
  std::vector<int> ctx = {0, 0};
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> outs;
  for (const Step& st : steps) {
    std::vector<int32_t> qsl = {0}, ctx_after;
    std::vector<int64_t> slots;
    for (int s = 0; s < 2; ++s) {
      for (int i = 0; i < st.new_tokens[size_t(s)]; ++i) {
        const int pos = ctx[size_t(s)] + i;
        slots.push_back(int64_t{table[size_t(s)][size_t(pos / BS)]} * BS + pos % BS);
      }
      ctx[size_t(s)] += st.new_tokens[size_t(s)];
      qsl.push_back(qsl.back() + st.new_tokens[size_t(s)]);
      ctx_after.push_back(ctx[size_t(s)]);
    }
    const int T = qsl.back();
    std::vector<float> qkv(size_t(T) * (Hq + 2 * Hk) * D);
    for (auto& x : qkv) x = round_bf16(u(rng));
    DeviceBuffer xb = put(be, qkv), sb = put(be, slots), qb = put(be, qsl), cb = put(be, ctx_after);
    DeviceBuffer ob = put(be, std::vector<float>(size_t(T) * Hq * D, kNaN));
    const int64_t stride = int64_t{Hq + 2 * Hk} * D;
    KvCacheWriteParams w;
    w.k = xb.as<const float>() + Hq * D;
    w.v = xb.as<const float>() + (Hq + Hk) * D;
    w.k_stride = w.v_stride = stride;
    w.k_cache = cache->layer(0).k;
    w.v_cache = cache->layer(0).v;
    w.layout = cache->layout();
    w.dtype = dtype;
    w.slot_mapping = sb.as<const int64_t>();
    w.num_tokens = T;
    be.kv_cache_write(w);
    PagedAttentionParams a;
    a.q = xb.as<const float>();
    a.q_stride = stride;
    a.out = ob.as<float>();
    a.k_cache = cache->layer(0).k;
    a.v_cache = cache->layer(0).v;
    a.layout = cache->layout();
    a.dtype = dtype;
    a.num_q_heads = Hq;
    a.scale = 0.125f;
    a.meta = {T, 2, qb.as<const int32_t>(), cb.as<const int32_t>(), tb.as<const int32_t>(), 5,
              std::max(ctx[0], ctx[1])};
    be.paged_attention(a);
    outs.push_back(get<float>(be, ob, size_t(T) * Hq * D));
  }
  return outs;
}

TEST_F(CudaAttention, EndToEndChunkedPrefillThenDecode) {
  const std::vector<Step> steps = {{{20, 9}}, {{17, 1}}, {{1, 1}}, {{1, 1}}};
  const auto want = run_steps(*cpu_, KvDtype::kF32, steps);
  const auto got = run_steps(*gpu_, KvDtype::kBF16, steps);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    expect_close(got[i], want[i], kAttnAtol, kAttnRtol, "step " + std::to_string(i));
  }
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaAttention, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
