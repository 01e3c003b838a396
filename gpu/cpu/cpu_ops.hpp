// The CPU twins of the ops in gpu/ops.hpp: free functions over host memory,
// parallelised on a ThreadPool. CpuBackend forwards its virtuals here; tests
// may call them directly. Semantics are exactly those documented in ops.hpp.
//
// Thread-safety: a call uses the pool for its duration (the pool runs one
// parallel_for at a time), so calls must come from one thread at a time.
// Scratch objects are grow-only and reused: steady-state calls do not allocate.
// Every result is independent of the pool's thread count (bitwise).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "gpu/ops.hpp"

namespace pagoda::gpu::cpu {

void embedding(const EmbeddingParams& p, ThreadPool& pool);
// rms_norm and silu_mul: with `quantize` (and act [rows, width/32], width a
// multiple of 32) each output row is also quantized for quant_matmul_quantized
// in the same pass, by the quantizer quant_matmul itself would use.
void rms_norm(const RmsNormParams& p, ThreadPool& pool, QuantizeFn quantize = nullptr,
              detail::ActBlock* act = nullptr);
void rope(const RopeParams& p, ThreadPool& pool);
void silu_mul(const SiluMulParams& p, ThreadPool& pool, QuantizeFn quantize = nullptr,
              detail::ActBlock* act = nullptr);
// Gemma's GeGLU and scale/soft-cap (gelu_mul.cpp).
void gelu_tanh_mul(const GeluMulParams& p, ThreadPool& pool);
void scale_cap(const ScaleCapParams& p, ThreadPool& pool);
void kv_cache_write(const KvCacheWriteParams& p, ThreadPool& pool);
// rope then kv_cache_write, token by token in one pass (the same results).
void rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w, ThreadPool& pool);
namespace detail {
// One token's share of rope / kv_cache_write (cos_t, sin_t: rotary_dim/2 scratch).
void rope_token(const RopeParams& p, size_t t, float* cos_t, float* sin_t);
void kv_write_token(const KvCacheWriteParams& p, size_t t);
}  // namespace detail
void copy_blocks(const CopyBlocksParams& p, ThreadPool& pool);

// Scratch of paged_attention: the work list and split-K partials.
struct AttentionScratch {
  struct Item {
    int32_t seq;
    int32_t row_begin, row_end;  // query rows of one sequence (a tile)
    int32_t kv_head;
    int32_t group_begin, group_end;  // q heads (within the GQA group) handled
    int32_t partition;               // -1: unsplit
  };
  std::vector<Item> items;
  std::vector<int64_t> part_base;  // [T] first partial index of the row (split runs)
  std::vector<int32_t> num_parts;  // [T]
  std::vector<float> partial_out;  // [sum parts, Hq, D]
  std::vector<float> partial_lse;  // [sum parts, Hq]
};

// Partition size the CPU picks for partition_size == -1: split only when the
// unsplit work items are too few to occupy the pool and some context is long.
int32_t auto_partition_size(const PagedAttentionParams& p, size_t num_threads);

// Variants of the attention kernels (paged_attention_{portable,avx2,avx512}.cpp).
// Each variant is bitwise batch-, tile- and thread-count-independent on its
// own; AVX2 and AVX-512 give identical bits, portable differs in the last bits.
enum class AttnIsa { kPortable, kAvx2, kAvx512 };
inline constexpr AttnIsa kAllAttnIsas[] = {AttnIsa::kPortable, AttnIsa::kAvx2, AttnIsa::kAvx512};
const char* attn_isa_name(AttnIsa isa);  // "portable", "avx2", "avx512"
// Why the variant cannot run on this CPU/OS ("" when it can).
std::string attn_isa_unsupported_reason(AttnIsa isa);
// The rule for a PAGODA_CPU_ATTN_ISA value (nullptr or "": unset): the named
// variant (portable | avx2 | avx512) when it runs here, else the fastest one
// that does; *why (optional) says which case applied.
AttnIsa choose_attn_isa(const char* env_value, std::string* why = nullptr);
// The variant paged_attention uses: choose_attn_isa(getenv("PAGODA_CPU_ATTN_ISA")),
// computed once; a value that was not honoured is reported on stderr.
AttnIsa best_attn_isa();

// With best_attn_isa(); the explicit form runs `isa`, which must be supported.
// A head_dim the SIMD variants cannot take (not a multiple of 16) runs portable.
void paged_attention(const PagedAttentionParams& p, ThreadPool& pool, AttentionScratch& scratch);
void paged_attention(const PagedAttentionParams& p, ThreadPool& pool, AttentionScratch& scratch,
                     AttnIsa isa);

// Scratch of sample: one working set per concurrently processed row.
struct SamplingScratch {
  struct Worker {
    std::vector<float> z;         // [V] processed logits
    std::vector<float> masked;    // [V] raw logits with the row's mask applied (masked rows)
    std::vector<int32_t> index;   // [V] survivors / sort order
    std::vector<uint32_t> stamp;  // [V] per-row marks for deduplication
    uint32_t generation = 0;
  };
  std::vector<Worker> workers;
};

void sample(const SamplingParams& p, ThreadPool& pool, SamplingScratch& scratch);

}  // namespace pagoda::gpu::cpu
