// Gemma's attention options in the CPU paged attention (PagedAttentionParams::
// softcap and sliding_window), for every kernel variant this CPU runs: against
// the fp64 reference (tests/attention_problem.hpp) with windows shorter than,
// equal to and longer than a block, on decode rows and prefill chunks,
// unsplit and split-K; blocks wholly before every row's window are poisoned
// with NaN and must not be read; a row computed in a prefill tile equals the
// same row alone as a decode row, bit for bit; the soft-cap kernels' tanh
// against std::tanh.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/paged_attention_kernels.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "tests/attention_problem.hpp"

namespace pagoda::gpu::test {
namespace {

using cpu::AttnIsa;

// p through cpu::paged_attention with variant `isa` (out poisoned with NaN).
std::vector<float> run_gemma(const Problem& p, int partition, AttnIsa isa, float softcap,
                             int window, size_t threads = 3) {
  std::vector<float> out(p.q.size(), kNaN);
  const AttentionIo io{p.q.data(), p.kc.data(), p.vc.data(), p.tables.data(),
                       p.qsl.data(), p.ctx.data(), out.data()};
  PagedAttentionParams a = attention_params(p, io, KvDtype::kF32, partition);
  a.softcap = softcap;
  a.sliding_window = window;
  cpu::ThreadPool pool(threads);
  cpu::AttentionScratch scratch;
  cpu::paged_attention(a, pool, scratch, isa);
  return out;
}

// Overwrites with NaN every cache block of sequence s whose keys all lie
// before the window of each of its rows (none of them may be read).
void poison_before_window(Problem& p, size_t s, int window) {
  const int first_row_end = p.seqs[s].ctx - p.seqs[s].q_len + 1;  // kv_end of the first row
  const int first_key = std::max(0, first_row_end - window);
  const size_t per_block = size_t(p.sh.Hk) * p.sh.BS * p.sh.D;
  for (int b = 0; (b + 1) * p.sh.BS <= first_key; ++b) {
    const size_t blk = size_t(p.tables[s * size_t(p.max_blocks) + size_t(b)]);
    std::fill_n(p.kc.begin() + ptrdiff_t(blk * per_block), per_block, kNaN);
    std::fill_n(p.vc.begin() + ptrdiff_t(blk * per_block), per_block, kNaN);
  }
}

class GemmaAttn : public ::testing::TestWithParam<AttnIsa> {
 protected:
  void SetUp() override {
    const std::string why = cpu::attn_isa_unsupported_reason(GetParam());
    if (!why.empty()) GTEST_SKIP() << cpu::attn_isa_name(GetParam()) << ": " << why;
  }
};

TEST_P(GemmaAttn, WindowAndSoftcapMatchDoubleReference) {
  for (int BS : {8, 16}) {
    for (int window : {1, 5, 16, 40}) {
      for (float cap : {0.0f, 3.0f}) {
        Problem p = make_problem({6, 2, 64, BS}, mixed_seqs(BS), 2, uint32_t(BS + window));
        for (size_t s = 0; s < p.seqs.size(); ++s) poison_before_window(p, s, window);
        const auto ref = reference(p, cap, window);
        for (int partition : {0, 64}) {
          expect_close(run_gemma(p, partition, GetParam(), cap, window), ref, kAttnAtol, kAttnRtol,
                       std::string(cpu::attn_isa_name(GetParam())) + " BS=" + std::to_string(BS) +
                           " window=" + std::to_string(window) + " cap=" + std::to_string(cap) +
                           " P=" + std::to_string(partition));
        }
      }
    }
  }
}

// The options change the result (the reference without them is far off), so
// the test above would see them ignored.
TEST_P(GemmaAttn, OptionsMatter) {
  const Problem p = make_problem({6, 2, 64, 16}, mixed_seqs(16), 0, 11u);
  const auto got = run_gemma(p, 0, GetParam(), 3.0f, 5);
  double off_cap = 0, off_window = 0;
  const auto no_cap = reference(p, 0.0, 5), no_window = reference(p, 3.0, 0);
  for (size_t i = 0; i < got.size(); ++i) {
    off_cap = std::max(off_cap, std::fabs(got[i] - no_cap[i]));
    off_window = std::max(off_window, std::fabs(got[i] - no_window[i]));
  }
  EXPECT_GT(off_cap, 1e-2);
  EXPECT_GT(off_window, 1e-2);
}

// A prefill row equals the same row run alone as a decode row (same keys),
// with a window that starts inside a chunk and inside a block.
TEST_P(GemmaAttn, TileRowEqualsDecodeRowBitwise) {
  const Problem one = make_problem({6, 2, 64, 16}, {{90, 40}}, 0, 5u);
  const size_t row_elems = size_t(one.sh.Hq) * one.sh.D;
  for (int window : {7, 21}) {
    const auto tile = run_gemma(one, 0, GetParam(), 3.0f, window);
    for (int i = 0; i < 40; i += 3) {
      Problem dec = one;
      dec.seqs = {{one.ctx[0] - 40 + i + 1, 1}};
      dec.ctx = {dec.seqs[0].ctx};
      dec.T = 1;
      dec.qsl = {0, 1};
      dec.q.assign(one.q.begin() + ptrdiff_t(i * row_elems), one.q.begin() + ptrdiff_t((i + 1) * row_elems));
      const auto alone = run_gemma(dec, 0, GetParam(), 3.0f, window, 1);
      for (size_t e = 0; e < row_elems; ++e) {
        ASSERT_EQ(alone[e], tile[size_t(i) * row_elems + e]) << "window " << window << " row " << i;
      }
    }
  }
}

// The variant's softcap kernel against cap * std::tanh(s / cap) on scores
// from -200 to 200 (and entries past n left at -inf).
TEST_P(GemmaAttn, SoftcapKernelAccuracy) {
  const cpu::attn::Kernels& k = cpu::attn::kernels_for(GetParam(), 64);
  const float cap = 30.0f;
  double worst = 0;
  for (int base = -200 * 64; base < 200 * 64; base += cpu::attn::kChunk) {
    alignas(64) float s[cpu::attn::kChunk];
    for (int l = 0; l < cpu::attn::kChunk; ++l) s[l] = float(base + l) / 64.0f;
    s[15] = -std::numeric_limits<float>::infinity();
    float orig[cpu::attn::kChunk];
    std::copy(s, s + cpu::attn::kChunk, orig);
    k.softcap(s, 1, 15, cap);
    for (int l = 0; l < 15; ++l) {
      worst = std::max(worst, std::fabs(double(s[l]) - cap * std::tanh(double(orig[l]) / cap)));
    }
    EXPECT_EQ(s[15], -std::numeric_limits<float>::infinity());
  }
  EXPECT_LE(worst, 1e-5) << cpu::attn_isa_name(GetParam());  // cap 30: ~3 ulp of 30
}

INSTANTIATE_TEST_SUITE_P(Variants, GemmaAttn, ::testing::ValuesIn(cpu::kAllAttnIsas),
                         [](const ::testing::TestParamInfo<AttnIsa>& i) {
                           return std::string(cpu::attn_isa_name(i.param));
                         });

}  // namespace
}  // namespace pagoda::gpu::test
