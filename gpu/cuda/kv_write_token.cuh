// The device body of kv_cache_write for one token (KvCacheWriteParams,
// gpu/ops.hpp), shared by kv_cache_write.cu and the fused rope_kv_write of
// rope.cu: the block's threads copy k[t] and v[t] (Hk * D fp32 each) into the
// cache slot slot_mapping[t], converted to T (bf16: round to nearest even);
// a slot of -1 (padding) or outside the cache is skipped. Offsets are int64.
// Requires: called by all threads of the block for the same t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/cuda/device_vec.cuh"
#include "gpu/ops.hpp"

namespace pagoda::gpu::cuda {

template <class T>
__device__ __forceinline__ void kv_write_token(const KvCacheWriteParams& p, int64_t t) {
  const int64_t slot = p.slot_mapping[t];
  const KvCacheLayout& L = p.layout;
  if (slot < 0 || slot >= L.num_blocks * L.block_size) return;
  T* kc = static_cast<T*>(p.k_cache);
  T* vc = static_cast<T*>(p.v_cache);
  const float* k = p.k + t * p.k_stride;
  const float* v = p.v + t * p.v_stride;
  const int32_t per_token = L.num_kv_heads * L.head_dim;
  for (int32_t e = threadIdx.x; e < per_token; e += blockDim.x) {
    const int32_t h = e / L.head_dim, d = e % L.head_dim;
    const int64_t dst = L.slot_offset(slot, h) + d;
    kc[dst] = from_float<T>(k[e]);
    vc[dst] = from_float<T>(v[e]);
  }
}

}  // namespace pagoda::gpu::cuda
