// Host-side launchers of the CUDA kernels, one per op of gpu/ops.hpp (the
// semantics are exactly those documented there; the CPU twins in gpu/cpu are
// the reference). Each launcher enqueues its kernel(s) on `stream` and returns
// the launch status, or an Error without launching when the parameters are
// outside what the kernel supports (e.g. an unsupported head_dim).
//
// Pointers in the params are device pointers (ops.hpp's convention). Scratch
// memory is the caller's (CudaBackend): a launcher states how much it needs
// (*_scratch_bytes) and receives at least that much, 256-byte aligned.
// Thread-safety: like the Backend, one issuing thread at a time per stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpu/ops.hpp"
#include "gpu/result.hpp"

namespace pagoda::gpu::cuda {

Result<void> launch_embedding(const EmbeddingParams& p, cudaStream_t stream);
Result<void> launch_kv_cache_write(const KvCacheWriteParams& p, cudaStream_t stream);
Result<void> launch_rope(const RopeParams& p, cudaStream_t stream);
Result<void> launch_copy_blocks(const CopyBlocksParams& p, cudaStream_t stream);

// ---- the producers of the decode path, fused (see CudaBackend) -----------------
// out_bf16 (nullable; [T, width] packed, width = hidden / intermediate) also
// receives bf16(out) (round to nearest even): the matmul's input, so that
// no separate conversion kernel runs. out itself is written as without it.
Result<void> launch_rms_norm(const RmsNormParams& p, cudaStream_t stream,
                             void* out_bf16 = nullptr);
Result<void> launch_silu_mul(const SiluMulParams& p, cudaStream_t stream,
                             void* out_bf16 = nullptr);
// rope(r) then kv_cache_write(w) in one kernel (one CTA per token), with the
// results of the two launches in order. Requires rope_kv_fusable(r, w); an
// Error otherwise.
bool rope_kv_fusable(const RopeParams& r, const KvCacheWriteParams& w);
Result<void> launch_rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w,
                                  cudaStream_t stream);

// ---- paged attention (paged_attention.cu) -------------------------------------
// The partition size actually used: p.partition_size when >= 0, else a choice
// from the grid size and sm_count (0 = unsplit). Always a value whose
// partition count ceil(max_context_len / P) fits the grid's z dimension.
int32_t attention_partition_size(const PagedAttentionParams& p, int sm_count);
// Scratch for split-K partials with partition size P (0 when P == 0):
// fp32 partial outputs [T, Hq, parts, D] and log2-sum-exps [T, Hq, parts].
size_t attention_scratch_bytes(const PagedAttentionParams& p, int32_t partition);
// Supports head_dim 64 and 128, block sizes 8/16/32, F32 and BF16 caches, any
// GQA group size. partition must come from attention_partition_size or be a
// value >= 0 whose part count fits (checked: an Error otherwise).
// skip_min_rows > 0: the rows of sequences with >= skip_min_rows query rows
// are not touched (launch_tiled_prefill writes them). out_bf16 (nullable,
// [T, Hq * D] like out) also receives bf16(out) of every row written.
Result<void> launch_paged_attention(const PagedAttentionParams& p, int32_t partition,
                                    void* scratch, cudaStream_t stream,
                                    int32_t skip_min_rows = 0, void* out_bf16 = nullptr);

// ---- tiled prefill attention (prefill_attention.cu) ---------------------------
// FlashAttention-2 style over the paged cache, for the sequences with >=
// min_rows (>= 1) query rows; every other row (other sequences, padding) is
// left untouched. One CTA per (64-row query tile of one sequence, q head):
// Q tile and 64-key K/V tiles in shared memory (bf16), S = QK^T and O += PV
// on tensor cores (WMMA m16n16k16 bf16, fp32 accumulate), online softmax in
// fp32 base 2 with P rounded to bf16 for the PV product, causal mask bottom-
// right aligned, GQA by kv head = q head / G. Keys at or past a row's end are
// masked and their K/V rows zero-filled (unused slots are never read).
// tiled_prefill_supported: BF16 cache, head_dim 64 or 128, block size 8/16/32,
// Hq a multiple of Hk; the launcher returns an Error otherwise.
bool tiled_prefill_supported(const PagedAttentionParams& p);
Result<void> launch_tiled_prefill(const PagedAttentionParams& p, int32_t min_rows,
                                  cudaStream_t stream);

// ---- sampling (sampling.cu) -----------------------------------------------------
// Scratch: the processed logits, fp32 [R, V].
size_t sampling_scratch_bytes(const SamplingParams& p);
Result<void> launch_sample(const SamplingParams& p, void* scratch, cudaStream_t stream);

// ---- matmul (matmul.cu) ---------------------------------------------------------
// Weight formats on the device: BF16 (x is rounded to bf16, fp32
// accumulation and fp32 output: the GEMV kernel for M <= 8 when gemv
// supports the shape, else cuBLAS GemmEx) and F32 (cuBLAS SGEMM, no TF32).
// Other formats are an Error: prepare them first (CudaBackend::prepare_weight).
// Scratch: x as bf16, [M, K] (0 bytes for F32 weights). allow_gemv = false:
// cuBLAS for every M (BackendOptions::decode_kernels off).
size_t matmul_scratch_bytes(const MatmulParams& p);
Result<void> run_matmul(const MatmulParams& p, cublasHandle_t handle, void* scratch,
                        cudaStream_t stream, bool allow_gemv = true);
// The same for a BF16 weight whose x is already bf16: xb [M, K] packed (p.x
// and p.x_stride are not read).
Result<void> run_matmul_bf16(const MatmulParams& p, const void* xb, cublasHandle_t handle,
                             cudaStream_t stream);

// ---- BF16 GEMV for M <= 8 (gemv.cu) -----------------------------------------------
// nullptr when launch_gemv takes p with x at `x` (rows x_stride elements apart,
// fp32 or bf16): BF16 weight, 1 <= M <= 8, K % 8 == 0, 16-byte aligned W,
// x and x rows; else the reason it does not (the caller then uses cuBLAS).
const char* gemv_unsupported(const MatmulParams& p, const void* x, int64_t x_stride,
                             bool x_bf16);
// y = x . W^T (+ bias) with the bf16-rounded x, fp32 accumulation (gemv.cu's
// header has the layout). An Error, nothing launched, when unsupported.
Result<void> launch_gemv(const MatmulParams& p, const void* x, int64_t x_stride, bool x_bf16,
                         cudaStream_t stream);

}  // namespace pagoda::gpu::cuda
