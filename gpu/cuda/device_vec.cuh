// Device helpers for the KV cache element types: 8-element vector loads that
// widen to fp32 (one 16-byte load for bf16, two for fp32) and the fp32 -> cache
// conversion (round to nearest even for bf16). Requires 16-byte aligned
// addresses for the vector loads (cache rows are head_dim elements, head_dim a
// multiple of 8, and cudaMalloc'd bases are 256-byte aligned).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::gpu::cuda {

// Raw 8 elements as loaded; widened to fp32 by to_float8.
template <class T>
struct Raw8;

template <>
struct Raw8<float> {
  float4 a, b;
};

template <>
struct Raw8<__nv_bfloat16> {
  uint4 u;
};

__device__ __forceinline__ void load8(const float* p, Raw8<float>& r) {
  r.a = *reinterpret_cast<const float4*>(p);
  r.b = *reinterpret_cast<const float4*>(p + 4);
}

__device__ __forceinline__ void load8(const __nv_bfloat16* p, Raw8<__nv_bfloat16>& r) {
  r.u = *reinterpret_cast<const uint4*>(p);
}

__device__ __forceinline__ void to_float8(const Raw8<float>& r, float (&f)[8]) {
  f[0] = r.a.x; f[1] = r.a.y; f[2] = r.a.z; f[3] = r.a.w;
  f[4] = r.b.x; f[5] = r.b.y; f[6] = r.b.z; f[7] = r.b.w;
}

// bf16 -> fp32 is exact: the bf16 bits are the fp32's upper half.
__device__ __forceinline__ void to_float8(const Raw8<__nv_bfloat16>& r, float (&f)[8]) {
  const uint32_t w[4] = {r.u.x, r.u.y, r.u.z, r.u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}

template <class T>
__device__ __forceinline__ T from_float(float x);

template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}

template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

}  // namespace pagoda::gpu::cuda
