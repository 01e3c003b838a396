// CUDA SiLU(gate) * up over the packed [gate | up] rows (SiluMulParams,
// gpu/ops.hpp): a grid-stride loop over the T * I outputs. With out_bf16 (the
// fused silu_mul_matmul of CudaBackend) each output is also stored as bf16.
#include <cuda_bf16.h>

#include <algorithm>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"

namespace pagoda::gpu::cuda {

namespace {

__global__ void silu_mul_kernel(const float* __restrict__ x /*[T, 2I]*/,
                                float* __restrict__ out /*[T, I]*/,
                                __nv_bfloat16* __restrict__ out_bf16 /*[T, I] or null*/,
                                int64_t total, int32_t inter) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / inter, i = e % inter;
    const float g = x[t * 2 * inter + i];
    const float up = x[t * 2 * inter + inter + i];
    const float v = g / (1.0f + expf(-g)) * up;
    out[e] = v;
    if (out_bf16 != nullptr) out_bf16[e] = __float2bfloat16_rn(v);
  }
}

}  // namespace

Result<void> launch_silu_mul(const SiluMulParams& p, cudaStream_t stream, void* out_bf16) {
  const int64_t total = int64_t{p.num_tokens} * p.intermediate;
  if (total <= 0) return {};
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65536);
  silu_mul_kernel<<<unsigned(blocks), threads, 0, stream>>>(
      p.x, p.out, static_cast<__nv_bfloat16*>(out_bf16), total, p.intermediate);
  return check_launch("silu_mul");
}

}  // namespace pagoda::gpu::cuda
