#include "gpu/quant_format.hpp"

#include <cassert>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace pagoda::gpu {

uint16_t fp32_to_fp16(float f) {
  const uint32_t u = f32_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {  // NaN: keep the top payload bits, force quiet
    return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  }
  // 65520 (0x477FF000) is halfway between 65504 (the largest half) and 2^16:
  // ties go to the even neighbour, 2^16, which overflows to inf.
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (a < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
    // |f| * 2^24 is exact (a power-of-two scale) and < 1024; rounding it to
    // an integer in the default mode (nearest even) gives the subnormal's
    // mantissa, and 1024 is exactly the encoding of the smallest normal.
    const float scaled = bits_to_f32(a) * 0x1p24f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa
  // bits to nearest even; a mantissa carry correctly bumps the exponent.
  const uint32_t rounded = a + 0xFFFu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
}

namespace {

uint16_t load_u16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t load_u32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// The blocks are read field by field from bytes (memcpy / byte loads), never
// through a struct pointer: GGUF data is 32-byte aligned, but a tensor read
// from elsewhere (a fuzzer, a test buffer) need not be.
template <typename Block>
Block load_block(const void* src, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(src) + i * int64_t(sizeof(Block)), sizeof b);
  return b;
}

// Element j (0..31) of a 5-bit block: low nibble from qs, 5th bit from qh.
int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return lo | int((qh >> j) & 1u) << 4;
}

}  // namespace

namespace dequant {

void f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

// F16 / BF16 data need not be 2-byte aligned (safetensors tensors start at
// any byte): each element is loaded from bytes, not through a uint16_t
// pointer (UB when misaligned; UBSan reported it).
void f16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(p + 2 * i));
}

void bf16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(p + 2 * i));
}

void q8_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQuantBlock; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
  }
}

void q4_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      dst[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
      dst[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void q4_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      dst[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
      dst[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

void q5_0(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < kQuantBlock; ++j) {
      dst[j] = static_cast<float>(q5_value(b.qs, qh, j) - 16) * d;
    }
  }
}

void q5_1(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < kQuantBlock; ++j) {
      dst[j] = static_cast<float>(q5_value(b.qs, qh, j)) * d + m;
    }
  }
}

void iq4_nl(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const auto b = load_block<BlockIQ4_NL>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      dst[j] = d * static_cast<float>(kIq4Grid[b.qs[j] & 0xF]);
      dst[j + 16] = d * static_cast<float>(kIq4Grid[b.qs[j] >> 4]);
    }
  }
}

}  // namespace dequant

void dequantize_row(WeightFormat f, const void* src, float* dst, int64_t n) {
  const WeightTypeTraits& t = traits(f);
  assert(t.dequantize != nullptr && n % t.block_elems == 0);
  t.dequantize(src, dst, n / t.block_elems);
}

std::vector<float> dequantize(WeightFormat f, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(f, src, out.data(), n);
  return out;
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  assert(n % kQuantBlock == 0);
  auto* out = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < n / kQuantBlock; ++i, src += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b;
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQuantBlock; ++j) b.qs[j] = static_cast<int8_t>(std::lround(src[j] * inv));
    std::memcpy(out + i * int64_t(sizeof b), &b, sizeof b);
  }
}

}  // namespace pagoda::gpu
