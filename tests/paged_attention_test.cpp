// Paged attention (CPU backend) against a naive contiguous attention in fp64
// over each sequence's logical K/V, with the gpu-notes §8 generator: context
// lengths {1, BS-1, BS, BS+1, 97, 1000}, block sizes 8/16/32, head dims 64/128,
// GQA groups 1/2/3/4, shuffled physical block ids, NaN poison in every unused
// slot and block and behind every padded block-table entry, chunked prefill
// mixed with decode rows and padding rows, split-K, batch vs one-at-a-time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "tests/attention_problem.hpp"
#include "tests/attention_rows.hpp"

namespace pagoda::gpu::test {
namespace {

std::unique_ptr<Backend> backend(size_t threads) {
  return std::move(make_backend(BackendKind::kCpu, BackendOptions{0, threads})).value();
}

// Runs p on the CPU backend `be` with an F32 cache.
std::vector<float> run(Backend& be, const Problem& p, int partition) {
  return run_attention(be, p, KvDtype::kF32, partition);
}

// |got - ref| <= 2e-5 + 1e-4 |ref| everywhere (fp32 online softmax vs fp64).
void expect_attention_close(const std::vector<float>& got, const std::vector<double>& ref,
                            const std::string& label) {
  expect_close(got, ref, kAttnAtol, kAttnRtol, label);
}

// Chunked prefill 17 of 17, 5 of 97, 64 of 300, with decode rows between.
std::vector<Seq> chunks_between_decodes() {
  return {{17, 17}, {1000, 1}, {97, 5}, {16, 1}, {300, 64}, {1, 1}};
}

TEST(PagedAttention, DecodeMatrixAgainstNaive) {
  auto be = backend(3);
  for (int BS : {8, 16, 32}) {
    for (int D : {64, 128}) {
      for (int G : {1, 2, 3, 4}) {
        const int Hk = G == 3 ? 3 : 2;  // G = 3: SmolLM2's 9 q heads over 3 kv heads
        Problem p = make_problem({G * Hk, Hk, D, BS}, decode_seqs(BS), 0, uint32_t(BS * D + G));
        const std::string label = "BS=" + std::to_string(BS) + " D=" + std::to_string(D) +
                                  " G=" + std::to_string(G);
        expect_attention_close(run(*be, p, 0), reference(p), label);
      }
    }
  }
}

TEST(PagedAttention, ShuffledBlockIdsGiveIdenticalResults) {
  auto be = backend(2);
  for (int BS : {8, 16, 32}) {
    Problem a = make_problem({8, 2, 64, BS}, decode_seqs(BS), 0, 77, Values::kF32,
                             BlockIds::kInOrder);
    Problem b = make_problem({8, 2, 64, BS}, decode_seqs(BS), 0, 77);
    ASSERT_NE(a.tables, b.tables);
    EXPECT_EQ(run(*be, a, 0), run(*be, b, 0)) << "BS=" << BS;
    EXPECT_EQ(run(*be, a, 64), run(*be, b, 64)) << "split, BS=" << BS;
  }
}

TEST(PagedAttention, ChunkedPrefillMixedWithDecodeAndPadding) {
  auto be = backend(3);
  for (int BS : {8, 16, 32}) {
    for (int G : {1, 3}) {
      Problem p =
          make_problem({3 * G, 3, 64, BS}, chunks_between_decodes(), 3, uint32_t(100 + BS + G));
      auto got = run(*be, p, 0);
      expect_attention_close(got, reference(p),
                             "BS=" + std::to_string(BS) + " G=" + std::to_string(G));
      const size_t first_pad = size_t(p.qsl.back()) * p.sh.Hq * p.sh.D;
      for (size_t i = first_pad; i < got.size(); ++i) ASSERT_EQ(got[i], 0.0f) << "padding row";
    }
  }
}

TEST(PagedAttention, BatchEqualsOneSequenceAtATimeBitwise) {
  auto be = backend(3);
  Problem all = make_problem({9, 3, 64, 16}, chunks_between_decodes(), 2, 5);
  for (int partition : {0, 64}) {
    auto batch = run(*be, all, partition);
    for (size_t s = 0; s < all.seqs.size(); ++s) {
      // Same caches and physical ids, only sequence s in the step.
      const size_t row = size_t(all.qsl[s]) * all.sh.Hq * all.sh.D;
      auto alone = run(*be, single(all, s), partition);
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + ptrdiff_t(row)))
          << "sequence " << s << " partition " << partition;
    }
  }
}

TEST(PagedAttention, SplitKMatchesUnsplit) {
  auto be = backend(3);
  Problem p = make_problem({12, 4, 128, 16}, chunks_between_decodes(), 1, 9);
  const auto ref = reference(p);
  const auto unsplit = run(*be, p, 0);
  for (int partition : {16, 48, 64, 512, -1}) {
    auto split = run(*be, p, partition);
    expect_attention_close(split, ref, "partition " + std::to_string(partition));
    // Against the unsplit run: a few fp32 ulps of O(1) values.
    expect_close(split, unsplit, 1e-6, 1e-5,
                 "partition " + std::to_string(partition) + " vs unsplit");
  }
}

TEST(PagedAttention, LongSingleDecodeUsesAutoSplit) {
  auto be = backend(4);
  Problem p = make_problem({8, 2, 64, 16}, {{3000, 1}}, 0, 21);
  const AttentionIo host{p.q.data(), p.kc.data(), p.vc.data(), p.tables.data(),
                         p.qsl.data(), p.ctx.data(), nullptr};
  const PagedAttentionParams a = attention_params(p, host, KvDtype::kF32, -1);
  EXPECT_GT(cpu::auto_partition_size(a, 4), 0);  // 2 work items for 4 threads: split
  expect_attention_close(run(*be, p, -1), reference(p), "auto split");
}

TEST(PagedAttention, IndependentOfThreadCountBitwise) {
  Problem p = make_problem({9, 3, 64, 8}, chunks_between_decodes(), 0, 31);
  auto one = backend(1), four = backend(4);
  for (int partition : {0, 64}) EXPECT_EQ(run(*one, p, partition), run(*four, p, partition));
}

// End to end with the write op: a prefill chunk's K/V go in through
// kv_cache_write's slot mapping, then attention reads them via the block table.
TEST(PagedAttention, ReadsWhatKvCacheWriteWrote) {
  auto be = backend(2);
  Problem p = make_problem({6, 2, 64, 8}, {{40, 40}}, 0, 41);
  std::vector<float> k(p.kc.size(), kNaN), v(p.vc.size(), kNaN);
  std::vector<int64_t> slots(40);
  for (int j = 0; j < 40; ++j) slots[size_t(j)] = int64_t{p.tables[size_t(j / 8)]} * 8 + j % 8;
  KvCacheWriteParams w{p.klog[0].data(), p.vlog[0].data(), p.sh.Hk * p.sh.D, p.sh.Hk * p.sh.D,
                       k.data(), v.data(), KvCacheLayout{p.sh.Hk, p.sh.D, p.sh.BS, p.num_blocks},
                       KvDtype::kF32, slots.data(), 40};
  be->kv_cache_write(w);
  p.kc = k;
  p.vc = v;
  expect_attention_close(run(*be, p, 0), reference(p), "written by kv_cache_write");
}

// block_table_rows: the same tables at shuffled rows of a wider, taller table
// (the rest NaN blocks) give the dense layout's output bit for bit.
TEST(PagedAttention, IndirectTableRowsEqualDenseBitwise) {
  auto be = backend(3);
  for (int BS : {8, 16, 32}) {
    const Problem p = make_problem({9, 3, 64, BS}, chunks_between_decodes(), 2, uint32_t(60 + BS));
    const IndirectTables it = indirect_tables(p, uint32_t(BS));
    std::vector<int32_t> identity(p.seqs.size());
    std::iota(identity.begin(), identity.end(), 0);
    ASSERT_NE(it.rows, identity);
    for (int partition : {0, 64, -1}) {
      expect_bitwise(run_attention_rows(*be, p, it, KvDtype::kF32, partition),
                     run(*be, p, partition),
                     "BS=" + std::to_string(BS) + " partition " + std::to_string(partition));
    }
  }
}

}  // namespace
}  // namespace pagoda::gpu::test
