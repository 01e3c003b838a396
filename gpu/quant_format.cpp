#include "gpu/quant_format.hpp"

#include <cassert>
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

void dequant_q8_0(const BlockQ8_0* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQuantBlock; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequant_q4_0(const BlockQ4_0* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
      dst[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQuantBlock) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0xF) * d + m;
      dst[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

}  // namespace

void dequantize_row(WeightFormat f, const void* src, float* dst, int64_t n) {
  assert(n % block_elems(f) == 0);
  const int64_t nb = n / block_elems(f);
  switch (f) {
    case WeightFormat::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    // F16 / BF16 data need not be 2-byte aligned (safetensors tensors start
    // at any byte): each element is loaded with memcpy, not through a
    // uint16_t pointer (UB when misaligned; UBSan reported it).
    case WeightFormat::F16: {
      const auto* p = static_cast<const unsigned char*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    }
    case WeightFormat::BF16: {
      const auto* p = static_cast<const unsigned char*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    }
    case WeightFormat::Q8_0: dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case WeightFormat::Q4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case WeightFormat::Q4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
  }
}

std::vector<float> dequantize(WeightFormat f, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(f, src, out.data(), n);
  return out;
}

}  // namespace pagoda::gpu
