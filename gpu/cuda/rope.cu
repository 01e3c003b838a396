// CUDA rotary position embedding (RopeParams, gpu/ops.hpp), in place on q and
// k: one CTA per token. The token's cos/sin table is computed once in double
// (angle = position * inv_freq, like the CPU twin) into shared memory, then
// every (head, pair) of q and k is rotated in fp32.
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"

namespace pagoda::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int32_t kMaxPairs = 256;  // rotary_dim <= 512, as on the CPU

__device__ __forceinline__ void rotate(float* v, int32_t i, int32_t pairs, RopeStyle style,
                                       float c, float s) {
  const int32_t ia = style == RopeStyle::kNeox ? i : 2 * i;
  const int32_t ib = style == RopeStyle::kNeox ? i + pairs : 2 * i + 1;
  const float a = v[ia], b = v[ib];
  v[ia] = a * c - b * s;
  v[ib] = b * c + a * s;
}

__global__ void __launch_bounds__(kThreads) rope_kernel(RopeParams p) {
  __shared__ float cos_t[kMaxPairs], sin_t[kMaxPairs];
  const int64_t t = blockIdx.x;
  const int32_t pairs = p.rotary_dim / 2;
  const double pos = p.positions[t];
  for (int32_t i = threadIdx.x; i < pairs; i += kThreads) {
    const double angle = pos * double(p.inv_freq[i]);
    cos_t[i] = float(cos(angle)) * p.scale;
    sin_t[i] = float(sin(angle)) * p.scale;
  }
  __syncthreads();
  const int32_t k_heads = p.k == nullptr ? 0 : p.num_kv_heads;
  const int32_t work = (p.num_q_heads + k_heads) * pairs;
  for (int32_t w = threadIdx.x; w < work; w += kThreads) {
    const int32_t h = w / pairs, i = w % pairs;
    float* v = h < p.num_q_heads
                   ? p.q + t * p.q_stride + int64_t{h} * p.head_dim
                   : p.k + t * p.k_stride + int64_t{h - p.num_q_heads} * p.head_dim;
    rotate(v, i, pairs, p.style, cos_t[i], sin_t[i]);
  }
}

}  // namespace

Result<void> launch_rope(const RopeParams& p, cudaStream_t stream) {
  if (p.num_tokens <= 0 || p.rotary_dim <= 0) return {};
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim || p.rotary_dim / 2 > kMaxPairs) {
    return make_error("cuda rope: unsupported rotary_dim " + std::to_string(p.rotary_dim) +
                      " (head_dim " + std::to_string(p.head_dim) + ")");
  }
  rope_kernel<<<p.num_tokens, kThreads, 0, stream>>>(p);
  return check_launch("rope");
}

}  // namespace pagoda::gpu::cuda
