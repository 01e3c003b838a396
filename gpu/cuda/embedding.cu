// CUDA embedding gather (EmbeddingParams, gpu/ops.hpp): one CTA per token row;
// an id outside [0, num_rows) gives a zero row. Exact copy of fp32 values.
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"

namespace pagoda::gpu::cuda {

namespace {

__global__ void embedding_kernel(const float* __restrict__ table /*[rows, H]*/,
                                 const int32_t* __restrict__ ids /*[T]*/,
                                 float* __restrict__ out /*[T, H]*/, int32_t hidden,
                                 int64_t num_rows) {
  const int64_t t = blockIdx.x;
  const int64_t id = ids[t];
  float* dst = out + t * hidden;
  if (id < 0 || id >= num_rows) {
    for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = 0.0f;
    return;
  }
  const float* src = table + id * hidden;
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

Result<void> launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.num_tokens <= 0 || p.hidden <= 0) return {};
  if (p.table == nullptr) return make_error("embedding: a quantized table is a CPU-only input");
  embedding_kernel<<<p.num_tokens, 256, 0, stream>>>(p.table, p.ids, p.out, p.hidden,
                                                     p.num_rows);
  return check_launch("embedding");
}

}  // namespace pagoda::gpu::cuda
