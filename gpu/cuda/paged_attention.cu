// CUDA paged attention (PagedAttentionParams, gpu/ops.hpp): decode, prefill and
// chunked prefill in one kernel (gpu-notes §2-3, "simplest correct v1").
//
// Grid (query row, kv head x group chunk, partition); 4 warps. One CTA serves
// up to GP query heads of one GQA group (GP in {1, 2, 4, 8}; larger groups are
// split into chunks of 8), so each K/V row it reads serves all of them. A
// token's head vector (D elements) is read by D/8 lanes, 8 elements each (one
// 16-byte load for bf16), so a warp covers 32/(D/8) tokens per step.
//
// Each lane group keeps an online softmax in base 2 (q pre-scaled by
// scale * log2 e) for its tokens: running max m, sum s and the 8-element slice
// of the accumulator, per query head. Lane groups are merged with shuffles,
// warps through shared memory. Rules that keep it correct:
//  - the token loop is warp-uniform; validity (j < hi) only predicates loads
//    and state updates, so shuffles never diverge and no slot at or past the
//    row's last key, no unused block and no padded table entry is ever read;
//  - exp2(m_old - m_new) is 0 on a row's first key (m_old = -inf) and merges
//    skip states that saw no key, so no -inf - -inf NaN arises;
//  - all cache offsets are int64.
// Split-K: partition p of a row covers keys [p*P, min((p+1)*P, kv_end)); it
// writes its normalised partial output and lse = m + log2(s) (-inf when empty);
// merge_kernel weights partials by 2^(lse_i - max lse). A row with a single
// partition (kv_end <= P) and a padding row skip that round trip: their part
// 0 writes the output directly, as the unsplit kernel does (bitwise the
// value the merge would give: o * 1 / 1), and merge_kernel leaves them alone;
// it is not launched at all when no row can have two parts (max_context_len
// <= P). Per-row arithmetic does not depend on the rest of the batch: results
// are bitwise batch-independent for a fixed partition size.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "gpu/cuda/block_reduce.cuh"
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/cuda/decode_plan.hpp"
#include "gpu/cuda/device_vec.cuh"

namespace pagoda::gpu::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kVec = 8;           // elements per lane per token
constexpr int kMaxGroupChunk = 8;  // query heads per CTA
constexpr int kMaxGridYZ = 65535;
constexpr float kLog2e = 1.4426950408889634f;

struct AttnArgs {
  const float* q;  // [T, Hq, D] rows q_stride apart
  int64_t q_stride;
  float* out;      // [T, Hq, D]
  __nv_bfloat16* out_bf16;  // [T, Hq, D] or nullptr: bf16(out) too (the o projection's input)
  const void* k_cache;
  const void* v_cache;
  KvCacheLayout layout;
  int32_t num_q_heads;
  int32_t group;         // G = Hq / Hk
  int32_t group_chunks;  // ceil(G / GP)
  int32_t bs_shift;      // log2(block_size)
  float scale_log2;      // scale * log2(e)
  int32_t partition;     // 0: unsplit
  int32_t max_parts;     // partitions per row in the scratch layout (1 when unsplit)
  AttentionMetadata meta;
  int32_t skip_min_rows;  // > 0: sequences with this many rows are the tiled kernel's
  float* partial_out;  // [T, Hq, max_parts, D] (split only)
  float* partial_lse;  // [T, Hq, max_parts]
};

struct RowInfo {
  int32_t seq;     // -1: padding row; -2: a row of the tiled kernel (untouched here)
  int32_t kv_end;  // the row attends keys [0, kv_end)
};

__device__ RowInfo row_info(const AttentionMetadata& m, int32_t row, int32_t skip_min_rows) {
  const int32_t S = m.num_seqs;
  if (S <= 0 || row >= m.query_start_loc[S]) return RowInfo{-1, 0};
  int32_t lo = 0, hi = S;  // invariant: query_start_loc[lo] <= row < query_start_loc[hi]
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    if (m.query_start_loc[mid] <= row) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const int32_t q_begin = m.query_start_loc[lo];
  const int32_t q_len = m.query_start_loc[lo + 1] - q_begin;
  const int32_t ctx = m.context_lens[lo];
  if (skip_min_rows > 0 && q_len >= skip_min_rows) return RowInfo{-2, 0};
  return RowInfo{lo, min(max(ctx - q_len + (row - q_begin) + 1, 0), ctx)};
}

// (m, s, acc) := merge of itself and (m2, s2, acc2).
__device__ __forceinline__ void merge_state(float& m, float& s, float (&acc)[kVec], float m2,
                                            float s2, const float (&acc2)[kVec]) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;  // neither side saw a key
  const float a = exp2f(m - mx), b = exp2f(m2 - mx);
  s = s * a + s2 * b;
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc[e] = acc[e] * a + acc2[e] * b;
  m = mx;
}

template <int D, int GP>
struct Smem {
  float acc[kWarps][GP][D];
  float m[kWarps][GP];
  float s[kWarps][GP];
};

// Combines the warps' states of query head g of this CTA into its result:
// the output itself when `direct`, else partial `part` for the merge.
template <int D, int GP>
__device__ void write_result(const AttnArgs& a, const Smem<D, GP>& sm, int32_t row,
                             int32_t hq0, int32_t ng, int32_t part, bool direct) {
  for (int idx = threadIdx.x; idx < ng * D; idx += kThreads) {
    const int g = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm.m[w][g]);
    float sum = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float wt = exp2f(sm.m[w][g] - mx);
        sum += sm.s[w][g] * wt;
        o += sm.acc[w][g][d] * wt;
      }
    }
    const float res = sum > 0.0f ? o / sum : 0.0f;
    const int64_t head_row = int64_t{row} * a.num_q_heads + hq0 + g;
    if (direct) {
      a.out[head_row * D + d] = res;
      if (a.out_bf16 != nullptr) a.out_bf16[head_row * D + d] = __float2bfloat16_rn(res);
    } else {
      const int64_t slot = head_row * a.max_parts + part;
      a.partial_out[slot * D + d] = res;
      if (d == 0) a.partial_lse[slot] = sum > 0.0f ? mx + log2f(sum) : -INFINITY;
    }
  }
}

template <class T, int D, int GP>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(const AttnArgs a) {
  constexpr int kLanes = D / kVec;           // lanes per token: 8 (D = 64) or 16 (D = 128)
  constexpr int kTokPerWarp = 32 / kLanes;   // tokens a warp covers per step
  constexpr int kTokPerStep = kWarps * kTokPerWarp;
  constexpr int kUnroll = GP >= 8 ? 2 : 4;   // steps whose loads are issued together
  __shared__ Smem<D, GP> sm;

  const int32_t row = blockIdx.x;
  const int32_t kvh = blockIdx.y / a.group_chunks;
  const int32_t g0 = int32_t(blockIdx.y % a.group_chunks) * GP;
  const int32_t ng = min(GP, a.group - g0);
  const int32_t hq0 = kvh * a.group + g0;
  const int32_t part = blockIdx.z;
  const RowInfo info = row_info(a.meta, row, a.skip_min_rows);
  if (info.seq == -2) return;
  if (info.seq < 0) {  // padding row: 0, written by part 0 (the merge skips it)
    if (part == 0) {
      for (int idx = threadIdx.x; idx < ng * D; idx += kThreads) {
        const int64_t at = (int64_t{row} * a.num_q_heads + hq0) * D + idx;
        a.out[at] = 0.0f;
        if (a.out_bf16 != nullptr) a.out_bf16[at] = __float2bfloat16_rn(0.0f);
      }
    }
    return;
  }
  int32_t lo = 0, hi = info.kv_end;
  const bool direct = attention_writes_directly(info.kv_end, a.partition);
  if (a.partition > 0) {
    if (part >= attention_num_parts(info.kv_end, a.partition)) return;
    lo = part * a.partition;
    hi = min(hi, lo + a.partition);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane / kLanes, li = lane % kLanes;

  float q[GP][kVec];
  const float* qrow = a.q + int64_t{row} * a.q_stride + int64_t{hq0} * D + li * kVec;
#pragma unroll
  for (int g = 0; g < GP; ++g) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) q[g][e] = g < ng ? qrow[g * D + e] * a.scale_log2 : 0.0f;
  }
  float m[GP], s[GP], acc[GP][kVec];
#pragma unroll
  for (int g = 0; g < GP; ++g) {
    m[g] = -INFINITY;
    s[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[g][e] = 0.0f;
  }

  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const int64_t trow = a.meta.block_table_rows ? a.meta.block_table_rows[info.seq] : info.seq;
  const int32_t* table = a.meta.block_tables + trow * a.meta.max_blocks_per_seq;
  const int32_t bs_mask = a.layout.block_size - 1;
  const int64_t block_stride = a.layout.block_stride();
  const int64_t head_off = int64_t{kvh} * a.layout.head_stride() + li * kVec;

  // base is warp-uniform, so is the loop; j < hi predicates loads and updates.
  for (int32_t base = lo + warp * kTokPerWarp; base < hi; base += kTokPerStep * kUnroll) {
    Raw8<T> kr[kUnroll], vr[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t j = base + u * kTokPerStep + sub;
      valid[u] = j < hi;
      kr[u] = Raw8<T>{};
      vr[u] = Raw8<T>{};
      if (valid[u]) {
        const int64_t phys = table[j >> a.bs_shift];
        const int64_t off = phys * block_stride + head_off + int64_t{j & bs_mask} * D;
        load8(kc + off, kr[u]);
        load8(vc + off, vr[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kVec], vf[kVec];
      to_float8(kr[u], kf);
      to_float8(vr[u], vf);
#pragma unroll
      for (int g = 0; g < GP; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < kVec; ++e) dot += q[g][e] * kf[e];
#pragma unroll
        for (int o = kLanes / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(kFullMask, dot, o);
        if (valid[u] && g < ng) {
          const float m_new = fmaxf(m[g], dot);
          const float alpha = exp2f(m[g] - m_new);  // 0 on the first key
          const float p = exp2f(dot - m_new);
          s[g] = s[g] * alpha + p;
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[g][e] = acc[g][e] * alpha + p * vf[e];
          m[g] = m_new;
        }
      }
    }
  }

  // Merge the warp's lane groups (lanes li, li + kLanes, ... hold one slice).
#pragma unroll
  for (int o = kLanes; o < 32; o <<= 1) {
#pragma unroll
    for (int g = 0; g < GP; ++g) {
      float acc2[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc2[e] = __shfl_xor_sync(kFullMask, acc[g][e], o);
      const float m2 = __shfl_xor_sync(kFullMask, m[g], o);
      const float s2 = __shfl_xor_sync(kFullMask, s[g], o);
      merge_state(m[g], s[g], acc[g], m2, s2, acc2);
    }
  }
  if (sub == 0) {
#pragma unroll
    for (int g = 0; g < GP; ++g) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) sm.acc[warp][g][li * kVec + e] = acc[g][e];
      if (li == 0) {
        sm.m[warp][g] = m[g];
        sm.s[warp][g] = s[g];
      }
    }
  }
  __syncthreads();
  write_result<D, GP>(a, sm, row, hq0, ng, part, direct);
}

// Split-K merge: one CTA per (row, q head); only rows with >= 2 partitions
// (the others were written directly by the attention kernel).
__global__ void __launch_bounds__(kThreads) merge_kernel(const AttnArgs a) {
  const int32_t row = blockIdx.x, hq = blockIdx.y;
  const int32_t D = a.layout.head_dim;
  const int64_t head_row = int64_t{row} * a.num_q_heads + hq;
  float* out = a.out + head_row * D;
  const RowInfo info = row_info(a.meta, row, a.skip_min_rows);
  if (info.seq < 0 || attention_writes_directly(info.kv_end, a.partition)) return;
  const int32_t n = attention_num_parts(info.kv_end, a.partition);
  const float* lse = a.partial_lse + head_row * a.max_parts;
  float mx = -INFINITY;
  for (int32_t i = 0; i < n; ++i) mx = fmaxf(mx, lse[i]);
  for (int32_t d = threadIdx.x; d < D; d += kThreads) {
    float o = 0.0f, wsum = 0.0f;
    if (mx != -INFINITY) {
      for (int32_t i = 0; i < n; ++i) {
        if (lse[i] == -INFINITY) continue;
        const float w = exp2f(lse[i] - mx);
        wsum += w;
        o += w * a.partial_out[(head_row * a.max_parts + i) * D + d];
      }
    }
    const float res = wsum > 0.0f ? o / wsum : 0.0f;
    out[d] = res;
    if (a.out_bf16 != nullptr) a.out_bf16[head_row * D + d] = __float2bfloat16_rn(res);
  }
}

int group_pad(int32_t group) {
  if (group <= 1) return 1;
  if (group <= 2) return 2;
  if (group <= 4) return 4;
  return kMaxGroupChunk;
}

template <class T, int D>
void launch_typed(const AttnArgs& a, int gp, dim3 grid, cudaStream_t stream) {
  switch (gp) {
    case 1: paged_attention_kernel<T, D, 1><<<grid, kThreads, 0, stream>>>(a); break;
    case 2: paged_attention_kernel<T, D, 2><<<grid, kThreads, 0, stream>>>(a); break;
    case 4: paged_attention_kernel<T, D, 4><<<grid, kThreads, 0, stream>>>(a); break;
    default: paged_attention_kernel<T, D, 8><<<grid, kThreads, 0, stream>>>(a); break;
  }
}

template <class T>
void launch_dtype(const AttnArgs& a, int gp, dim3 grid, cudaStream_t stream) {
  if (a.layout.head_dim == 64) {
    launch_typed<T, 64>(a, gp, grid, stream);
  } else {
    launch_typed<T, 128>(a, gp, grid, stream);
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Result<void> check_supported(const PagedAttentionParams& p) {
  const KvCacheLayout& L = p.layout;
  if (L.head_dim != 64 && L.head_dim != 128) {
    return make_error("cuda paged_attention: head_dim " + std::to_string(L.head_dim) +
                      " is not supported (64 or 128)");
  }
  if (L.block_size != 8 && L.block_size != 16 && L.block_size != 32) {
    return make_error("cuda paged_attention: block_size " + std::to_string(L.block_size) +
                      " is not supported (8, 16 or 32)");
  }
  if (L.num_kv_heads <= 0 || p.num_q_heads % L.num_kv_heads != 0) {
    return make_error("cuda paged_attention: num_q_heads must be a multiple of num_kv_heads");
  }
  return {};
}

}  // namespace

int32_t attention_partition_size(const PagedAttentionParams& p, int sm_count) {
  if (p.partition_size >= 0) return p.partition_size;
  constexpr int32_t kMinPartition = 256;
  const int32_t max_ctx = p.meta.max_context_len;
  if (p.layout.num_kv_heads <= 0 || max_ctx < 2 * kMinPartition) return 0;
  const int32_t group = p.num_q_heads / p.layout.num_kv_heads;
  const int64_t ctas = int64_t{p.meta.num_tokens} * p.layout.num_kv_heads *
                       ceil_div(group, group_pad(group));
  const int64_t want = 2 * int64_t{std::max(sm_count, 1)};
  if (ctas == 0 || ctas >= want) return 0;
  const int64_t parts = ceil_div(want, ctas);
  const int64_t size = ceil_div(ceil_div(max_ctx, parts), kMinPartition) * kMinPartition;
  return size >= max_ctx ? 0 : int32_t(size);
}

size_t attention_scratch_bytes(const PagedAttentionParams& p, int32_t partition) {
  if (partition <= 0) return 0;
  const int64_t parts = ceil_div(std::max(p.meta.max_context_len, 1), partition);
  const int64_t heads = int64_t{p.meta.num_tokens} * p.num_q_heads * parts;
  const int64_t out_bytes = ceil_div(heads * p.layout.head_dim * 4, 256) * 256;
  return size_t(out_bytes + heads * 4);
}

Result<void> launch_paged_attention(const PagedAttentionParams& p, int32_t partition,
                                    void* scratch, cudaStream_t stream, int32_t skip_min_rows,
                                    void* out_bf16) {
  if (p.meta.num_tokens <= 0) return {};
  PAGODA_CUDA_TRY(check_supported(p));
  const KvCacheLayout& L = p.layout;
  AttnArgs a{};
  a.q = p.q;
  a.q_stride = p.q_stride;
  a.out = p.out;
  a.out_bf16 = static_cast<__nv_bfloat16*>(out_bf16);
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.layout = L;
  a.num_q_heads = p.num_q_heads;
  a.group = p.num_q_heads / L.num_kv_heads;
  const int gp = group_pad(a.group);
  a.group_chunks = int32_t(ceil_div(a.group, gp));
  a.bs_shift = L.block_size == 8 ? 3 : (L.block_size == 16 ? 4 : 5);
  a.scale_log2 = p.scale * kLog2e;
  a.partition = std::max(partition, 0);
  a.max_parts = a.partition > 0 ? int32_t(ceil_div(std::max(p.meta.max_context_len, 1),
                                                    a.partition))
                                : 1;
  a.meta = p.meta;
  a.skip_min_rows = std::max(skip_min_rows, 0);
  if (int64_t{L.num_kv_heads} * a.group_chunks > kMaxGridYZ || a.max_parts > kMaxGridYZ ||
      p.num_q_heads > kMaxGridYZ) {
    return make_error("cuda paged_attention: grid too large (kv heads x group chunks " +
                      std::to_string(int64_t{L.num_kv_heads} * a.group_chunks) + ", parts " +
                      std::to_string(a.max_parts) + ")");
  }
  if (a.partition > 0) {
    const int64_t heads = int64_t{p.meta.num_tokens} * p.num_q_heads * a.max_parts;
    a.partial_out = static_cast<float*>(scratch);
    a.partial_lse = reinterpret_cast<float*>(static_cast<char*>(scratch) +
                                             ceil_div(heads * L.head_dim * 4, 256) * 256);
  }
  const dim3 grid(unsigned(p.meta.num_tokens), unsigned(L.num_kv_heads * a.group_chunks),
                  unsigned(a.max_parts));
  if (p.dtype == KvDtype::kF32) {
    launch_dtype<float>(a, gp, grid, stream);
  } else {
    launch_dtype<__nv_bfloat16>(a, gp, grid, stream);
  }
  PAGODA_CUDA_TRY(check_launch("paged_attention"));
  if (a.max_parts > 1) {  // else every row has one part and was written directly
    merge_kernel<<<dim3(unsigned(p.meta.num_tokens), unsigned(p.num_q_heads)), kThreads, 0,
                   stream>>>(a);
    PAGODA_CUDA_TRY(check_launch("paged_attention merge"));
  }
  return {};
}

}  // namespace pagoda::gpu::cuda
