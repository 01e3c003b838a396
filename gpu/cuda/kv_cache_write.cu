// CUDA write of the new tokens' K/V into the paged cache by slot mapping
// (KvCacheWriteParams, gpu/ops.hpp): one CTA per token; slot -1 (padding) is
// skipped. F32 caches get exact copies, BF16 caches round to nearest even.
#include <cuda_bf16.h>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/cuda/device_vec.cuh"

namespace pagoda::gpu::cuda {

namespace {

template <class T>
__global__ void kv_cache_write_kernel(KvCacheWriteParams p) {
  const int64_t t = blockIdx.x;
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

}  // namespace

Result<void> launch_kv_cache_write(const KvCacheWriteParams& p, cudaStream_t stream) {
  if (p.num_tokens <= 0) return {};
  if (p.dtype == KvDtype::kF32) {
    kv_cache_write_kernel<float><<<p.num_tokens, 128, 0, stream>>>(p);
  } else {
    kv_cache_write_kernel<__nv_bfloat16><<<p.num_tokens, 128, 0, stream>>>(p);
  }
  return check_launch("kv_cache_write");
}

}  // namespace pagoda::gpu::cuda
