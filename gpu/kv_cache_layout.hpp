// The paged KV cache's geometry: how (block, kv head, slot in block, dim) maps
// to an element offset. Shared verbatim by the CPU twins and the CUDA kernels.
//
// Per layer, K and V are each one array
//     [num_blocks, num_kv_heads, block_size, head_dim]
// (gpu-notes §2 "recommended first version"): one token's head vector is
// head_dim contiguous elements and consecutive slots of a block are
// contiguous, so a block of one head is block_size * head_dim elements. A
// "slot" is block_id * block_size + offset_in_block (what slot_mapping holds).
// All offsets are int64: a large cache has more than 2^31 elements.
//
// Header-only, PAGODA_HD, no STL: includable from .cu files.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/host_device.hpp"

namespace pagoda::gpu {

// Element type of the cache. The CPU backend stores F32; the CUDA backend is
// meant to store BF16 with the same layout.
enum class KvDtype : int32_t { kF32 = 0, kBF16 = 1 };

PAGODA_HD inline int64_t kv_dtype_bytes(KvDtype d) { return d == KvDtype::kF32 ? 4 : 2; }

// Geometry of one layer's K (or V) array.
struct KvCacheLayout {
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 0;  // tokens per block: 8, 16 or 32 (default 16)
  int64_t num_blocks = 0;

  PAGODA_HD int64_t head_stride() const { return int64_t{block_size} * head_dim; }
  PAGODA_HD int64_t block_stride() const { return int64_t{num_kv_heads} * head_stride(); }
  PAGODA_HD int64_t layer_elements() const { return num_blocks * block_stride(); }

  // Offset of the head_dim-vector of (block, head, offset_in_block).
  PAGODA_HD int64_t offset(int64_t block, int32_t head, int32_t offset_in_block) const {
    return block * block_stride() + int64_t{head} * head_stride() +
           int64_t{offset_in_block} * head_dim;
  }
  // Offset of the head_dim-vector of a slot (block * block_size + offset).
  PAGODA_HD int64_t slot_offset(int64_t slot, int32_t head) const {
    return offset(slot / block_size, head, static_cast<int32_t>(slot % block_size));
  }
};

// What a whole cache (all layers) is made of; num_blocks comes from a budget.
struct KvCacheSpec {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  KvDtype dtype = KvDtype::kF32;

  // Bytes one block costs summed over all layers, K and V.
  int64_t bytes_per_block_all_layers() const {
    return 2 * int64_t{num_layers} * num_kv_heads * block_size * head_dim * kv_dtype_bytes(dtype);
  }
  // How many blocks fit in budget_bytes (0 when not even one fits or the spec is empty).
  int64_t blocks_for_budget(uint64_t budget_bytes) const {
    int64_t per_block = bytes_per_block_all_layers();
    return per_block <= 0 ? 0 : static_cast<int64_t>(budget_bytes / uint64_t(per_block));
  }
  KvCacheLayout layout(int64_t num_blocks) const {
    return KvCacheLayout{num_kv_heads, head_dim, block_size, num_blocks};
  }
};

}  // namespace pagoda::gpu
