// CUDA rotary position embedding (RopeParams, gpu/ops.hpp), in place on q and
// k: one CTA per token. The token's cos/sin table is computed once in double
// (angle = position * inv_freq, like the CPU twin) into shared memory, then
// every (head, pair) of q and k is rotated in fp32.
// rope_kv_write_kernel (the decode path's fused pair): the same rotation of
// token t, a __syncthreads (which also orders the block's global writes),
// then kv_write_token copies the rotated k[t] and v[t] into the cache: one
// launch instead of two, with the results of rope then kv_cache_write.
#include <cuda_bf16.h>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/cuda/kv_write_token.cuh"

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

// Rotates token t's q and k heads; cos_t / sin_t: __shared__ [kMaxPairs].
// Called by every thread of the block (it contains __syncthreads).
__device__ void rope_token(const RopeParams& p, int64_t t, float* cos_t, float* sin_t) {
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

__global__ void __launch_bounds__(kThreads) rope_kernel(RopeParams p) {
  __shared__ float cos_t[kMaxPairs], sin_t[kMaxPairs];
  rope_token(p, blockIdx.x, cos_t, sin_t);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
rope_kv_write_kernel(RopeParams r, KvCacheWriteParams w) {
  __shared__ float cos_t[kMaxPairs], sin_t[kMaxPairs];
  rope_token(r, blockIdx.x, cos_t, sin_t);
  __syncthreads();  // the rotated k of this token is written (and visible) first
  kv_write_token<T>(w, blockIdx.x);
}

Result<void> check_rotary(const RopeParams& p) {
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim || p.rotary_dim / 2 > kMaxPairs) {
    return make_error("cuda rope: unsupported rotary_dim " + std::to_string(p.rotary_dim) +
                      " (head_dim " + std::to_string(p.head_dim) + ")");
  }
  return {};
}

}  // namespace

Result<void> launch_rope(const RopeParams& p, cudaStream_t stream) {
  if (p.num_tokens <= 0 || p.rotary_dim <= 0) return {};
  PAGODA_CUDA_TRY(check_rotary(p));
  rope_kernel<<<p.num_tokens, kThreads, 0, stream>>>(p);
  return check_launch("rope");
}

// The k that rope rotates must be the k that the write reads, row for row.
bool rope_kv_fusable(const RopeParams& r, const KvCacheWriteParams& w) {
  return r.num_tokens == w.num_tokens && r.num_tokens > 0 && r.rotary_dim > 0 &&
         r.k != nullptr && r.k == w.k && r.k_stride == w.k_stride &&
         r.num_kv_heads == w.layout.num_kv_heads && r.head_dim == w.layout.head_dim;
}

Result<void> launch_rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w,
                                  cudaStream_t stream) {
  if (!rope_kv_fusable(r, w)) {
    return make_error("cuda rope_kv_write: the rope's k rows are not the write's");
  }
  PAGODA_CUDA_TRY(check_rotary(r));
  if (w.dtype == KvDtype::kF32) {
    rope_kv_write_kernel<float><<<r.num_tokens, kThreads, 0, stream>>>(r, w);
  } else {
    rope_kv_write_kernel<__nv_bfloat16><<<r.num_tokens, kThreads, 0, stream>>>(r, w);
  }
  return check_launch("rope_kv_write");
}

}  // namespace pagoda::gpu::cuda
