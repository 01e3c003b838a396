// Tests for gpu/quant_format.hpp and gpu/weight_format.hpp: half-precision
// conversions against independent references (the IEEE formula evaluated in
// double, the compiler's _Float16 conversion, explicit nearest-even
// selection), and dequantize_row on hand-packed and random blocks against
// the ggml block formulas evaluated in double from the raw bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/quant_format.hpp"
#include "gpu/weight_format.hpp"

namespace pagoda::gpu {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 value of a finite bit pattern, by the textbook formula.
double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  const double mag = exp == 0 ? std::ldexp(mant / 1024.0, -14)
                              : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -mag : mag;
}

// bfloat16 value of a finite bit pattern (exp field < 255); exp field 255 with
// mantissa 0 is returned as 2^128 (the "next" value used for rounding ties).
double bf16_value(uint16_t b) {
  const int sign = b >> 15, exp = (b >> 7) & 255, mant = b & 127;
  const double mag = exp == 0 ? std::ldexp(mant / 128.0, -126)
                              : std::ldexp(1.0 + mant / 128.0, exp - 127);
  return sign ? -mag : mag;
}

TEST(HalfConversion, Fp16ToFp32ExhaustiveMatchesFormula) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const int exp = (h >> 10) & 31;
    if (exp == 31) {
      if ((h & 1023) == 0) {
        EXPECT_TRUE(std::isinf(f)) << h;
      } else {
        EXPECT_TRUE(std::isnan(f)) << h;
      }
      EXPECT_EQ(std::signbit(f), (h >> 15) != 0) << h;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), half_value(static_cast<uint16_t>(h))) << h;
    EXPECT_EQ(std::signbit(f), (h >> 15) != 0) << h;  // keeps -0
  }
}

TEST(HalfConversion, Fp32ToFp16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const uint16_t back = fp32_to_fp16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(back))) << h;
      EXPECT_EQ(uint32_t{back} >> 15, h >> 15) << h;
    } else {
      EXPECT_EQ(uint32_t{back}, h) << h;
    }
  }
}

// Midpoints between adjacent halves (exact in fp32) go to the even neighbour.
TEST(HalfConversion, Fp32ToFp16TiesToEven) {
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every positive finite half
    const double lo = half_value(static_cast<uint16_t>(h));
    const double hi = h + 1 == 0x7C00 ? 65536.0 : half_value(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);  // representable
    const uint16_t even = (h & 1) == 0 ? h : h + 1;    // 0x7C00 (inf) is even
    EXPECT_EQ(fp32_to_fp16(mid), even) << h;
    EXPECT_EQ(fp32_to_fp16(-mid), even | 0x8000) << h;
    // Just off the midpoint goes to the nearer neighbour.
    EXPECT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), h) << h;
  }
}

#ifdef __FLT16_MAX__
TEST(HalfConversion, Fp32ToFp16MatchesCompilerFloat16OnRandomFloats) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = any(rng);
    // Half the samples near the fp16 range (exponents 100..150) where it matters.
    if (i % 2) u = (u & 0x807FFFFFu) | ((100u + (u >> 23) % 51) << 23);
    const float f = from_bits(u);
    if (std::isnan(f)) continue;
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(fp32_to_fp16(f), ref_bits) << std::hexfloat << f;
  }
}
#endif

TEST(HalfConversion, Fp32ToFp16Specials) {
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);   // tie to even (0)
  EXPECT_EQ(fp32_to_fp16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  const uint16_t nan = fp32_to_fp16(from_bits(0x7F800001u));  // signalling NaN
  EXPECT_EQ(nan & 0x7E00, 0x7E00);                            // quiet NaN
}

TEST(Bf16Conversion, ToFp32ExhaustiveMatchesFormula) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(b));
    if (((b >> 7) & 255) == 255) {
      EXPECT_TRUE((b & 127) ? std::isnan(f) : std::isinf(f)) << b;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), bf16_value(static_cast<uint16_t>(b))) << b;
  }
}

TEST(Bf16Conversion, FromFp32IsNearestEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = any(rng);
    if (i % 4 == 0) u = (u & 0xFFFF0000u) | 0x8000u;  // exact ties
    const float f = from_bits(u);
    if (std::isnan(f) || std::isinf(f)) continue;
    const uint16_t lo = static_cast<uint16_t>(u >> 16);  // truncation (toward zero)
    const uint16_t hi = static_cast<uint16_t>(lo + 1);   // next away from zero
    const double dlo = std::fabs(f - bf16_value(lo));
    const double dhi = std::fabs(f - bf16_value(hi));
    const uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    ASSERT_EQ(fp32_to_bf16(f), want) << std::hexfloat << f;
  }
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80);  // rounds up to inf
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(from_bits(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(from_bits(0xFFC00000u)))));
}

// ---- dequantize_row -------------------------------------------------------

void put_u16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v & 0xFF));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

TEST(Dequantize, Q8_0HandPacked) {
  std::vector<uint8_t> raw;
  put_u16(raw, 0x3800);  // d = 0.5
  for (int j = 0; j < 32; ++j) raw.push_back(static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128)));
  float out[32];
  dequantize_row(WeightFormat::Q8_0, raw.data(), out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], (j * 8 - 128) * 0.5f) << j;
}

TEST(Dequantize, Q4_0HandPacked) {
  std::vector<uint8_t> raw;
  put_u16(raw, 0x4000);  // d = 2
  for (int j = 0; j < 16; ++j) raw.push_back(static_cast<uint8_t>((15 - j) << 4 | j));
  float out[32];
  dequantize_row(WeightFormat::Q4_0, raw.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (j - 8) * 2.0f) << j;              // low nibble = element j
    EXPECT_EQ(out[j + 16], (15 - j - 8) * 2.0f) << j;    // high nibble = element j+16
  }
}

TEST(Dequantize, Q4_1HandPacked) {
  std::vector<uint8_t> raw;
  put_u16(raw, 0x3400);  // d = 0.25
  put_u16(raw, 0xC200);  // m = -3
  for (int j = 0; j < 16; ++j) raw.push_back(static_cast<uint8_t>(j << 4 | (15 - j)));
  float out[32];
  dequantize_row(WeightFormat::Q4_1, raw.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (15 - j) * 0.25f - 3.0f) << j;
    EXPECT_EQ(out[j + 16], j * 0.25f - 3.0f) << j;
  }
}

TEST(Dequantize, FloatFormats) {
  const uint16_t halves[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};  // 1, -2, 2^-24, 65504
  float out[4];
  dequantize_row(WeightFormat::F16, halves, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0x1p-24f);
  EXPECT_EQ(out[3], 65504.0f);
  const uint16_t bf[3] = {0x3F80, 0xC040, 0x0001};  // 1, -3, 2^-133
  dequantize_row(WeightFormat::BF16, bf, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], 0x1p-133f);
  const float f[2] = {1.5f, -0.25f};
  dequantize_row(WeightFormat::F32, f, out, 2);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -0.25f);
}

// Random multi-block rows: every element equals the block formula evaluated
// in double from the raw bytes (the fp32 result is that value rounded once).
TEST(Dequantize, RandomBlocksMatchFormula) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> byte(0, 255);
  const int nb = 37;
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1}) {
    const int64_t bsz = block_bytes(f);
    std::vector<uint8_t> raw(static_cast<size_t>(nb * bsz));
    for (auto& b : raw) b = static_cast<uint8_t>(byte(rng));
    for (int b = 0; b < nb; ++b) {  // keep scales finite: clear the exponent's top bit
      raw[b * bsz + 1] &= 0xBF;
      if (f == WeightFormat::Q4_1) raw[b * bsz + 3] &= 0xBF;
    }
    std::vector<float> out(nb * 32);
    dequantize_row(f, raw.data(), out.data(), nb * 32);
    for (int b = 0; b < nb; ++b) {
      const uint8_t* p = raw.data() + b * bsz;
      const double d = half_value(static_cast<uint16_t>(p[0] | p[1] << 8));
      for (int j = 0; j < 32; ++j) {
        double want;
        if (f == WeightFormat::Q8_0) {
          want = static_cast<int8_t>(p[2 + j]) * d;
        } else if (f == WeightFormat::Q4_0) {
          const uint8_t q = p[2 + j % 16];
          want = ((j < 16 ? q & 15 : q >> 4) - 8) * d;
        } else {
          const double m = half_value(static_cast<uint16_t>(p[2] | p[3] << 8));
          const uint8_t q = p[4 + j % 16];
          want = (j < 16 ? q & 15 : q >> 4) * d + m;
        }
        ASSERT_EQ(out[b * 32 + j], static_cast<float>(want))
            << format_name(f) << " block " << b << " elem " << j;
      }
    }
  }
}

TEST(WeightFormat, MetadataAndValidation) {
  EXPECT_EQ(weight_format_from_ggml(3), WeightFormat::Q4_1);
  EXPECT_EQ(weight_format_from_ggml(8), WeightFormat::Q8_0);
  EXPECT_EQ(weight_format_from_ggml(30), WeightFormat::BF16);
  EXPECT_EQ(weight_format_from_ggml(12), WeightFormat::Q4_K);
  EXPECT_EQ(weight_format_from_ggml(23), WeightFormat::IQ4_XS);
  EXPECT_FALSE(weight_format_from_ggml(16).has_value());  // IQ2_XXS: size only
  EXPECT_FALSE(weight_format_from_ggml(99).has_value());  // unknown
  EXPECT_EQ(storage_bytes(WeightFormat::Q4_K, 1536), 6 * 144);
  EXPECT_EQ(block_elems(WeightFormat::Q6_K), 256);
  EXPECT_EQ(format_name(WeightFormat::Q5_1), "Q5_1");
  EXPECT_EQ(storage_bytes(WeightFormat::Q4_1, 576), 18 * 20);
  EXPECT_EQ(storage_bytes(WeightFormat::Q8_0, 576), 18 * 34);
  EXPECT_EQ(storage_bytes(WeightFormat::BF16, 5), 10);
  int dummy = 0;
  EXPECT_TRUE(make_linear_weight(WeightFormat::Q4_0, 4, 64, &dummy).ok());
  EXPECT_FALSE(make_linear_weight(WeightFormat::Q4_0, 4, 48, &dummy).ok());
  EXPECT_TRUE(make_linear_weight(WeightFormat::Q4_K, 4, 512, &dummy).ok());
  EXPECT_FALSE(make_linear_weight(WeightFormat::Q4_K, 4, 576, &dummy).ok());  // 2.25 blocks
  EXPECT_FALSE(make_linear_weight(WeightFormat::F32, 0, 48, &dummy).ok());
  EXPECT_FALSE(make_linear_weight(WeightFormat::F32, 2, 48, nullptr).ok());
}

}  // namespace
}  // namespace pagoda::gpu
