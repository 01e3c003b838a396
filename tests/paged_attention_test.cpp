// Paged attention (CPU backend) against a naive contiguous attention in fp64
// over each sequence's logical K/V, with the gpu-notes §8 generator: context
// lengths {1, BS-1, BS, BS+1, 97, 1000}, block sizes 8/16/32, head dims 64/128,
// GQA groups 1/2/3/4, shuffled physical block ids, NaN poison in every unused
// slot and block and behind every padded block-table entry, chunked prefill
// mixed with decode rows and padding rows, split-K, batch vs one-at-a-time.
// Then every kernel variant (cpu::AttnIsa) this CPU runs, called directly:
// against the fp64 reference, bitwise batch/tile/thread independence, the
// exp's error bound, exact zero weights for masked keys and key-less rows,
// and AVX2 == AVX-512 bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/paged_attention_kernels.hpp"
#include "gpu/cpu/thread_pool.hpp"
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

// ---- the kernel variants, one by one ------------------------------------------

using cpu::AttnIsa;

// Runs p through cpu::paged_attention with variant `isa` on `threads` threads
// (host memory, out poisoned with NaN); ctx_override replaces context_lens.
std::vector<float> run_isa(const Problem& p, int partition, AttnIsa isa, size_t threads,
                           const std::vector<int32_t>* ctx_override = nullptr) {
  std::vector<float> out(p.q.size(), kNaN);
  const std::vector<int32_t>& ctx = ctx_override ? *ctx_override : p.ctx;
  const AttentionIo io{p.q.data(), p.kc.data(), p.vc.data(), p.tables.data(),
                       p.qsl.data(), ctx.data(), out.data()};
  cpu::ThreadPool pool(threads);
  cpu::AttentionScratch scratch;
  cpu::paged_attention(attention_params(p, io, KvDtype::kF32, partition), pool, scratch, isa);
  return out;
}

class AttnVariant : public ::testing::TestWithParam<AttnIsa> {
 protected:
  void SetUp() override {
    const std::string why = cpu::attn_isa_unsupported_reason(GetParam());
    if (!why.empty()) GTEST_SKIP() << cpu::attn_isa_name(GetParam()) << ": " << why;
  }
  AttnIsa isa() const { return GetParam(); }
  const cpu::attn::Kernels& kernels() const {
    switch (GetParam()) {
      case AttnIsa::kAvx2: return cpu::attn::avx2_kernels();
      case AttnIsa::kAvx512: return cpu::attn::avx512_kernels();
      case AttnIsa::kPortable: break;
    }
    return cpu::attn::portable_kernels();
  }
};

// Decode rows around block boundaries (partial last blocks) and prefill
// chunks, GQA 1/3/4, block sizes 16 and 32, unsplit and split (partitions
// aligned and not aligned to the block), against fp64 within kAttnAtol +
// kAttnRtol |ref| (2e-5 + 1e-4 |ref|).
TEST_P(AttnVariant, MatchesDoubleReference) {
  for (int BS : {16, 32}) {
    for (int G : {1, 3, 4}) {
      for (int D : {64, 128}) {
        const Problem p =
            make_problem({3 * G, 3, D, BS}, mixed_seqs(BS), 2, uint32_t(7 * BS + G + D));
        const auto ref = reference(p);
        for (int partition : {0, 48, 64}) {
          expect_attention_close(run_isa(p, partition, isa(), 3), ref,
                                 std::string(cpu::attn_isa_name(isa())) + " BS=" +
                                     std::to_string(BS) + " G=" + std::to_string(G) + " D=" +
                                     std::to_string(D) + " P=" + std::to_string(partition));
        }
      }
    }
  }
}

// The row as it is computed inside a prefill tile, alone, and as a decode
// row over the same keys (q_len 1, ctx = its kv_end): the same bits; likewise
// the batch against one sequence at a time and 1 against 4 threads.
TEST_P(AttnVariant, BatchTileAndThreadIndependentBitwise) {
  for (int BS : {16, 32}) {
    const Problem all = make_problem({9, 3, 64, BS}, mixed_seqs(BS), 1, uint32_t(3 + BS));
    const size_t row_elems = size_t(all.sh.Hq) * all.sh.D;
    for (int partition : {0, 64}) {
      const auto batch = run_isa(all, partition, isa(), 3);
      expect_bitwise(run_isa(all, partition, isa(), 1), batch, "1 vs 3 threads");
      for (size_t s = 0; s < all.seqs.size(); ++s) {
        const Problem one = single(all, s);
        const auto alone = run_isa(one, partition, isa(), 4);
        const std::vector<float> part(batch.begin() + ptrdiff_t(all.qsl[s] * row_elems),
                                      batch.begin() + ptrdiff_t(all.qsl[s + 1] * row_elems));
        expect_bitwise(alone, part, "sequence " + std::to_string(s));
        for (int i = 0; i < one.seqs[0].q_len; i += 7) {  // rows of the prefill tiles
          Problem dec = one;
          dec.seqs = {{one.ctx[0] - one.seqs[0].q_len + i + 1, 1}};
          dec.ctx = {dec.seqs[0].ctx};
          dec.T = 1;
          dec.qsl = {0, 1};
          dec.q.assign(one.q.begin() + ptrdiff_t(i * row_elems),
                       one.q.begin() + ptrdiff_t((i + 1) * row_elems));
          const std::vector<float> row(alone.begin() + ptrdiff_t(i * row_elems),
                                       alone.begin() + ptrdiff_t((i + 1) * row_elems));
          expect_bitwise(run_isa(dec, partition, isa(), 2), row,
                         "seq " + std::to_string(s) + " row " + std::to_string(i) + " as decode");
        }
      }
    }
  }
}

// A sequence with no key (context 0) gets output 0, split or not, next to
// sequences that have keys.
TEST_P(AttnVariant, KeylessRowIsZero) {
  const Problem p = make_problem({6, 2, 64, 16}, {{40, 1}, {17, 1}, {300, 1}}, 0, 11);
  const std::vector<int32_t> ctx = {40, 0, 300};
  for (int partition : {0, 64}) {
    const auto out = run_isa(p, partition, isa(), 2, &ctx);
    const size_t row = size_t(p.sh.Hq) * p.sh.D;
    for (size_t i = row; i < 2 * row; ++i) ASSERT_EQ(out[i], 0.0f) << "element " << i;
    for (size_t i = 0; i < row; ++i) ASSERT_TRUE(std::isfinite(out[i])) << "element " << i;
  }
}

// exp over [-87, 0] within 3e-7 relative (~2.5 ulp) of the exact value;
// exp(0) == 1, exp(-inf) == 0 and, for the SIMD variants' polynomial, exp of
// NaN or x < kExpMin exactly 0.
TEST_P(AttnVariant, ExpErrorBound) {
  float x[16], y[16];
  double worst = 0.0;
  constexpr int kPoints = 1 << 20;
  for (int i = 0; i < kPoints; i += 16) {
    for (int l = 0; l < 16; ++l) x[l] = -87.0f * float(i + l) / float(kPoints - 1);
    kernels().exp16(x, y);
    for (int l = 0; l < 16; ++l) {
      const double e = std::exp(double(x[l]));
      worst = std::max(worst, std::abs(double(y[l]) - e) / e);
    }
  }
  EXPECT_LE(worst, 3e-7) << "worst relative error";
  std::printf("[ note ] %s exp: worst relative error %.3g over [-87, 0]\n",
              cpu::attn_isa_name(isa()), worst);
  const float special[16] = {0.0f, -0.0f, -std::numeric_limits<float>::infinity(), -1e-30f,
                             kNaN, -87.5f, -100.0f, -1e30f, -88.0f, 0, 0, 0, 0, 0, 0, 0};
  kernels().exp16(special, y);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 1.0f);
  if (isa() == AttnIsa::kPortable) return;  // std::exp: NaN stays NaN, tiny values stay tiny
  for (int l = 4; l < 9; ++l) EXPECT_EQ(y[l], 0.0f) << "lane " << l;
}

// The softmax step: -inf scores (masked or absent keys) get weight exactly 0,
// the largest score exactly 1; the running sum and max follow.
TEST_P(AttnVariant, MaskedKeysGetExactlyZeroWeight) {
  alignas(64) float s[2 * cpu::attn::kChunk];
  for (int l = 0; l < 16; ++l) {
    s[l] = l < 5 ? 0.5f * float(l) : -std::numeric_limits<float>::infinity();
    s[16 + l] = l == 3 ? 1.0f : -std::numeric_limits<float>::infinity();
  }
  float m[2] = {-std::numeric_limits<float>::infinity(), 4.0f}, l[2] = {0.0f, 2.0f}, alpha[2];
  kernels().weights(s, 2, m, l, alpha);
  for (int j = 5; j < 16; ++j) EXPECT_EQ(s[j], 0.0f) << "head 0 key " << j;
  EXPECT_EQ(s[4], 1.0f);
  EXPECT_EQ(alpha[0], 0.0f);
  EXPECT_EQ(m[0], 2.0f);
  for (int j = 0; j < 16; ++j) {
    if (j != 3) {
      EXPECT_EQ(s[16 + j], 0.0f) << "head 1 key " << j;
    }
  }
  EXPECT_NEAR(s[19], std::exp(-3.0), 1e-6);  // below the running max 4: no rescale
  EXPECT_EQ(alpha[1], 1.0f);
  EXPECT_EQ(m[1], 4.0f);
  EXPECT_NEAR(l[1], 2.0 + std::exp(-3.0), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Variants, AttnVariant, ::testing::ValuesIn(cpu::kAllAttnIsas),
                         [](const ::testing::TestParamInfo<AttnIsa>& info) {
                           return std::string(cpu::attn_isa_name(info.param));
                         });

// The AVX2 variant is the AVX-512 one's arithmetic on 8-float vectors: the
// same bits (so AVX2-only and AVX-512 machines agree), decode and prefill
// (AVX-512's transposed-key path included), split or not.
TEST(AttnVariants, Avx2EqualsAvx512Bitwise) {
  for (AttnIsa isa : {AttnIsa::kAvx2, AttnIsa::kAvx512}) {
    const std::string why = cpu::attn_isa_unsupported_reason(isa);
    if (!why.empty()) GTEST_SKIP() << cpu::attn_isa_name(isa) << ": " << why;
  }
  for (int BS : {16, 32}) {
    for (int G : {1, 3, 4}) {
      for (int D : {64, 128}) {
        const Problem p =
            make_problem({3 * G, 3, D, BS}, mixed_seqs(BS), 1, uint32_t(11 * BS + G + D));
        for (int partition : {0, 48}) {
          expect_bitwise(run_isa(p, partition, AttnIsa::kAvx2, 2),
                         run_isa(p, partition, AttnIsa::kAvx512, 2),
                         "BS=" + std::to_string(BS) + " G=" + std::to_string(G) + " D=" +
                             std::to_string(D) + " P=" + std::to_string(partition));
        }
      }
    }
  }
}

TEST(AttnIsaChoice, EnvForcesASupportedVariantOnly) {
  std::string why;
  const AttnIsa best = cpu::choose_attn_isa(nullptr, &why);
  EXPECT_EQ(why, "best supported");
  EXPECT_TRUE(cpu::attn_isa_unsupported_reason(best).empty());
  EXPECT_EQ(cpu::choose_attn_isa("portable", &why), AttnIsa::kPortable);
  EXPECT_EQ(why, "forced by PAGODA_CPU_ATTN_ISA");
  EXPECT_EQ(cpu::choose_attn_isa("sse9", &why), best);
  EXPECT_NE(why.find("is not portable, avx2 or avx512"), std::string::npos) << why;
  for (AttnIsa isa : cpu::kAllAttnIsas) {
    const AttnIsa got = cpu::choose_attn_isa(cpu::attn_isa_name(isa));
    EXPECT_EQ(got, cpu::attn_isa_unsupported_reason(isa).empty() ? isa : best);
  }
}

}  // namespace
}  // namespace pagoda::gpu::test
