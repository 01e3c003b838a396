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
#include <vector>

#include "gpu/cpu/thread_pool.hpp"
#include "gpu/ops.hpp"

namespace pagoda::gpu::cpu {

void embedding(const EmbeddingParams& p, ThreadPool& pool);
void rms_norm(const RmsNormParams& p, ThreadPool& pool);
void rope(const RopeParams& p, ThreadPool& pool);
void silu_mul(const SiluMulParams& p, ThreadPool& pool);
void kv_cache_write(const KvCacheWriteParams& p, ThreadPool& pool);
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

void paged_attention(const PagedAttentionParams& p, ThreadPool& pool, AttentionScratch& scratch);

// Scratch of sample: one working set per concurrently processed row.
struct SamplingScratch {
  struct Worker {
    std::vector<float> z;         // [V] processed logits
    std::vector<int32_t> index;   // [V] survivors / sort order
    std::vector<uint32_t> stamp;  // [V] per-row marks for deduplication
    uint32_t generation = 0;
  };
  std::vector<Worker> workers;
};

void sample(const SamplingParams& p, ThreadPool& pool, SamplingScratch& scratch);

}  // namespace pagoda::gpu::cpu
