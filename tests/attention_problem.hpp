// The paged-attention problem generator (gpu-notes §8) shared by the CPU
// attention test (tests/paged_attention_test.cpp) and the CUDA attention tests:
// logical K/V per sequence, scattered into a paged cache with (by default)
// shuffled physical block ids, spare blocks, a NaN block behind every padded
// block-table entry and NaN in every unused slot; q rows of padding are NaN.
// Values may be pre-rounded to bf16 so that an F32 cache (CPU twin) and a
// BF16 cache (CUDA) hold identical values. Runs a problem on any backend and
// computes an fp64 reference from the logical K/V. Needs no CUDA header.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "tests/backend_test_util.hpp"

namespace pagoda::gpu::test {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int Hq, Hk, D, BS;
};
struct Seq {
  int ctx;    // tokens in the cache after this step
  int q_len;  // query rows this step (1 = decode)
};

struct Problem {
  Shape sh{};
  std::vector<Seq> seqs;
  int T = 0;  // rows, padding included
  int max_blocks = 0;
  int64_t num_blocks = 0;
  std::vector<float> q, kc, vc;  // q [T, Hq, D]; caches [blocks, Hk, BS, D]
  std::vector<int32_t> tables, qsl, ctx;
  std::vector<std::vector<float>> klog, vlog;  // per seq [ctx, Hk, D]
};

enum class Values { kF32, kBf16 };  // kBf16: K/V pre-rounded to bf16
enum class BlockIds { kShuffled, kInOrder };

// Logical values come from `seed` and `values` alone; `ids` only permutes the
// physical block ids (kInOrder: sequence 0 takes blocks 0, 1, ...).
inline Problem make_problem(Shape sh, std::vector<Seq> seqs, int pad_rows, uint32_t seed,
                            Values values = Values::kF32,
                            BlockIds ids_order = BlockIds::kShuffled) {
  Problem p;
  p.sh = sh;
  p.seqs = seqs;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto value = [&] { return values == Values::kBf16 ? round_bf16(u(rng)) : u(rng); };
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
    for (auto& x : p.klog.back()) x = value();
    for (auto& x : p.vlog.back()) x = value();
  }
  p.T = p.qsl.back() + pad_rows;
  p.q.resize(size_t(p.T) * sh.Hq * sh.D);
  for (auto& x : p.q) x = 2.5f * u(rng);  // peaked softmax: exercises the max tracking
  std::fill(p.q.begin() + ptrdiff_t(p.qsl.back()) * sh.Hq * sh.D, p.q.end(), kNaN);
  p.num_blocks = used_blocks + 4;  // 3 spares and one NaN block for padded entries
  std::vector<int32_t> ids(size_t(p.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  if (ids_order == BlockIds::kShuffled) {
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed ^ 0x5eedu));
  }
  const int32_t nan_block = ids.back();
  const size_t per_block = size_t(sh.Hk) * sh.BS * sh.D;
  p.kc.assign(size_t(p.num_blocks) * per_block, kNaN);
  p.vc.assign(size_t(p.num_blocks) * per_block, kNaN);
  p.tables.assign(seqs.size() * size_t(p.max_blocks), nan_block);
  size_t next = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    int32_t* table = &p.tables[s * size_t(p.max_blocks)];
    for (int j = 0; j < seqs[s].ctx; ++j) {
      if (j % sh.BS == 0) table[j / sh.BS] = ids[next++];
      const size_t blk = size_t(table[j / sh.BS]);
      for (int h = 0; h < sh.Hk; ++h) {
        const size_t dst = ((blk * sh.Hk + h) * sh.BS + size_t(j % sh.BS)) * sh.D;
        const size_t src = (size_t(j) * sh.Hk + h) * sh.D;
        std::copy_n(&p.klog[s][src], sh.D, &p.kc[dst]);
        std::copy_n(&p.vlog[s][src], sh.D, &p.vc[dst]);
      }
    }
  }
  return p;
}

// The problem restricted to sequence s (same caches, its rows and table row).
inline Problem single(const Problem& p, size_t s) {
  Problem o = p;
  const size_t row = size_t(p.sh.Hq) * p.sh.D;
  o.seqs = {p.seqs[s]};
  o.T = p.seqs[s].q_len;
  o.q.assign(p.q.begin() + ptrdiff_t(p.qsl[s] * row), p.q.begin() + ptrdiff_t(p.qsl[s + 1] * row));
  o.tables.assign(p.tables.begin() + ptrdiff_t(s * p.max_blocks),
                  p.tables.begin() + ptrdiff_t((s + 1) * p.max_blocks));
  o.qsl = {0, p.seqs[s].q_len};
  o.ctx = {p.ctx[s]};
  o.klog = {p.klog[s]};
  o.vlog = {p.vlog[s]};
  return o;
}

// Where one run of p reads and writes: backend addresses holding p's vectors
// (q [T, Hq, D], caches [blocks, Hk, BS, D] in the run's dtype, tables, qsl,
// ctx) and out [T, Hq, D]. The caller owns them; they must outlive the op.
struct AttentionIo {
  const float* q;
  const void* k_cache;
  const void* v_cache;
  const int32_t* tables;
  const int32_t* qsl;
  const int32_t* ctx;
  float* out;
};

// The params of one run of p over `io` (partition: 0 unsplit, -1 automatic).
inline PagedAttentionParams attention_params(const Problem& p, const AttentionIo& io,
                                             KvDtype dtype, int partition) {
  PagedAttentionParams a;
  a.q = io.q;
  a.q_stride = int64_t{p.sh.Hq} * p.sh.D;
  a.out = io.out;
  a.k_cache = io.k_cache;
  a.v_cache = io.v_cache;
  a.layout = KvCacheLayout{p.sh.Hk, p.sh.D, p.sh.BS, p.num_blocks};
  a.dtype = dtype;
  a.num_q_heads = p.sh.Hq;
  a.scale = 1.0f / std::sqrt(float(p.sh.D));
  a.partition_size = partition;
  a.meta.num_tokens = p.T;
  a.meta.num_seqs = int32_t(p.seqs.size());
  a.meta.query_start_loc = io.qsl;
  a.meta.context_lens = io.ctx;
  a.meta.block_tables = io.tables;
  a.meta.max_blocks_per_seq = p.max_blocks;
  a.meta.max_context_len = *std::max_element(p.ctx.begin(), p.ctx.end());
  for (const Seq& s : p.seqs) a.meta.max_query_len = std::max(a.meta.max_query_len, s.q_len);
  return a;
}

// Runs p on `be` with the cache stored as dtype; out starts as NaN, so every
// element the op fails to write shows up.
inline std::vector<float> run_attention(Backend& be, const Problem& p, KvDtype dtype,
                                        int partition) {
  DeviceBuffer q = put(be, p.q), tables = put(be, p.tables), qsl = put(be, p.qsl),
               ctx = put(be, p.ctx), out = put(be, std::vector<float>(p.q.size(), kNaN));
  DeviceBuffer kc, vc;
  if (dtype == KvDtype::kF32) {
    kc = put(be, p.kc);
    vc = put(be, p.vc);
  } else {
    kc = put(be, to_bf16(p.kc));
    vc = put(be, to_bf16(p.vc));
  }
  const AttentionIo io{q.as<const float>(),     kc.data(),
                       vc.data(),               tables.as<const int32_t>(),
                       qsl.as<const int32_t>(), ctx.as<const int32_t>(),
                       out.as<float>()};
  be.paged_attention(attention_params(p, io, dtype, partition));
  return get<float>(be, out, p.q.size());
}

// Naive attention in fp64 over the logical K/V: row i of a sequence with q_len
// rows and ctx keys attends keys [0, ctx - q_len + i]; padding rows are 0.
// softcap > 0: scores s become softcap tanh(s / softcap); window > 0: only
// keys j > (ctx - q_len + i) - window (PagedAttentionParams' Gemma fields).
inline std::vector<double> reference(const Problem& p, double softcap = 0.0, int window = 0) {
  const Shape& sh = p.sh;
  std::vector<double> out(p.q.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(sh.D));
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    for (int i = 0; i < p.seqs[s].q_len; ++i) {
      const int row = p.qsl[s] + i, keys = p.seqs[s].ctx - p.seqs[s].q_len + i + 1;
      const int first = window > 0 ? std::max(0, keys - window) : 0;
      for (int hq = 0; hq < sh.Hq; ++hq) {
        const int hk = hq / (sh.Hq / sh.Hk);
        const float* q = &p.q[(size_t(row) * sh.Hq + hq) * sh.D];
        std::vector<double> w(static_cast<size_t>(keys));
        for (int j = 0; j < keys; ++j) {
          const float* k = &p.klog[s][(size_t(j) * sh.Hk + hk) * sh.D];
          double acc = 0;
          for (int d = 0; d < sh.D; ++d) acc += double(q[d]) * k[d];
          w[size_t(j)] = acc * scale;
          if (softcap > 0) w[size_t(j)] = softcap * std::tanh(w[size_t(j)] / softcap);
          if (j < first) w[size_t(j)] = -std::numeric_limits<double>::infinity();
        }
        const double mx = *std::max_element(w.begin(), w.end());
        double den = 0;
        for (double& x : w) den += (x = std::exp(x - mx));
        double* o = &out[(size_t(row) * sh.Hq + hq) * sh.D];
        for (int j = 0; j < keys; ++j) {
          const float* v = &p.vlog[s][(size_t(j) * sh.Hk + hk) * sh.D];
          for (int d = 0; d < sh.D; ++d) o[d] += w[size_t(j)] / den * v[d];
        }
      }
    }
  }
  return out;
}

// fp32 online softmax against fp32 or fp64: the CPU twin's own tolerance.
constexpr double kAttnAtol = 2e-5;
constexpr double kAttnRtol = 1e-4;

// Decode rows at and around block boundaries plus a long one.
inline std::vector<Seq> decode_seqs(int BS) {
  std::vector<Seq> s;
  for (int ctx : {1, BS - 1, BS, BS + 1, 97, 1000}) s.push_back({ctx, 1});
  return s;
}

// decode_seqs(BS) followed by three chunked-prefill sequences.
inline std::vector<Seq> mixed_seqs(int BS) {
  std::vector<Seq> s = decode_seqs(BS);
  s.push_back({17, 17});  // a whole prompt
  s.push_back({97, 5});   // a late chunk
  s.push_back({300, 64});
  return s;
}

}  // namespace pagoda::gpu::test
