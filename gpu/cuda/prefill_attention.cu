// Tiled prefill attention on tensor cores (launch_tiled_prefill, cuda_ops.cuh):
// FlashAttention-2 over the paged BF16 cache (gpu-notes §3, "v2").
//
// Work split: one CTA (4 warps) per (64-row query tile of one sequence, q
// head); warp w owns the tile's rows [16w, 16w + 16). Tiles are numbered as
// gpu/prefill_tiles.hpp says: floor(T / 64) + S CTAs along x, each finds its
// sequence by a binary search (surplus CTAs exit). Sequences below min_rows query rows
// and padding rows are not touched (the row kernel serves them).
//
// Per CTA: Q (fp32 -> bf16) is staged through shared memory once into WMMA
// A fragments kept in registers. Then for each 64-key tile up to the tile's
// last key: K and V rows are gathered through the block table into shared
// memory (bf16, rows padded by 8 elements against bank conflicts); keys past
// the tile's last needed key are zero-filled, never loaded (unused slots may
// hold NaN). Each warp computes its 16 x 64 block of S = Q K^T with WMMA
// (m16n16k16, fp32 accumulate) into shared memory, runs the online softmax
// on it row by row in fp32 base 2 (scale * log2 e applied to S; mask: key j
// is valid for the row at position pos iff j <= pos), writes P rounded to
// bf16 over its own S rows, rescales its rows of the fp32 O accumulator in
// shared memory by exp2(m_old - m_new) and adds P V with WMMA. The row sum l
// adds the bf16-rounded p, so that l and P V see the same weights. At the
// end O / l is written (a row that saw no key writes 0; none can: key 0 is
// always valid).
//
// Shared memory: K, V tiles 2 x 64 x (D + 8) bf16, S/P 64 x 68 fp32, O
// 64 x (D + 4) fp32, and three per-row floats: 84.75 KiB at D = 128 and
// 52.75 KiB at D = 64 (dynamic, opted in above 48 KiB). WMMA pointers are
// 32-byte aligned: every fragment starts at a multiple of 16 rows and 16
// columns of these strides. All cache offsets are int64.
#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <string>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/prefill_tiles.hpp"

namespace pagoda::gpu::cuda {

namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kBM = 64;  // query rows per tile
constexpr int kBN = 64;  // keys per KV tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kLdS = kBN + 4;      // fp32 S row stride (elements)
constexpr int kLdP = 2 * kLdS;     // bf16 P row stride: P row r overlays S row r
constexpr float kLog2e = 1.4426950408889634f;
constexpr unsigned kFull = 0xffffffffu;

template <int D>
struct Geometry {
  static constexpr int kLdKV = D + 8;  // bf16 K/V (and Q staging) row stride
  static constexpr int kLdO = D + 4;   // fp32 O row stride
  static constexpr size_t kKvBytes = size_t(kBN) * kLdKV * 2;
  static constexpr size_t kSBytes = size_t(kBM) * kLdS * 4;
  static constexpr size_t kOBytes = size_t(kBM) * kLdO * 4;
  static constexpr size_t kK = 0, kV = kKvBytes, kS = 2 * kKvBytes, kO = kS + kSBytes;
  static constexpr size_t kRows = kO + kOBytes;  // m, l, alpha: 3 x kBM floats
  static constexpr size_t kBytes = kRows + 3 * kBM * 4;
};

struct TileArgs {
  const float* q;
  int64_t q_stride;
  float* out;
  const bf16* k_cache;
  const bf16* v_cache;
  KvCacheLayout layout;
  int32_t num_q_heads, group, bs_shift, min_rows;
  float scale_log2;
  AttentionMetadata meta;
};

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Gathers keys [n0, n0 + kBN) of kv head kvh into smem K/V (zeros at j >= kv_hi).
template <int D>
__device__ void load_kv_tile(const TileArgs& a, const int32_t* table, int32_t kvh, int32_t n0,
                             int32_t kv_hi, bf16* ks, bf16* vs) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  const int32_t bs_mask = a.layout.block_size - 1;
  const int64_t head_off = int64_t{kvh} * a.layout.head_stride();
  for (int idx = threadIdx.x; idx < kBN * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8;
    const int32_t j = n0 + r;
    uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
    if (j < kv_hi) {
      const int64_t off = int64_t{table[j >> a.bs_shift]} * a.layout.block_stride() + head_off +
                          int64_t{j & bs_mask} * D + c;
      kv = *reinterpret_cast<const uint4*>(a.k_cache + off);
      vv = *reinterpret_cast<const uint4*>(a.v_cache + off);
    }
    *reinterpret_cast<uint4*>(ks + r * Geometry<D>::kLdKV + c) = kv;
    *reinterpret_cast<uint4*>(vs + r * Geometry<D>::kLdKV + c) = vv;
  }
}

// Warp `warp`'s online-softmax update over its 16 rows of S (smem), writing
// P (bf16) over them. row0: the tile's first local row; pos0: its position.
__device__ void softmax_rows(const TileArgs& a, float* s, float* m_row, float* l_row,
                             float* alpha_row, int warp, int32_t n0, int32_t pos0,
                             int32_t rows_here) {
  const int lane = threadIdx.x % 32;
  for (int r = 0; r < 16; ++r) {
    const int row = warp * 16 + r;
    const int32_t kv_end = row < rows_here ? pos0 + row + 1 : 0;  // keys [0, kv_end)
    float* srow = s + row * kLdS;
    const int32_t j0 = n0 + lane, j1 = n0 + lane + 32;
    const float x0 = j0 < kv_end ? srow[lane] * a.scale_log2 : -INFINITY;
    const float x1 = j1 < kv_end ? srow[lane + 32] * a.scale_log2 : -INFINITY;
    const float m_old = m_row[row];
    const float m_new = fmaxf(m_old, warp_max(fmaxf(x0, x1)));
    const bf16 p0 = __float2bfloat16(x0 == -INFINITY ? 0.0f : exp2f(x0 - m_new));
    const bf16 p1 = __float2bfloat16(x1 == -INFINITY ? 0.0f : exp2f(x1 - m_new));
    const float sum = warp_sum(__bfloat162float(p0) + __bfloat162float(p1));
    __syncwarp();  // every lane has read S row r before P overwrites it
    bf16* prow = reinterpret_cast<bf16*>(srow);
    prow[lane] = p0;
    prow[lane + 32] = p1;
    if (lane == 0) {
      const float alpha = m_old == -INFINITY ? 0.0f : exp2f(m_old - m_new);
      alpha_row[row] = alpha;
      l_row[row] = l_row[row] * alpha + sum;
      m_row[row] = m_new;
    }
  }
  __syncwarp();
}

template <int D>
__global__ void __launch_bounds__(kThreads) tiled_prefill_kernel(const TileArgs a) {
  using G = Geometry<D>;
  constexpr int kDF = D / 16;  // 16-wide fragments along D
  extern __shared__ __align__(128) unsigned char smem[];
  int32_t seq = 0, tile = 0;
  if (!find_prefill_tile(a.meta.query_start_loc, a.meta.num_seqs, kBM, int32_t(blockIdx.x), seq,
                         tile)) {
    return;
  }
  const int32_t q_begin = a.meta.query_start_loc[seq];
  const int32_t q_len = a.meta.query_start_loc[seq + 1] - q_begin;
  if (q_len < a.min_rows) return;
  const int32_t hq = blockIdx.y, kvh = hq / a.group;
  const int32_t row0 = tile * kBM, rows_here = min(kBM, q_len - row0);
  const int32_t pos0 = a.meta.context_lens[seq] - q_len + row0;
  const int32_t kv_hi = pos0 + rows_here;  // the last row attends keys [0, kv_hi)
  const int64_t trow = a.meta.block_table_rows ? a.meta.block_table_rows[seq] : seq;
  const int32_t* table = a.meta.block_tables + trow * a.meta.max_blocks_per_seq;

  bf16* ks = reinterpret_cast<bf16*>(smem + G::kK);
  bf16* vs = reinterpret_cast<bf16*>(smem + G::kV);
  float* s = reinterpret_cast<float*>(smem + G::kS);
  float* o = reinterpret_cast<float*>(smem + G::kO);
  float* m_row = reinterpret_cast<float*>(smem + G::kRows);
  float* l_row = m_row + kBM;
  float* alpha_row = l_row + kBM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Q tile -> bf16 in the K buffer -> A fragments; O, m, l initialised.
  for (int idx = threadIdx.x; idx < kBM * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    const float x = r < rows_here
                        ? a.q[int64_t{q_begin + row0 + r} * a.q_stride + int64_t{hq} * D + c]
                        : 0.0f;
    ks[r * G::kLdKV + c] = __float2bfloat16(x);
  }
  for (int idx = threadIdx.x; idx < kBM * G::kLdO; idx += kThreads) o[idx] = 0.0f;
  for (int idx = threadIdx.x; idx < kBM; idx += kThreads) {
    m_row[idx] = -INFINITY;
    l_row[idx] = 0.0f;
  }
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qf[kDF];
#pragma unroll
  for (int kf = 0; kf < kDF; ++kf) {
    wmma::load_matrix_sync(qf[kf], ks + warp * 16 * G::kLdKV + kf * 16, G::kLdKV);
  }

  for (int32_t n0 = 0; n0 < kv_hi; n0 += kBN) {
    __syncthreads();  // the previous tile's K/V (or the Q staging) is consumed
    load_kv_tile<D>(a, table, kvh, n0, kv_hi, ks, vs);
    __syncthreads();
    // S[16 rows of this warp, 64 keys] = Q K^T.
#pragma unroll
    for (int nf = 0; nf < kBN / 16; ++nf) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sacc;
      wmma::fill_fragment(sacc, 0.0f);
#pragma unroll
      for (int kf = 0; kf < kDF; ++kf) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kfrag;
        wmma::load_matrix_sync(kfrag, ks + nf * 16 * G::kLdKV + kf * 16, G::kLdKV);
        wmma::mma_sync(sacc, qf[kf], kfrag, sacc);
      }
      wmma::store_matrix_sync(s + warp * 16 * kLdS + nf * 16, sacc, kLdS, wmma::mem_row_major);
    }
    __syncwarp();
    softmax_rows(a, s, m_row, l_row, alpha_row, warp, n0, pos0, rows_here);
    for (int idx = lane; idx < 16 * D; idx += 32) {
      const int row = warp * 16 + idx / D;
      o[row * G::kLdO + idx % D] *= alpha_row[row];
    }
    __syncwarp();
    // O[16 rows, D] += P V.
    const bf16* p = reinterpret_cast<const bf16*>(s + warp * 16 * kLdS);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pf[kBN / 16];
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) wmma::load_matrix_sync(pf[kk], p + kk * 16, kLdP);
#pragma unroll
    for (int df = 0; df < kDF; ++df) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> oacc;
      float* otile = o + warp * 16 * G::kLdO + df * 16;
      wmma::load_matrix_sync(oacc, otile, G::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vfrag;
        wmma::load_matrix_sync(vfrag, vs + kk * 16 * G::kLdKV + df * 16, G::kLdKV);
        wmma::mma_sync(oacc, pf[kk], vfrag, oacc);
      }
      wmma::store_matrix_sync(otile, oacc, G::kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  for (int idx = lane; idx < 16 * D; idx += 32) {
    const int row = warp * 16 + idx / D, c = idx % D;
    if (row >= rows_here) continue;
    const float l = l_row[row];
    const int64_t head_row = int64_t{q_begin + row0 + row} * a.num_q_heads + hq;
    a.out[head_row * D + c] = l > 0.0f ? o[row * G::kLdO + c] / l : 0.0f;
  }
}

template <int D>
Result<void> launch_d(const TileArgs& a, dim3 grid, cudaStream_t stream) {
  constexpr size_t kBytes = Geometry<D>::kBytes;
  static const cudaError_t opted = cudaFuncSetAttribute(
      tiled_prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kBytes));
  PAGODA_CUDA_TRY(check_cuda(opted, "tiled prefill: cudaFuncSetAttribute (shared memory)"));
  tiled_prefill_kernel<D><<<grid, kThreads, kBytes, stream>>>(a);
  return check_launch("tiled prefill attention");
}

}  // namespace

bool tiled_prefill_supported(const PagedAttentionParams& p) {
  const KvCacheLayout& L = p.layout;
  return p.dtype == KvDtype::kBF16 && (L.head_dim == 64 || L.head_dim == 128) &&
         (L.block_size == 8 || L.block_size == 16 || L.block_size == 32) && L.num_kv_heads > 0 &&
         p.num_q_heads > 0 && p.num_q_heads % L.num_kv_heads == 0 && p.num_q_heads <= 65535;
}

Result<void> launch_tiled_prefill(const PagedAttentionParams& p, int32_t min_rows,
                                  cudaStream_t stream) {
  if (!tiled_prefill_supported(p)) {
    return make_error("cuda tiled prefill: needs a BF16 cache, head_dim 64 or 128, block size "
                      "8/16/32 and num_q_heads a multiple of num_kv_heads");
  }
  if (p.meta.num_tokens <= 0 || p.meta.num_seqs <= 0) return {};
  const KvCacheLayout& L = p.layout;
  TileArgs a{};
  a.q = p.q;
  a.q_stride = p.q_stride;
  a.out = p.out;
  a.k_cache = static_cast<const bf16*>(p.k_cache);
  a.v_cache = static_cast<const bf16*>(p.v_cache);
  a.layout = L;
  a.num_q_heads = p.num_q_heads;
  a.group = p.num_q_heads / L.num_kv_heads;
  a.bs_shift = L.block_size == 8 ? 3 : (L.block_size == 16 ? 4 : 5);
  a.min_rows = min_rows < 1 ? 1 : min_rows;
  a.scale_log2 = p.scale * kLog2e;
  a.meta = p.meta;
  const int64_t tiles = prefill_tile_count(p.meta.num_tokens, p.meta.num_seqs, kBM);
  if (tiles > 0x7fffffff) return make_error("cuda tiled prefill: grid too large");
  const dim3 grid(unsigned(tiles), unsigned(p.num_q_heads));
  return L.head_dim == 64 ? launch_d<64>(a, grid, stream) : launch_d<128>(a, grid, stream);
}

}  // namespace pagoda::gpu::cuda
