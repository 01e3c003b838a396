// CPU twin of paged attention (PagedAttentionParams in gpu/ops.hpp).
//
// Work item = (sequence, tile of <= kRowTile consecutive query rows, kv head,
// chunk of <= kMaxGroupChunk q heads of its GQA group, partition). An item
// walks the sequence's blocks through the block table and, per block, updates
// each of its rows with a block-wise online softmax (fp32): scores of the
// block's valid keys, new max, rescale of the running sum and accumulator,
// then P.V. A row only ever touches keys [0, kv_end) of its own sequence, so
// unused slots, unused blocks and padded table entries are never read.
// Per-row arithmetic is the same whatever the tile, batch or thread count:
// results are bitwise batch-independent for a fixed partition_size.
// Split-K: each (row, partition) writes a normalised partial output and its
// log-sum-exp; merge_partials combines them with weights exp(lse_i - max lse).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpu/cpu/cpu_ops.hpp"

namespace pagoda::gpu::cpu {

namespace {

constexpr int32_t kRowTile = 16;
constexpr int32_t kMaxGroupChunk = 16;
constexpr int32_t kMaxBlockSize = 256;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float dot(const float* a, const float* b, int32_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) +
         tail;
}

// acc += w * v over n floats (8-wide blocks so that -O2 vectorises them).
void axpy(float* __restrict acc, float w, const float* __restrict v, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t j = 0; j < 8; ++j) acc[i + j] += w * v[i + j];
  }
  for (; i < n; ++i) acc[i] += w * v[i];
}

void scale_in_place(float* acc, float a, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t j = 0; j < 8; ++j) acc[i + j] *= a;
  }
  for (; i < n; ++i) acc[i] *= a;
}

// Keys [0, kv_end) that row (seq s, index i of its q_len rows) attends.
int32_t row_kv_end(const AttentionMetadata& m, int32_t s, int32_t row) {
  const int32_t q_begin = m.query_start_loc[s];
  const int32_t q_len = m.query_start_loc[s + 1] - q_begin;
  const int32_t ctx = m.context_lens[s];
  return std::clamp(ctx - q_len + (row - q_begin) + 1, 0, ctx);
}

// Online-softmax state of one work item's rows and q heads.
struct TileState {
  int32_t kv_end[kRowTile];
  bool active[kRowTile];  // the row has this item's partition
  float m[kRowTile][kMaxGroupChunk];
  float s[kRowTile][kMaxGroupChunk];
};

// Folds keys [j0, j1) of one block into one (row, q head): block-wise online
// softmax. k and v point at the block's first key/value of the kv head.
void update_head(const float* q, const float* k, const float* v, int32_t j0, int32_t j1,
                 int32_t D, float scale, float& m, float& s, float* acc) {
  float scores[kMaxBlockSize];
  float bmax = kNegInf;
  for (int32_t j = j0; j < j1; ++j) {
    scores[j] = dot(q, k + int64_t{j} * D, D) * scale;
    bmax = std::max(bmax, scores[j]);
  }
  const float m_new = std::max(m, bmax);
  if (m_new == kNegInf) return;
  if (m_new != m) {
    const float alpha = std::exp(m - m_new);  // 0 on the first update
    s *= alpha;
    scale_in_place(acc, alpha, D);
    m = m_new;
  }
  for (int32_t j = j0; j < j1; ++j) {
    const float w = std::exp(scores[j] - m_new);
    s += w;
    axpy(acc, w, v + int64_t{j} * D, D);
  }
}

struct ItemRun {
  const PagedAttentionParams& p;
  AttentionScratch& sc;
  int32_t P;  // partition size, 0 = unsplit

  // Accumulator of (row, hq): the output row itself, or the split partial.
  float* acc_ptr(int32_t row, int32_t hq, int32_t part) const {
    const int64_t hd = int64_t{p.num_q_heads} * p.layout.head_dim;
    if (part < 0) return p.out + int64_t{row} * hd + int64_t{hq} * p.layout.head_dim;
    return sc.partial_out.data() + (sc.part_base[size_t(row)] + part) * hd +
           int64_t{hq} * p.layout.head_dim;
  }
  int32_t q_head(const AttentionScratch::Item& it, int32_t g) const {
    return it.kv_head * (p.num_q_heads / p.layout.num_kv_heads) + it.group_begin + g;
  }
  int32_t init(const AttentionScratch::Item& it, TileState& st) const;
  void attend_block(const AttentionScratch::Item& it, TileState& st, int32_t b, int32_t lo,
                    int32_t hi) const;
  void finish(const AttentionScratch::Item& it, TileState& st) const;
  void run(const AttentionScratch::Item& it) const;
};

// Sets up the rows' state and zeroes their accumulators; returns the largest kv_end.
int32_t ItemRun::init(const AttentionScratch::Item& it, TileState& st) const {
  int32_t hi = 0;
  for (int32_t r = 0; r < it.row_end - it.row_begin; ++r) {
    const int32_t row = it.row_begin + r;
    st.kv_end[r] = row_kv_end(p.meta, it.seq, row);
    st.active[r] = it.partition < 0 || it.partition < sc.num_parts[size_t(row)];
    if (st.active[r]) hi = std::max(hi, st.kv_end[r]);
    for (int32_t g = 0; g < it.group_end - it.group_begin; ++g) {
      st.m[r][g] = kNegInf;
      st.s[r][g] = 0.0f;
      if (st.active[r]) std::fill_n(acc_ptr(row, q_head(it, g), it.partition), p.layout.head_dim, 0.0f);
    }
  }
  return hi;
}

void ItemRun::attend_block(const AttentionScratch::Item& it, TileState& st, int32_t b,
                           int32_t lo, int32_t hi) const {
  const KvCacheLayout& L = p.layout;
  const int32_t BS = L.block_size;
  assert(b < p.meta.max_blocks_per_seq);
  const int64_t trow = p.meta.block_table_rows ? p.meta.block_table_rows[it.seq] : it.seq;
  const int64_t phys = p.meta.block_tables[trow * p.meta.max_blocks_per_seq + b];
  assert(phys >= 0 && phys < L.num_blocks);
  const float* kb = static_cast<const float*>(p.k_cache) + L.offset(phys, it.kv_head, 0);
  const float* vb = static_cast<const float*>(p.v_cache) + L.offset(phys, it.kv_head, 0);
  for (int32_t r = 0; r < it.row_end - it.row_begin; ++r) {
    const int32_t j0 = std::max(b * BS, lo) - b * BS;
    const int32_t j1 = std::min({(b + 1) * BS, hi, st.kv_end[r]}) - b * BS;
    if (!st.active[r] || j0 >= j1) continue;
    const int32_t row = it.row_begin + r;
    for (int32_t g = 0; g < it.group_end - it.group_begin; ++g) {
      const int32_t hq = q_head(it, g);
      const float* q = p.q + int64_t{row} * p.q_stride + int64_t{hq} * L.head_dim;
      update_head(q, kb, vb, j0, j1, L.head_dim, p.scale, st.m[r][g], st.s[r][g],
                  acc_ptr(row, hq, it.partition));
    }
  }
}

// Normalises the accumulators; split items also record their log-sum-exp.
void ItemRun::finish(const AttentionScratch::Item& it, TileState& st) const {
  for (int32_t r = 0; r < it.row_end - it.row_begin; ++r) {
    if (!st.active[r]) continue;
    const int32_t row = it.row_begin + r;
    for (int32_t g = 0; g < it.group_end - it.group_begin; ++g) {
      const int32_t hq = q_head(it, g);
      float* acc = acc_ptr(row, hq, it.partition);
      const float sum = st.s[r][g];
      scale_in_place(acc, sum > 0.0f ? 1.0f / sum : 0.0f, p.layout.head_dim);
      if (it.partition >= 0) {
        const size_t idx = size_t(sc.part_base[size_t(row)] + it.partition) *
                               size_t(p.num_q_heads) + size_t(hq);
        sc.partial_lse[idx] = sum > 0.0f ? st.m[r][g] + std::log(sum) : kNegInf;
      }
    }
  }
}

void ItemRun::run(const AttentionScratch::Item& it) const {
  TileState st;
  int32_t hi = init(it, st);
  const int32_t lo = it.partition < 0 ? 0 : it.partition * P;
  if (it.partition >= 0) hi = std::min(hi, lo + P);
  for (int32_t b = lo / p.layout.block_size; b * p.layout.block_size < hi; ++b) {
    attend_block(it, st, b, lo, hi);
  }
  finish(it, st);
}

template <class T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Fills scratch.items (and, when split, the per-row partial bookkeeping).
void build_items(const PagedAttentionParams& p, int32_t P, AttentionScratch& sc) {
  const AttentionMetadata& m = p.meta;
  const int32_t G = p.num_q_heads / p.layout.num_kv_heads;
  sc.items.clear();
  int64_t total_parts = 0;
  if (P > 0) {
    grow(sc.part_base, size_t(m.num_tokens));
    grow(sc.num_parts, size_t(m.num_tokens));
  }
  for (int32_t s = 0; s < m.num_seqs; ++s) {
    const int32_t q_begin = m.query_start_loc[s], q_end = m.query_start_loc[s + 1];
    for (int32_t rb = q_begin; rb < q_end; rb += kRowTile) {
      const int32_t re = std::min(q_end, rb + kRowTile);
      int32_t parts = 1;
      if (P > 0) {
        for (int32_t r = rb; r < re; ++r) {
          const int32_t n = std::max<int32_t>(1, (row_kv_end(m, s, r) + P - 1) / P);
          sc.part_base[size_t(r)] = total_parts;
          sc.num_parts[size_t(r)] = n;
          total_parts += n;
          parts = std::max(parts, n);
        }
      }
      for (int32_t h = 0; h < p.layout.num_kv_heads; ++h) {
        for (int32_t g0 = 0; g0 < G; g0 += kMaxGroupChunk) {
          for (int32_t part = 0; part < parts; ++part) {
            sc.items.push_back({s, rb, re, h, g0, std::min(G, g0 + kMaxGroupChunk),
                                P > 0 ? part : -1});
          }
        }
      }
    }
  }
  if (P > 0) {
    grow(sc.partial_out, size_t(total_parts) * size_t(p.num_q_heads) * size_t(p.layout.head_dim));
    grow(sc.partial_lse, size_t(total_parts) * size_t(p.num_q_heads));
  }
}

void merge_partials(const PagedAttentionParams& p, const AttentionScratch& sc, ThreadPool& pool) {
  const int32_t D = p.layout.head_dim, Hq = p.num_q_heads;
  const int32_t rows = p.meta.query_start_loc[p.meta.num_seqs];
  pool.parallel_for(size_t(rows), [&](size_t begin, size_t end) {
    for (size_t row = begin; row < end; ++row) {
      const int64_t base = sc.part_base[row];
      const int32_t n = sc.num_parts[row];
      for (int32_t hq = 0; hq < Hq; ++hq) {
        float* out = p.out + (int64_t(row) * Hq + hq) * D;
        float mx = kNegInf;
        for (int32_t i = 0; i < n; ++i) mx = std::max(mx, sc.partial_lse[size_t((base + i) * Hq + hq)]);
        std::fill_n(out, D, 0.0f);
        if (mx == kNegInf) continue;
        float wsum = 0.0f;
        for (int32_t i = 0; i < n; ++i) {
          const float lse = sc.partial_lse[size_t((base + i) * Hq + hq)];
          if (lse == kNegInf) continue;
          const float w = std::exp(lse - mx);
          wsum += w;
          axpy(out, w, sc.partial_out.data() + ((base + i) * Hq + hq) * D, D);
        }
        scale_in_place(out, 1.0f / wsum, D);
      }
    }
  }, 4);
}

}  // namespace

int32_t auto_partition_size(const PagedAttentionParams& p, size_t num_threads) {
  const AttentionMetadata& m = p.meta;
  constexpr int32_t kMinPartition = 256;
  int64_t items = 0;
  int32_t max_ctx = 0;
  for (int32_t s = 0; s < m.num_seqs; ++s) {
    const int32_t q_len = m.query_start_loc[s + 1] - m.query_start_loc[s];
    items += (q_len + kRowTile - 1) / kRowTile;
    max_ctx = std::max(max_ctx, m.context_lens[s]);
  }
  items *= p.layout.num_kv_heads;
  const int64_t want = 2 * int64_t(num_threads);
  if (items == 0 || items >= want || max_ctx < 2 * kMinPartition) return 0;
  const int64_t parts = (want + items - 1) / items;
  int64_t size = (max_ctx + parts - 1) / parts;
  size = (size + kMinPartition - 1) / kMinPartition * kMinPartition;  // a multiple of every block size
  return int32_t(std::max<int64_t>(size, kMinPartition));
}

void paged_attention(const PagedAttentionParams& p, ThreadPool& pool, AttentionScratch& scratch) {
  const AttentionMetadata& m = p.meta;
  assert(p.dtype == KvDtype::kF32);
  assert(p.layout.num_kv_heads > 0 && p.num_q_heads % p.layout.num_kv_heads == 0);
  assert(p.layout.block_size <= kMaxBlockSize);
  const int64_t row_elems = int64_t{p.num_q_heads} * p.layout.head_dim;
  const int32_t used_rows = m.num_seqs > 0 ? m.query_start_loc[m.num_seqs] : 0;
  if (m.num_tokens > used_rows) {  // padding rows: output 0
    std::fill(p.out + used_rows * row_elems, p.out + m.num_tokens * row_elems, 0.0f);
  }
  int32_t P = p.partition_size < 0 ? auto_partition_size(p, pool.size()) : p.partition_size;
  build_items(p, P, scratch);
  const ItemRun runner{p, scratch, P};
  pool.parallel_for(scratch.items.size(), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) runner.run(scratch.items[i]);
  });
  if (P > 0) merge_partials(p, scratch, pool);
}

}  // namespace pagoda::gpu::cpu
