// CPU twin of paged attention (PagedAttentionParams in gpu/ops.hpp): the
// driver. The inner kernels come in ISA variants (paged_attention_kernels.hpp)
// picked at run time (best_attn_isa, or the caller's AttnIsa; see
// paged_attention_isa.cpp).
//
// Work item = (sequence, tile of <= kRowTile consecutive query rows, kv head,
// chunk of <= kMaxGroupChunk q heads of its GQA group, partition). An item
// walks the sequence's blocks through the block table; per block it cuts the
// keys into chunks of <= attn::kChunk keys and, chunk by chunk, updates every
// row of the tile and all the item's q heads of that row with one step of a
// chunk-wise online softmax (fp32): scores, new max, rescale of the running
// sum and accumulator, P.V. A chunk's K and V are read from memory once per
// item and reused from L1 (tiles of several rows transpose the chunk's keys
// once, when the variant offers it).
// A row's result depends only on keys [0, kv_end) of its own sequence (the
// item reads no key at or past the largest kv_end of its rows), so unused
// slots, unused blocks and padded table entries are never read. A row's chunk
// boundaries depend only on its own kv_end, the block size and the partition,
// and the kernels' per-head arithmetic does not depend on the other heads or
// rows: for a fixed variant, results are bitwise batch-independent (whatever
// the batch composition, tile or thread count) for a fixed partition_size.
// A row with no key (kv_end == 0) gets output 0.
// Sliding window (Gemma): a row attends keys [kv_begin, kv_end) with kv_begin
// = max(0, kv_end - window). The item starts at the block holding the
// smallest kv_begin of its rows (block-aligned, so chunk boundaries stay
// where they would be without a window); a row skips the chunks wholly
// before its own kv_begin and masks (score -inf) the keys of a chunk that
// precede it, so its result still depends only on its own keys. Soft-cap:
// the kernels' softcap on the scores, before the mask and the softmax.
// Split-K: each (row, partition) writes a normalised partial output and its
// log-sum-exp; merge_partials combines them with weights exp(lse_i - max lse).
// KV dtype: an fp32 cache is read in place; a bf16 cache (half the bytes per
// step) is widened chunk by chunk into fp32 scratch on the item's thread
// (exact), so its results are the fp32 kernels' on the bf16 values, bit for
// bit. bf16 requires head_dim <= kMaxWidenD.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/paged_attention_kernels.hpp"

namespace pagoda::gpu::cpu {

namespace {

constexpr int32_t kRowTile = 16;
constexpr int32_t kMaxGroupChunk = 16;
constexpr int32_t kMaxTransposedD = 256;  // larger head_dims skip the transposed-key path
constexpr int32_t kMaxWidenD = 512;       // the largest head_dim of a bf16 cache
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keys [0, kv_end) that row (seq s, index i of its q_len rows) attends.
int32_t row_kv_end(const AttentionMetadata& m, int32_t s, int32_t row) {
  const int32_t q_begin = m.query_start_loc[s];
  const int32_t q_len = m.query_start_loc[s + 1] - q_begin;
  const int32_t ctx = m.context_lens[s];
  return std::clamp(ctx - q_len + (row - q_begin) + 1, 0, ctx);
}

// The first key the row attends: kv_end - window under a sliding window.
int32_t row_kv_begin(int32_t kv_end, int32_t window) {
  return window > 0 ? std::max(0, kv_end - window) : 0;
}

// Online-softmax state of one work item's rows and q heads.
struct TileState {
  int32_t kv_end[kRowTile];
  int32_t kv_begin[kRowTile];
  int32_t lo = 0;  // the smallest kv_begin of the active rows
  bool active[kRowTile];  // the row has this item's partition
  float m[kRowTile][kMaxGroupChunk];
  float s[kRowTile][kMaxGroupChunk];
};

struct ItemRun {
  const PagedAttentionParams& p;
  AttentionScratch& sc;
  int32_t P;  // partition size, 0 = unsplit
  const attn::Kernels& k;

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
  std::pair<const char*, const char*> block_kv(const AttentionScratch::Item& it, int32_t b) const;
  // wbuf: nullptr for an fp32 cache; for bf16, 2 kChunk D floats (64-byte aligned).
  void attend_block(const AttentionScratch::Item& it, TileState& st, int32_t b, int32_t lo,
                    int32_t hi, float* wbuf) const;
  void attend_chunk(const AttentionScratch::Item& it, TileState& st, int32_t r, const float* kc,
                    const float* vc, int32_t n, const float* kt, int32_t skip) const;
  void finish(const AttentionScratch::Item& it, TileState& st) const;
  void run(const AttentionScratch::Item& it) const;
};

// Sets up the rows' state and zeroes their accumulators; returns the largest kv_end.
int32_t ItemRun::init(const AttentionScratch::Item& it, TileState& st) const {
  int32_t hi = 0;
  st.lo = std::numeric_limits<int32_t>::max();
  for (int32_t r = 0; r < it.row_end - it.row_begin; ++r) {
    const int32_t row = it.row_begin + r;
    st.kv_end[r] = row_kv_end(p.meta, it.seq, row);
    st.kv_begin[r] = row_kv_begin(st.kv_end[r], p.sliding_window);
    st.active[r] = it.partition < 0 || it.partition < sc.num_parts[size_t(row)];
    if (st.active[r]) {
      hi = std::max(hi, st.kv_end[r]);
      st.lo = std::min(st.lo, st.kv_begin[r]);
    }
    for (int32_t g = 0; g < it.group_end - it.group_begin; ++g) {
      st.m[r][g] = kNegInf;
      st.s[r][g] = 0.0f;
      if (st.active[r]) std::fill_n(acc_ptr(row, q_head(it, g), it.partition), p.layout.head_dim, 0.0f);
    }
  }
  return hi;
}

// K and V (bytes) of the item's kv head in logical block b of its sequence:
// [block_size, D] elements of the cache's dtype each.
std::pair<const char*, const char*> ItemRun::block_kv(const AttentionScratch::Item& it,
                                                      int32_t b) const {
  const KvCacheLayout& L = p.layout;
  assert(b < p.meta.max_blocks_per_seq);
  const int64_t trow = p.meta.block_table_rows ? p.meta.block_table_rows[it.seq] : it.seq;
  const int64_t phys = p.meta.block_tables[trow * p.meta.max_blocks_per_seq + b];
  assert(phys >= 0 && phys < L.num_blocks);
  const int64_t at = L.offset(phys, it.kv_head, 0) * kv_dtype_bytes(p.dtype);
  return {static_cast<const char*>(p.k_cache) + at, static_cast<const char*>(p.v_cache) + at};
}

void ItemRun::attend_block(const AttentionScratch::Item& it, TileState& st, int32_t b,
                           int32_t lo, int32_t hi, float* wbuf) const {
  const KvCacheLayout& L = p.layout;
  const int32_t BS = L.block_size, D = L.head_dim;
  const auto [kbytes, vbytes] = block_kv(it, b);
  if ((b + 1) * BS < hi) {  // the item's next block: start its K/V on the way from memory
    const auto [kn, vn] = block_kv(it, b + 1);
    for (int64_t i = 0; i < int64_t{BS} * D * kv_dtype_bytes(p.dtype); i += 64) {
      __builtin_prefetch(kn + i);
      __builtin_prefetch(vn + i);
    }
  }
  const bool widen = wbuf != nullptr;  // bf16: the chunk's K and V, [kChunk, D] fp32 each
  float* kw = wbuf;
  float* vw = widen ? wbuf + attn::kChunk * D : nullptr;
  // Row r folds keys [j0, j1[r]) of the block; chunks start at j0 + i kChunk for every row.
  const int32_t j0 = std::max(b * BS, lo) - b * BS;
  int32_t j1[kRowTile], jmax = j0, rows = 0;
  for (int32_t r = 0; r < it.row_end - it.row_begin; ++r) {
    j1[r] = st.active[r] ? std::min({(b + 1) * BS, hi, st.kv_end[r]}) - b * BS : j0;
    jmax = std::max(jmax, j1[r]);
    rows += j1[r] > j0 ? 1 : 0;
  }
  alignas(64) float kt[kMaxTransposedD * attn::kChunk];  // [D, kChunk]
  const bool transposed = k.transpose != nullptr && rows >= 2 && D <= kMaxTransposedD;
  for (int32_t c = j0; c < jmax; c += attn::kChunk) {
    const int32_t nc = std::min(attn::kChunk, jmax - c);
    const float* kb = kw;  // the chunk's keys and values as fp32 [nc, D]
    const float* vb = vw;
    if (widen) {
      k.widen(reinterpret_cast<const uint16_t*>(kbytes) + int64_t{c} * D, int64_t{nc} * D, kw);
      k.widen(reinterpret_cast<const uint16_t*>(vbytes) + int64_t{c} * D, int64_t{nc} * D, vw);
    } else {
      kb = reinterpret_cast<const float*>(kbytes) + int64_t{c} * D;
      vb = reinterpret_cast<const float*>(vbytes) + int64_t{c} * D;
    }
    if (transposed) k.transpose(kb, nc, D, kt);
    for (int32_t r = 0; r < it.row_end - it.row_begin; ++r) {
      const int32_t n = std::min(attn::kChunk, j1[r] - c);
      const int32_t skip = st.kv_begin[r] - (b * BS + c);  // keys of the chunk before the window
      if (n <= 0 || skip >= n) continue;
      attend_chunk(it, st, r, kb, vb, n,
                   transposed ? kt : nullptr, std::max(skip, 0));
    }
  }
}

// Folds n <= kChunk consecutive keys (kc, vc: [n, D]; kt: their transpose
// or nullptr) into row r's heads: one online-softmax step. The first `skip`
// (< n) keys lie before the row's window: masked.
void ItemRun::attend_chunk(const AttentionScratch::Item& it, TileState& st, int32_t r,
                           const float* kc, const float* vc, int32_t n, const float* kt,
                           int32_t skip) const {
  const int32_t D = p.layout.head_dim, nh = it.group_end - it.group_begin;
  const int32_t row = it.row_begin + r;
  const float* q[kMaxGroupChunk];
  float* acc[kMaxGroupChunk];
  for (int32_t g = 0; g < nh; ++g) {
    const int32_t hq = q_head(it, g);
    q[g] = p.q + int64_t{row} * p.q_stride + int64_t{hq} * D;
    acc[g] = acc_ptr(row, hq, it.partition);
  }
  alignas(64) float w[kMaxGroupChunk * attn::kChunk];  // [nh, kChunk] scores, then weights
  float alpha[kMaxGroupChunk];
  if (kt != nullptr) {
    k.scores_t(q, nh, kt, n, D, p.scale, w);
  } else {
    k.scores(q, nh, kc, n, D, p.scale, w);
  }
  if (p.softcap > 0.0f) k.softcap(w, nh, n, p.softcap);
  for (int32_t g = 0; g < nh && skip > 0; ++g) std::fill_n(w + g * attn::kChunk, skip, kNegInf);
  k.weights(w, nh, st.m[r], st.s[r], alpha);
  k.pv(acc, alpha, w, nh, vc, n, D);
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
      k.scale(acc, sum > 0.0f ? 1.0f / sum : 0.0f, p.layout.head_dim);
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
  const int32_t BS = p.layout.block_size;
  const int32_t part_lo = it.partition < 0 ? 0 : it.partition * P;
  if (it.partition >= 0) hi = std::min(hi, part_lo + P);
  const int32_t lo = std::max(part_lo, st.lo / BS * BS);  // P is a multiple of BS
  // The widening buffer of this thread (bf16 caches only), reused by its items.
  alignas(64) static thread_local float wbuf[2 * attn::kChunk * kMaxWidenD];
  float* widen = p.dtype == KvDtype::kBF16 ? wbuf : nullptr;
  for (int32_t b = lo / p.layout.block_size; b * p.layout.block_size < hi; ++b) {
    attend_block(it, st, b, lo, hi, widen);
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
          attn::axpy(out, w, sc.partial_out.data() + ((base + i) * Hq + hq) * D, D);
        }
        attn::scale_in_place(out, 1.0f / wsum, D);
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
  paged_attention(p, pool, scratch, best_attn_isa());
}

void paged_attention(const PagedAttentionParams& p, ThreadPool& pool, AttentionScratch& scratch,
                     AttnIsa isa) {
  const AttentionMetadata& m = p.meta;
  assert(p.dtype == KvDtype::kF32 || (p.dtype == KvDtype::kBF16 && p.layout.head_dim <= kMaxWidenD));
  assert(p.layout.num_kv_heads > 0 && p.num_q_heads % p.layout.num_kv_heads == 0);
  assert(attn_isa_unsupported_reason(isa).empty());
  const int64_t row_elems = int64_t{p.num_q_heads} * p.layout.head_dim;
  const int32_t used_rows = m.num_seqs > 0 ? m.query_start_loc[m.num_seqs] : 0;
  if (m.num_tokens > used_rows) {  // padding rows: output 0
    std::fill(p.out + used_rows * row_elems, p.out + m.num_tokens * row_elems, 0.0f);
  }
  int32_t P = p.partition_size < 0 ? auto_partition_size(p, pool.size()) : p.partition_size;
  build_items(p, P, scratch);
  const ItemRun runner{p, scratch, P, attn::kernels_for(isa, p.layout.head_dim)};
  pool.parallel_for(scratch.items.size(), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) runner.run(scratch.items[i]);
  });
  if (P > 0) merge_partials(p, scratch, pool);
}

}  // namespace pagoda::gpu::cpu
