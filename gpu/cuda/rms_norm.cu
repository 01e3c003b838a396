// CUDA RMSNorm with the optional fused residual add (RmsNormParams,
// gpu/ops.hpp): one CTA per token row. Each thread owns the same elements in
// both passes, so out may alias x (each element is read before it is written,
// by the same thread). The sum of squares is fp32 (per-thread partials, then a
// deterministic block reduction). With out_bf16 (the fused rms_norm_matmul
// of CudaBackend) each output is also stored as bf16 for the matmul.
#include <cuda_bf16.h>

#include "gpu/cuda/block_reduce.cuh"
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"

namespace pagoda::gpu::cuda {

namespace {

constexpr int kThreads = 256;

// x and out may alias: no __restrict__ on them.
__global__ void __launch_bounds__(kThreads)
rms_norm_kernel(const float* x /*[T, H]*/, float* residual /*[T, H] or null*/,
                const float* __restrict__ weight /*[H]*/, float* out /*[T, H]*/,
                __nv_bfloat16* __restrict__ out_bf16 /*[T, H] or null*/, int32_t hidden,
                float eps) {
  __shared__ float smem[32];
  const int64_t row = int64_t{blockIdx.x} * hidden;
  const float* xr = x + row;
  float* rr = residual == nullptr ? nullptr : residual + row;
  float ss = 0.0f;
  for (int32_t i = threadIdx.x; i < hidden; i += kThreads) {
    float v = xr[i];
    if (rr != nullptr) {
      v += rr[i];
      rr[i] = v;
    }
    ss += v * v;
  }
  ss = block_reduce(ss, SumOp{}, 0.0f, smem);
  const float inv = 1.0f / sqrtf(ss / float(hidden) + eps);
  const float* src = rr != nullptr ? rr : xr;
  float* dst = out + row;
  __nv_bfloat16* dst16 = out_bf16 == nullptr ? nullptr : out_bf16 + row;
  for (int32_t i = threadIdx.x; i < hidden; i += kThreads) {
    const float v = (src[i] * inv) * weight[i];
    dst[i] = v;
    if (dst16 != nullptr) dst16[i] = __float2bfloat16_rn(v);
  }
}

}  // namespace

Result<void> launch_rms_norm(const RmsNormParams& p, cudaStream_t stream, void* out_bf16) {
  if (p.num_tokens <= 0 || p.hidden <= 0) return {};
  rms_norm_kernel<<<p.num_tokens, kThreads, 0, stream>>>(
      p.x, p.residual, p.weight, p.out, static_cast<__nv_bfloat16*>(out_bf16), p.hidden, p.eps);
  return check_launch("rms_norm");
}

}  // namespace pagoda::gpu::cuda
