// Paged attention (CPU backend) against a naive contiguous attention in fp64
// over each sequence's logical K/V, with the gpu-notes §8 generator: context
// lengths {1, BS-1, BS, BS+1, 97, 1000}, block sizes 8/16/32, head dims 64/128,
// GQA groups 1/2/3/4, shuffled physical block ids, NaN poison in every unused
// slot and block and behind every padded block-table entry, chunked prefill
// mixed with decode rows and padding rows, split-K, batch vs one-at-a-time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_ops.hpp"

namespace pagoda::gpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int Hq, Hk, D, BS;
};
struct Seq {
  int ctx;    // tokens in the cache after this step
  int q_len;  // query rows this step (1 = decode)
};

struct Problem {
  Shape sh;
  std::vector<Seq> seqs;
  int T = 0;  // rows incl. padding
  int max_blocks = 0;
  int64_t num_blocks = 0;
  std::vector<float> q, kc, vc;  // q [T, Hq, D]; caches [blocks, Hk, BS, D]
  std::vector<int32_t> tables, qsl, ctx;
  std::vector<std::vector<float>> klog, vlog;  // per seq [ctx, Hk, D]
};

// Logical values come from `seed` alone; `shuffle` only permutes physical ids.
Problem make_problem(Shape sh, std::vector<Seq> seqs, int pad_rows, uint32_t seed, bool shuffle) {
  Problem p;
  p.sh = sh;
  p.seqs = seqs;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int used_blocks = 0;
  p.qsl = {0};
  for (const Seq& s : seqs) {
    const int nb = (s.ctx + sh.BS - 1) / sh.BS;
    used_blocks += nb;
    p.max_blocks = std::max(p.max_blocks, nb + 2);  // + padded entries
    p.qsl.push_back(p.qsl.back() + s.q_len);
    p.ctx.push_back(s.ctx);
    p.klog.emplace_back(size_t(s.ctx) * sh.Hk * sh.D);
    p.vlog.emplace_back(size_t(s.ctx) * sh.Hk * sh.D);
    for (auto& x : p.klog.back()) x = u(rng);
    for (auto& x : p.vlog.back()) x = u(rng);
  }
  p.T = p.qsl.back() + pad_rows;
  p.q.resize(size_t(p.T) * sh.Hq * sh.D);
  for (auto& x : p.q) x = 2.5f * u(rng);  // peaked enough to exercise the max tracking
  std::fill(p.q.begin() + ptrdiff_t(p.qsl.back()) * sh.Hq * sh.D, p.q.end(), kNaN);  // padding
  // Physical blocks: the used ones, 3 spares and one NaN block for padded entries.
  p.num_blocks = used_blocks + 4;
  std::vector<int32_t> ids(size_t(p.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  if (shuffle) std::shuffle(ids.begin(), ids.end(), std::mt19937(seed ^ 0x5eedu));
  const int32_t nan_block = ids.back();
  const size_t per_block = size_t(sh.Hk) * sh.BS * sh.D;
  p.kc.assign(size_t(p.num_blocks) * per_block, kNaN);
  p.vc.assign(size_t(p.num_blocks) * per_block, kNaN);
  p.tables.assign(seqs.size() * size_t(p.max_blocks), nan_block);
  size_t next = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int j = 0; j < seqs[s].ctx; ++j) {
      if (j % sh.BS == 0) p.tables[s * size_t(p.max_blocks) + size_t(j / sh.BS)] = ids[next++];
      const size_t blk = size_t(p.tables[s * size_t(p.max_blocks) + size_t(j / sh.BS)]);
      for (int h = 0; h < sh.Hk; ++h) {
        for (int d = 0; d < sh.D; ++d) {
          const size_t dst = ((blk * sh.Hk + h) * sh.BS + size_t(j % sh.BS)) * sh.D + d;
          const size_t src = (size_t(j) * sh.Hk + h) * sh.D + d;
          p.kc[dst] = p.klog[s][src];
          p.vc[dst] = p.vlog[s][src];
        }
      }
    }
  }
  return p;
}

PagedAttentionParams params_of(Problem& p, float* out, int partition) {
  PagedAttentionParams a;
  a.q = p.q.data();
  a.q_stride = int64_t{p.sh.Hq} * p.sh.D;
  a.out = out;
  a.k_cache = p.kc.data();
  a.v_cache = p.vc.data();
  a.layout = KvCacheLayout{p.sh.Hk, p.sh.D, p.sh.BS, p.num_blocks};
  a.num_q_heads = p.sh.Hq;
  a.scale = 1.0f / std::sqrt(float(p.sh.D));
  a.partition_size = partition;
  a.meta.num_tokens = p.T;
  a.meta.num_seqs = int32_t(p.seqs.size());
  a.meta.query_start_loc = p.qsl.data();
  a.meta.context_lens = p.ctx.data();
  a.meta.block_tables = p.tables.data();
  a.meta.max_blocks_per_seq = p.max_blocks;
  a.meta.max_context_len = *std::max_element(p.ctx.begin(), p.ctx.end());
  return a;
}

std::vector<float> run(Backend& be, Problem& p, int partition) {
  std::vector<float> out(p.q.size(), 12345.0f);
  be.paged_attention(params_of(p, out.data(), partition));
  return out;
}

// Naive attention in fp64 over the logical K/V: row i of a sequence with q_len
// rows and ctx keys attends keys [0, ctx - q_len + i]; padding rows are 0.
std::vector<double> reference(const Problem& p) {
  const Shape& sh = p.sh;
  std::vector<double> out(p.q.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(sh.D));
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    for (int i = 0; i < p.seqs[s].q_len; ++i) {
      const int row = p.qsl[s] + i, keys = p.seqs[s].ctx - p.seqs[s].q_len + i + 1;
      for (int hq = 0; hq < sh.Hq; ++hq) {
        const int hk = hq / (sh.Hq / sh.Hk);
        const float* q = &p.q[(size_t(row) * sh.Hq + hq) * sh.D];
        std::vector<double> logit(static_cast<size_t>(keys));
        for (int j = 0; j < keys; ++j) {
          const float* k = &p.klog[s][(size_t(j) * sh.Hk + hk) * sh.D];
          double acc = 0;
          for (int d = 0; d < sh.D; ++d) acc += double(q[d]) * k[d];
          logit[size_t(j)] = acc * scale;
        }
        const double mx = *std::max_element(logit.begin(), logit.end());
        double den = 0;
        for (double& l : logit) den += (l = std::exp(l - mx));
        double* o = &out[(size_t(row) * sh.Hq + hq) * sh.D];
        for (int j = 0; j < keys; ++j) {
          const float* v = &p.vlog[s][(size_t(j) * sh.Hk + hk) * sh.D];
          for (int d = 0; d < sh.D; ++d) o[d] += logit[size_t(j)] / den * v[d];
        }
      }
    }
  }
  return out;
}

// |got - ref| <= 2e-5 + 1e-4 |ref| everywhere (fp32 online softmax vs fp64).
void expect_close(const std::vector<float>& got, const std::vector<double>& ref,
                  const std::string& label) {
  ASSERT_EQ(got.size(), ref.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double lim = 2e-5 + 1e-4 * std::abs(ref[i]);
    const double ratio = std::isfinite(got[i]) ? std::abs(got[i] - ref[i]) / lim : 1e30;
    if (ratio > worst) worst = ratio, at = i;
  }
  EXPECT_LE(worst, 1.0) << label << ": worst err/limit " << worst << " at " << at << " got "
                        << got[at] << " want " << ref[at];
}

std::unique_ptr<Backend> backend(size_t threads) {
  return std::move(make_backend(BackendKind::kCpu, BackendOptions{0, threads})).value();
}

std::vector<Seq> decode_seqs(int BS) {
  std::vector<Seq> s;
  for (int ctx : {1, BS - 1, BS, BS + 1, 97, 1000}) s.push_back({ctx, 1});
  return s;
}

TEST(PagedAttention, DecodeMatrixAgainstNaive) {
  auto be = backend(3);
  for (int BS : {8, 16, 32}) {
    for (int D : {64, 128}) {
      for (int G : {1, 2, 3, 4}) {
        const int Hk = G == 3 ? 3 : 2;  // G = 3: SmolLM2's 9 q heads over 3 kv heads
        Problem p = make_problem({G * Hk, Hk, D, BS}, decode_seqs(BS), 0, uint32_t(BS * D + G), true);
        const std::string label = "BS=" + std::to_string(BS) + " D=" + std::to_string(D) +
                                  " G=" + std::to_string(G);
        expect_close(run(*be, p, 0), reference(p), label);
      }
    }
  }
}

TEST(PagedAttention, ShuffledBlockIdsGiveIdenticalResults) {
  auto be = backend(2);
  for (int BS : {8, 16, 32}) {
    Problem a = make_problem({8, 2, 64, BS}, decode_seqs(BS), 0, 77, false);
    Problem b = make_problem({8, 2, 64, BS}, decode_seqs(BS), 0, 77, true);
    ASSERT_NE(a.tables, b.tables);
    EXPECT_EQ(run(*be, a, 0), run(*be, b, 0)) << "BS=" << BS;
    EXPECT_EQ(run(*be, a, 64), run(*be, b, 64)) << "split, BS=" << BS;
  }
}

std::vector<Seq> mixed_seqs() {
  // Chunked prefill 17 of 17, 5 of 97, 64 of 300, with decode rows between.
  return {{17, 17}, {1000, 1}, {97, 5}, {16, 1}, {300, 64}, {1, 1}};
}

TEST(PagedAttention, ChunkedPrefillMixedWithDecodeAndPadding) {
  auto be = backend(3);
  for (int BS : {8, 16, 32}) {
    for (int G : {1, 3}) {
      Problem p = make_problem({3 * G, 3, 64, BS}, mixed_seqs(), 3, uint32_t(100 + BS + G), true);
      auto got = run(*be, p, 0);
      expect_close(got, reference(p), "BS=" + std::to_string(BS) + " G=" + std::to_string(G));
      const size_t first_pad = size_t(p.qsl.back()) * p.sh.Hq * p.sh.D;
      for (size_t i = first_pad; i < got.size(); ++i) ASSERT_EQ(got[i], 0.0f) << "padding row";
    }
  }
}

TEST(PagedAttention, BatchEqualsOneSequenceAtATimeBitwise) {
  auto be = backend(3);
  Problem all = make_problem({9, 3, 64, 16}, mixed_seqs(), 2, 5, true);
  for (int partition : {0, 64}) {
    auto batch = run(*be, all, partition);
    for (size_t s = 0; s < all.seqs.size(); ++s) {
      Problem one = all;  // same caches and physical ids, only sequence s in the step
      one.seqs = {all.seqs[s]};
      one.T = all.seqs[s].q_len;
      one.qsl = {0, one.T};
      one.ctx = {all.ctx[s]};
      one.tables.assign(all.tables.begin() + ptrdiff_t(s) * all.max_blocks,
                        all.tables.begin() + ptrdiff_t(s + 1) * all.max_blocks);
      const size_t row = size_t(all.qsl[s]) * all.sh.Hq * all.sh.D;
      const size_t rows_elems = size_t(one.T) * all.sh.Hq * all.sh.D;
      one.q.assign(all.q.begin() + ptrdiff_t(row), all.q.begin() + ptrdiff_t(row + rows_elems));
      auto alone = run(*be, one, partition);
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + ptrdiff_t(row)))
          << "sequence " << s << " partition " << partition;
    }
  }
}

TEST(PagedAttention, SplitKMatchesUnsplit) {
  auto be = backend(3);
  Problem p = make_problem({12, 4, 128, 16}, mixed_seqs(), 1, 9, true);
  const auto ref = reference(p);
  const auto unsplit = run(*be, p, 0);
  for (int partition : {16, 48, 64, 512, -1}) {
    auto split = run(*be, p, partition);
    expect_close(split, ref, "partition " + std::to_string(partition));
    double worst = 0;
    for (size_t i = 0; i < split.size(); ++i) {
      const double lim = 1e-6 + 1e-5 * std::abs(unsplit[i]);  // a few fp32 ulps of O(1) values
      worst = std::max(worst, double(std::abs(split[i] - unsplit[i])) / lim);
    }
    EXPECT_LE(worst, 1.0) << "partition " << partition << ": worst err/limit";
  }
}

TEST(PagedAttention, LongSingleDecodeUsesAutoSplit) {
  auto be = backend(4);
  Problem p = make_problem({8, 2, 64, 16}, {{3000, 1}}, 0, 21, true);
  PagedAttentionParams a = params_of(p, nullptr, -1);
  EXPECT_GT(cpu::auto_partition_size(a, 4), 0);  // 2 work items for 4 threads: split
  expect_close(run(*be, p, -1), reference(p), "auto split");
}

TEST(PagedAttention, IndependentOfThreadCountBitwise) {
  Problem p = make_problem({9, 3, 64, 8}, mixed_seqs(), 0, 31, true);
  auto one = backend(1), four = backend(4);
  for (int partition : {0, 64}) EXPECT_EQ(run(*one, p, partition), run(*four, p, partition));
}

// End to end with the write op: a prefill chunk's K/V go in through
// kv_cache_write's slot mapping, then attention reads them via the block table.
TEST(PagedAttention, ReadsWhatKvCacheWriteWrote) {
  auto be = backend(2);
  Problem p = make_problem({6, 2, 64, 8}, {{40, 40}}, 0, 41, true);
  std::vector<float> k(p.kc.size(), kNaN), v(p.vc.size(), kNaN);
  std::vector<int64_t> slots(40);
  for (int j = 0; j < 40; ++j) slots[size_t(j)] = int64_t{p.tables[size_t(j / 8)]} * 8 + j % 8;
  KvCacheWriteParams w{p.klog[0].data(), p.vlog[0].data(), p.sh.Hk * p.sh.D, p.sh.Hk * p.sh.D,
                       k.data(), v.data(), KvCacheLayout{p.sh.Hk, p.sh.D, p.sh.BS, p.num_blocks},
                       KvDtype::kF32, slots.data(), 40};
  be->kv_cache_write(w);
  p.kc = k;
  p.vc = v;
  expect_close(run(*be, p, 0), reference(p), "written by kv_cache_write");
}

}  // namespace
}  // namespace pagoda::gpu
