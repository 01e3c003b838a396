// CUDA write of the new tokens' K/V into the paged cache by slot mapping
// (KvCacheWriteParams, gpu/ops.hpp): one CTA per token; slot -1 (padding) is
// skipped (kv_write_token.cuh). F32 caches get exact copies, BF16 caches
// round to nearest even.
#include <cuda_bf16.h>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/cuda/kv_write_token.cuh"

namespace pagoda::gpu::cuda {

namespace {

template <class T>
__global__ void kv_cache_write_kernel(KvCacheWriteParams p) {
  kv_write_token<T>(p, blockIdx.x);
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
