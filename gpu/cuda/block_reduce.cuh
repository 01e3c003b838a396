// Deterministic warp and block reductions. The combine order depends only on
// the thread layout (xor butterflies, then one value per warp through shared
// memory), so a fixed blockDim gives bitwise reproducible results; every
// thread of the block receives the result.
//
// block_reduce requires: called by every thread of the block (it contains
// __syncthreads), blockDim.x a multiple of 32 and at most 1024, `smem` a
// __shared__ array of 32 T, and an `op` that is commutative (then all lanes of
// a butterfly hold bitwise identical values).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::gpu::cuda {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

// (value, index) with "larger value wins, then lower index": a commutative argmax.
struct ArgMax {
  float value;
  int32_t index;
};

__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  if (a.value > b.value) return a;
  if (b.value > a.value) return b;
  return a.index < b.index ? a : b;
}

template <class T>
__device__ __forceinline__ T shfl_xor(T v, int offset) {
  return __shfl_xor_sync(kFullMask, v, offset);
}

template <>
__device__ __forceinline__ ArgMax shfl_xor<ArgMax>(ArgMax v, int offset) {
  return ArgMax{__shfl_xor_sync(kFullMask, v.value, offset),
                __shfl_xor_sync(kFullMask, v.index, offset)};
}

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, shfl_xor(v, offset));
  return v;
}

template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity, T* smem) {
  v = warp_reduce(v, op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  __syncthreads();  // smem may still be read by a previous call
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < num_warps ? smem[lane] : identity;
  return warp_reduce(v, op);
}

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct ArgMaxOp {
  __device__ __forceinline__ ArgMax operator()(ArgMax a, ArgMax b) const { return better(a, b); }
};

}  // namespace pagoda::gpu::cuda
