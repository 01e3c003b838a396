// CUDA linear layers (MatmulParams, gpu/ops.hpp) through cuBLAS (gpu-notes §4).
// y[M, N] = x[M, K] . W[N, K]^T (+ bias), all row-major. Seen column-major,
// y^T[N, M] = W_cm[K, N]^T . x_cm[K, M]: the "TN" GEMM with m = N, n = M, k = K,
// lda = K, ldb = x row stride, ldc = N.
//  - BF16 weights, M <= 8: the GEMV kernel of gemv.cu on x as it is (it
//    rounds x to bf16 on load and adds the bias), no conversion kernel.
//  - BF16 weights otherwise: x is rounded to bf16 into scratch ([M, K]
//    packed), then cublasGemmEx(A, B bf16; C fp32; CUBLAS_COMPUTE_32F).
//    run_matmul_bf16 takes x already in bf16 (written by the fused producer
//    kernels: rms_norm, silu_mul), so neither path converts then.
//  - F32 weights: cublasSgemm on x in place (the handle's math mode is
//    CUBLAS_DEFAULT_MATH: no TF32).
// The bias is added by a small kernel afterwards.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"

namespace pagoda::gpu::cuda {

namespace {

__global__ void to_bf16_kernel(const float* __restrict__ x /*[M, K] rows stride apart*/,
                               int64_t stride, __nv_bfloat16* __restrict__ xb /*[M, K]*/,
                               int64_t M, int64_t K) {
  const int64_t total = M * K;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    xb[e] = __float2bfloat16_rn(x[(e / K) * stride + e % K]);
  }
}

__global__ void add_bias_kernel(float* __restrict__ y /*[M, N]*/,
                                const float* __restrict__ bias /*[N]*/, int64_t M, int64_t N) {
  const int64_t total = M * N;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    y[e] += bias[e % N];
  }
}

unsigned grid_for(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, 65536));
}

Result<void> check_shape(const MatmulParams& p) {
  const LinearWeight& w = p.weight;
  if (w.n <= 0 || w.k <= 0 || p.m < 0 || p.x_stride < w.k) {
    return make_error("cuda matmul: bad shape M=" + std::to_string(p.m) + " N=" +
                      std::to_string(w.n) + " K=" + std::to_string(w.k) + " x_stride=" +
                      std::to_string(p.x_stride));
  }
  if (w.n > INT_MAX || w.k > INT_MAX || p.m > INT_MAX || p.x_stride > INT_MAX) {
    return make_error("cuda matmul: dimensions exceed cuBLAS's int range");
  }
  return {};
}

}  // namespace

size_t matmul_scratch_bytes(const MatmulParams& p) {
  if (p.weight.format != WeightFormat::BF16 || p.m <= 0) return 0;
  return size_t(p.m) * size_t(p.weight.k) * sizeof(__nv_bfloat16);
}

namespace {

// cuBLAS on bf16 x ([M, K] packed), then the bias.
Result<void> gemm_bf16(const MatmulParams& p, const __nv_bfloat16* xb, cublasHandle_t handle,
                       cudaStream_t stream) {
  const LinearWeight& w = p.weight;
  const int m = int(w.n), n = int(p.m), k = int(w.k);
  const float alpha = 1.0f, beta = 0.0f;
  PAGODA_CUDA_TRY(check_cublas(
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data, CUDA_R_16BF, k, xb,
                   CUDA_R_16BF, k, &beta, p.y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx"));
  if (p.bias != nullptr) {
    add_bias_kernel<<<grid_for(p.m * w.n, 256), 256, 0, stream>>>(p.y, p.bias, p.m, w.n);
    PAGODA_CUDA_TRY(check_launch("matmul: bias"));
  }
  return {};
}

}  // namespace

Result<void> run_matmul(const MatmulParams& p, cublasHandle_t handle, void* scratch,
                        cudaStream_t stream, bool allow_gemv) {
  const LinearWeight& w = p.weight;
  if (w.format != WeightFormat::BF16 && w.format != WeightFormat::F32) {
    return make_error("cuda matmul: weight format " + std::string(format_name(w.format)) +
                      " is not on the device; prepare it first (CudaBackend::prepare_weight)");
  }
  PAGODA_CUDA_TRY(check_shape(p));
  if (p.m == 0) return {};
  if (w.format == WeightFormat::BF16) {
    if (allow_gemv && gemv_unsupported(p, p.x, p.x_stride, false) == nullptr) {
      return launch_gemv(p, p.x, p.x_stride, false, stream);
    }
    auto* xb = static_cast<__nv_bfloat16*>(scratch);
    to_bf16_kernel<<<grid_for(p.m * w.k, 256), 256, 0, stream>>>(p.x, p.x_stride, xb, p.m, w.k);
    PAGODA_CUDA_TRY(check_launch("matmul: x to bf16"));
    return gemm_bf16(p, xb, handle, stream);
  }
  const int m = int(w.n), n = int(p.m), k = int(w.k);
  const float alpha = 1.0f, beta = 0.0f;
  PAGODA_CUDA_TRY(check_cublas(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha,
                                           static_cast<const float*>(w.data), k, p.x,
                                           int(p.x_stride), &beta, p.y, m),
                               "cublasSgemm"));
  if (p.bias != nullptr) {
    add_bias_kernel<<<grid_for(p.m * w.n, 256), 256, 0, stream>>>(p.y, p.bias, p.m, w.n);
    PAGODA_CUDA_TRY(check_launch("matmul: bias"));
  }
  return {};
}

Result<void> run_matmul_bf16(const MatmulParams& p, const void* xb, cublasHandle_t handle,
                             cudaStream_t stream) {
  if (p.weight.format != WeightFormat::BF16) {
    return make_error("cuda matmul: run_matmul_bf16 needs a BF16 weight");
  }
  PAGODA_CUDA_TRY(check_shape(p));
  if (p.m == 0) return {};
  if (gemv_unsupported(p, xb, p.weight.k, true) == nullptr) {
    return launch_gemv(p, xb, p.weight.k, true, stream);
  }
  return gemm_bf16(p, static_cast<const __nv_bfloat16*>(xb), handle, stream);
}

}  // namespace pagoda::gpu::cuda
