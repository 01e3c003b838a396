// Block formats of ggml/GGUF quantized tensors, half-precision conversions,
// and dequantization to fp32.
//
// Block layouts (32 elements per block, little-endian, no padding; they match
// ggml's block_q8_0 / block_q4_0 / block_q4_1 byte for byte):
//  - Q8_0 (34 B): fp16 d; int8 qs[32].          x_j = qs[j] * d
//  - Q4_0 (18 B): fp16 d; uint8 qs[16].         x_j      = (lo(qs[j]) - 8) * d
//                                               x_{j+16} = (hi(qs[j]) - 8) * d
//  - Q4_1 (20 B): fp16 d; fp16 m; uint8 qs[16]. x_j      = lo(qs[j]) * d + m
//                                               x_{j+16} = hi(qs[j]) * d + m
//    where lo(b) = b & 0xF and hi(b) = b >> 4.
//
// The conversions are exact bit-level implementations: fp16/bf16 -> fp32 is
// exact for every input (subnormals, ±0, ±inf, NaN payloads kept);
// fp32 -> fp16/bf16 rounds to nearest, ties to even, overflows to ±inf, and
// maps NaN to a quiet NaN of the same sign. All functions are pure and
// thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/weight_format.hpp"

namespace pagoda::gpu {

inline constexpr int kQuantBlock = 32;  // elements per Q8_0/Q4_0/Q4_1 block

struct BlockQ8_0 {
  uint16_t d;      // fp16 scale
  int8_t qs[32];   // quants
};
struct BlockQ4_0 {
  uint16_t d;      // fp16 scale
  uint8_t qs[16];  // element j in the low nibble of qs[j], j+16 in the high one
};
struct BlockQ4_1 {
  uint16_t d;      // fp16 scale
  uint16_t m;      // fp16 offset (the block minimum)
  uint8_t qs[16];  // as in Q4_0, unsigned 0..15
};
static_assert(sizeof(BlockQ8_0) == 34 && block_bytes(WeightFormat::Q8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18 && block_bytes(WeightFormat::Q4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20 && block_bytes(WeightFormat::Q4_1) == 20);

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in fp32
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return bits_to_f32(f32_to_bits(mag) | sign);
  }
  if (exp == 31) return bits_to_f32(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t fp32_to_fp16(float f);  // round to nearest even (quant_format.cpp)

inline float bf16_to_fp32(uint16_t b) { return bits_to_f32(uint32_t(b) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t u = f32_to_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);  // ties to even; may carry to inf
  return static_cast<uint16_t>(rounded >> 16);
}

// Converts n elements stored in format f (see weight_format.hpp) to fp32.
// Requires n % block_elems(f) == 0; src holds storage_bytes(f, n) bytes
// (2-byte aligned, 4 for F32); dst holds n floats and does not overlap src.
void dequantize_row(WeightFormat f, const void* src, float* dst, int64_t n);

// Same, into a new vector (the load-time conversion for the exact fp32 path).
std::vector<float> dequantize(WeightFormat f, const void* src, int64_t n);

}  // namespace pagoda::gpu
