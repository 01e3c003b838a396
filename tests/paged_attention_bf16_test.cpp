// The CPU backend's bf16 KV cache (the default with quantized weights): the
// write rounds each K/V element to nearest even (gpu::fp32_to_bf16, what the
// CUDA write does), and paged attention over a bf16 cache gives, for every
// kernel variant this CPU runs, exactly the bits of the same variant over an
// fp32 cache that holds the same (bf16-representable) values, on decode rows
// and prefill tiles, unsplit and split-K, with and without a sliding window,
// for head_dims 64, 128 and 256 and block sizes 8, 16 and 32; and stays
// within the fp64 reference's bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "gpu/quant_format.hpp"
#include "tests/attention_problem.hpp"

namespace pagoda::gpu::test {
namespace {

using cpu::AttnIsa;

// p through cpu::paged_attention, its caches given in `dtype` (bf16: p's
// values rounded, exact when the problem was made with Values::kBf16).
std::vector<float> run_cpu(const Problem& p, KvDtype dtype, int partition, int window,
                           AttnIsa isa) {
  std::vector<float> out(p.q.size(), kNaN);
  const std::vector<uint16_t> kb = to_bf16(p.kc), vb = to_bf16(p.vc);
  const bool bf16 = dtype == KvDtype::kBF16;
  const AttentionIo io{p.q.data(),
                       bf16 ? static_cast<const void*>(kb.data()) : p.kc.data(),
                       bf16 ? static_cast<const void*>(vb.data()) : p.vc.data(),
                       p.tables.data(),
                       p.qsl.data(),
                       p.ctx.data(),
                       out.data()};
  PagedAttentionParams a = attention_params(p, io, dtype, partition);
  a.sliding_window = window;
  cpu::ThreadPool pool(3);
  cpu::AttentionScratch scratch;
  cpu::paged_attention(a, pool, scratch, isa);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Bf16Attn : public ::testing::TestWithParam<AttnIsa> {
 protected:
  void SetUp() override {
    const std::string why = cpu::attn_isa_unsupported_reason(GetParam());
    if (!why.empty()) GTEST_SKIP() << cpu::attn_isa_name(GetParam()) << ": " << why;
  }
};

TEST_P(Bf16Attn, EqualsTheFp32CacheOfTheSameValuesBitForBit) {
  const std::vector<Shape> shapes = {{8, 2, 64, 16}, {4, 4, 128, 8}, {6, 2, 256, 32}};
  // Decode rows, a prefill tile longer than the kernels' row tile, a chunk
  // continuing a cached prefix, a context past the split-K partition.
  const std::vector<Seq> seqs = {{37, 1}, {21, 21}, {90, 13}, {600, 1}};
  uint32_t seed = 11;
  for (const Shape& sh : shapes) {
    const Problem p = make_problem(sh, seqs, 2, seed++, Values::kBf16);
    for (int partition : {0, 256}) {
      for (int window : {0, 24}) {
        SCOPED_TRACE("D " + std::to_string(sh.D) + " BS " + std::to_string(sh.BS) + " partition " +
                     std::to_string(partition) + " window " + std::to_string(window));
        const auto want = run_cpu(p, KvDtype::kF32, partition, window, GetParam());
        const auto got = run_cpu(p, KvDtype::kBF16, partition, window, GetParam());
        EXPECT_TRUE(same_bits(got, want));
        if (window == 0) {
          const std::vector<double> ref = reference(p);
          double worst = 0.0;
          for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(got[i] - ref[i]));
          EXPECT_LT(worst, 1e-5);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, Bf16Attn,
                         ::testing::Values(AttnIsa::kPortable, AttnIsa::kAvx2, AttnIsa::kAvx512),
                         [](const auto& info) { return std::string(cpu::attn_isa_name(info.param)); });

TEST(Bf16KvWrite, RoundsEachElementToNearestEvenAtItsSlot) {
  const KvCacheLayout L{2, 64, 16, 4};  // Hk, D, block_size, blocks
  const int32_t T = 5;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> k(size_t(T) * 2 * 64), v(k.size());
  for (auto& x : k) x = u(rng);
  for (auto& x : v) x = u(rng);
  // Ties: 1 + 2^-8 (halfway between bf16 1 and 1 + 2^-7) rounds to 1 (even);
  // 1 + 3·2^-8 rounds up to 1 + 2^-6.
  k[0] = 1.0f + std::ldexp(1.0f, -8);
  k[1] = 1.0f + 3.0f * std::ldexp(1.0f, -8);
  const std::vector<int64_t> slots = {17, 3, -1, 63, 40};  // -1: a padding row, not written
  const size_t cache_elems = size_t(L.num_blocks) * L.block_stride();
  std::vector<uint16_t> kc(cache_elems, 0xFFFF), vc(cache_elems, 0xFFFF);
  KvCacheWriteParams p;
  p.k = k.data();
  p.v = v.data();
  p.k_stride = p.v_stride = 2 * 64;
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.layout = L;
  p.dtype = KvDtype::kBF16;
  p.slot_mapping = slots.data();
  p.num_tokens = T;
  cpu::ThreadPool pool(2);
  cpu::kv_cache_write(p, pool);
  EXPECT_EQ(kc[size_t(L.slot_offset(17, 0))], fp32_to_bf16(1.0f));
  EXPECT_EQ(kc[size_t(L.slot_offset(17, 0)) + 1], fp32_to_bf16(1.0f + std::ldexp(1.0f, -6)));
  size_t written = 0;
  for (int32_t t = 0; t < T; ++t) {
    if (slots[size_t(t)] < 0) continue;
    for (int32_t h = 0; h < 2; ++h) {
      for (int32_t d = 0; d < 64; ++d) {
        const size_t at = size_t(L.slot_offset(slots[size_t(t)], h)) + size_t(d);
        const size_t src = size_t(t) * 128 + size_t(h) * 64 + size_t(d);
        ASSERT_EQ(kc[at], fp32_to_bf16(k[src])) << t << " " << h << " " << d;
        ASSERT_EQ(vc[at], fp32_to_bf16(v[src])) << t << " " << h << " " << d;
        ++written;
      }
    }
  }
  EXPECT_EQ(written, size_t(4 * 2 * 64));
  size_t untouched = 0;
  for (uint16_t x : kc) untouched += x == 0xFFFF ? 1 : 0;
  EXPECT_EQ(untouched, cache_elems - written);  // nothing outside the slots
}

}  // namespace
}  // namespace pagoda::gpu::test
