// Block formats of ggml/GGUF quantized tensors with 32-element blocks,
// half-precision conversions, dequantization to fp32 (every WeightFormat,
// through the table in weight_format.hpp) and fp32 -> Q8_0 quantization.
// The 256-element K-quants and IQ4_XS are in gpu/quant_kquants.hpp.
//
// Block layouts (32 elements per block, little-endian, no padding; they match
// ggml's block_q8_0 / q4_0 / q4_1 / q5_0 / q5_1 / iq4_nl byte for byte):
//  - Q8_0 (34 B): fp16 d; int8 qs[32].          x_j = qs[j] * d
//  - Q4_0 (18 B): fp16 d; uint8 qs[16].         x_j      = (lo(qs[j]) - 8) * d
//                                               x_{j+16} = (hi(qs[j]) - 8) * d
//  - Q4_1 (20 B): fp16 d; fp16 m; uint8 qs[16]. x_j      = lo(qs[j]) * d + m
//                                               x_{j+16} = hi(qs[j]) * d + m
//  - Q5_0 (22 B): fp16 d; uint32 qh; uint8 qs[16]: the 5-bit value of element
//                 j is lo(qs[j]) | bit j of qh << 4, of element j+16 it is
//                 hi(qs[j]) | bit j+16 of qh << 4;  x = (v - 16) * d
//  - Q5_1 (24 B): fp16 d; fp16 m; uint32 qh; uint8 qs[16]: v as in Q5_0,
//                 x = v * d + m
//  - IQ4_NL (18 B): fp16 d; uint8 qs[16]: nibbles as in Q4_0, each an index
//                 into the non-linear grid kIq4Grid; x = d * kIq4Grid[nibble]
//    where lo(b) = b & 0xF and hi(b) = b >> 4.
// Each dequantizer computes in fp32 in the order written above (one product,
// then one sum), which is also the order of the `gguf` Python package's
// numpy reference, so the results are equal bit for bit; the files are
// compiled with -ffp-contract=off (gpu/CMakeLists.txt) so no FMA can fuse it.
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

inline constexpr int kQuantBlock = 32;  // elements per Q8_0/Q4_x/Q5_x/IQ4_NL block

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
struct BlockQ5_0 {
  uint16_t d;      // fp16 scale
  uint8_t qh[4];   // bit j: the 5th bit of element j (little-endian uint32)
  uint8_t qs[16];  // low 4 bits, as in Q4_0
};
struct BlockQ5_1 {
  uint16_t d;      // fp16 scale
  uint16_t m;      // fp16 offset
  uint8_t qh[4];   // as in Q5_0
  uint8_t qs[16];  // as in Q5_0
};
struct BlockIQ4_NL {
  uint16_t d;      // fp16 scale
  uint8_t qs[16];  // grid indices, nibbles laid out as in Q4_0
};
// The 16 levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};
static_assert(sizeof(BlockQ5_0) == 22 && block_bytes(WeightFormat::Q5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && block_bytes(WeightFormat::Q5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18 && block_bytes(WeightFormat::IQ4_NL) == 18);
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

// Converts n elements stored in format f (see weight_format.hpp) to fp32
// with the format's row of kWeightTypes. Requires n % block_elems(f) == 0;
// src holds storage_bytes(f, n) bytes (any alignment); dst holds n floats
// and does not overlap src.
void dequantize_row(WeightFormat f, const void* src, float* dst, int64_t n);

// Quantizes n floats to n/32 Q8_0 blocks at dst (storage_bytes(Q8_0, n)
// bytes) the way ggml's reference quantizer does: d = max|x| / 127,
// q = round(x / d) (ties away from zero), d stored as fp16. Requires
// n % 32 == 0 and finite inputs.
void quantize_q8_0(const float* src, void* dst, int64_t n);

// Same, into a new vector (the load-time conversion for the exact fp32 path).
std::vector<float> dequantize(WeightFormat f, const void* src, int64_t n);

}  // namespace pagoda::gpu
