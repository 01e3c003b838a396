// dequant: fp16/bf16 conversions against the compiler's _Float16 and a formula
// reference, each block type against a scalar reference written from ggml's
// layout description, and the real model against values dequantized by the
// `gguf` Python package (tests/data/formats/dequant_golden.json).
#include "model/dequant.hpp"

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "formats_test_util.hpp"

namespace pagoda::model {
namespace {

// Value of an IEEE binary16 bit pattern, from the definition.
double half_ref(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double v = exp == 0    ? std::ldexp(mant, -24)
             : exp == 31 ? (mant ? NAN : INFINITY)
                         : std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

// Value of a bfloat16 bit pattern, from the definition; `as_rounding_bound`
// maps +-inf to +-2^128 (what IEEE rounding compares against).
double bf16_ref(uint16_t b, bool as_rounding_bound = false) {
  const int sign = b >> 15, exp = (b >> 7) & 255, mant = b & 127;
  double v = exp == 0     ? std::ldexp(mant, -133)
             : exp == 255 ? (mant ? NAN : (as_rounding_bound ? std::ldexp(1.0, 128) : INFINITY))
                          : std::ldexp(128 + mant, exp - 134);
  return sign ? -v : v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// clang < 15 has no _Float16 on x86 (the sanitizer presets build with clang 14):
// there the two tests against the compiler's _Float16 are skipped; the formula
// reference and the golden values below still check the conversions.
#if defined(__clang__) && __clang_major__ < 15
TEST(Fp16, ToFloatIsExactForEveryPattern) { GTEST_SKIP() << "clang < 15: no _Float16 on x86"; }
TEST(Fp16, FromFloatRoundsToNearestEven) { GTEST_SKIP() << "clang < 15: no _Float16 on x86"; }
#else
TEST(Fp16, ToFloatIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float mine = fp16_to_float(static_cast<uint16_t>(h));
    _Float16 ref_half;
    const uint16_t h16 = static_cast<uint16_t>(h);
    std::memcpy(&ref_half, &h16, 2);
    const float ref = static_cast<float>(ref_half);
    const double formula = half_ref(h16);
    if (std::isnan(formula)) {
      ASSERT_TRUE(std::isnan(mine)) << h;
      ASSERT_EQ(std::signbit(mine), std::signbit(ref)) << h;
      ASSERT_EQ((bits(mine) >> 13) & 0x3FF, h & 0x3FFu) << "payload " << h;
    } else {
      ASSERT_EQ(bits(mine), bits(ref)) << h;
      ASSERT_EQ(static_cast<double>(mine), formula) << h;
    }
  }
  EXPECT_EQ(fp16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_float(0xFC00), -INFINITY);
}

void expect_fp16_round(float f) {
  const uint16_t mine = float_to_fp16(f);
  const _Float16 ref = static_cast<_Float16>(f);
  uint16_t ref_bits;
  std::memcpy(&ref_bits, &ref, 2);
  if (std::isnan(f)) {
    ASSERT_TRUE(std::isnan(half_ref(mine))) << f;
    ASSERT_EQ(mine >> 15, ref_bits >> 15);
  } else {
    ASSERT_EQ(mine, ref_bits) << "f=" << f << " bits=" << std::hex << bits(f);
  }
}

TEST(Fp16, FromFloatRoundsToNearestEven) {
  for (uint32_t h = 0; h < 65535; ++h) {  // every half, and the midpoints (ties) above it
    const float a = fp16_to_float(static_cast<uint16_t>(h));
    const float b = fp16_to_float(static_cast<uint16_t>(h + 1));
    expect_fp16_round(a);
    if (std::isfinite(a) && std::isfinite(b) && (h & 0x7FFF) != 0x7FFF) {
      const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
      expect_fp16_round(mid);
      expect_fp16_round(std::nextafter(mid, 0.0f));
      expect_fp16_round(std::nextafter(mid, INFINITY));
    }
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 251)
    expect_fp16_round(from_bits(static_cast<uint32_t>(u)));
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e10f, -1e-10f, INFINITY, -INFINITY, NAN, -NAN}) {
    expect_fp16_round(f);
  }
}
#endif  // _Float16

TEST(Bf16, ConversionsMatchTheDefinition) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double ref = bf16_ref(static_cast<uint16_t>(b));
    const float mine = bf16_to_float(static_cast<uint16_t>(b));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(mine));
    } else {
      ASSERT_EQ(static_cast<double>(mine), ref) << b;
    }
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 97) {
    const float f = from_bits(static_cast<uint32_t>(u));
    const uint16_t mine = float_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(mine))) << u;
      continue;
    }
    const uint16_t lo = static_cast<uint16_t>(u >> 16);  // truncation toward zero
    const uint16_t hi = static_cast<uint16_t>(lo + 1);
    const double dlo = std::fabs(f - bf16_ref(lo, true)), dhi = std::fabs(f - bf16_ref(hi, true));
    const uint16_t want = (u & 0xFFFF) == 0 ? lo
                          : dlo < dhi       ? lo
                          : dhi < dlo       ? hi
                                            : (lo & 1 ? hi : lo);
    ASSERT_EQ(mine, want) << "u=" << std::hex << u;
  }
}

// Scalar references written from the layout description in dequant.hpp.
struct Block {
  uint16_t d = 0, m = 0;
  std::vector<int> q;  // 32 quantized values (int8 for Q8_0, 0..15 for Q4_x)
};

std::vector<uint8_t> pack(uint32_t type, const std::vector<Block>& blocks) {
  test::Bytes out;
  for (const Block& b : blocks) {
    out.u16(b.d);
    if (type == 3) out.u16(b.m);
    if (type == 8) {
      for (int v : b.q) out.u8(static_cast<uint8_t>(static_cast<int8_t>(v)));
    } else {
      for (int j = 0; j < 16; ++j) out.u8(static_cast<uint8_t>(b.q[j] | (b.q[j + 16] << 4)));
    }
  }
  return out.b;
}

std::vector<float> reference(uint32_t type, const std::vector<Block>& blocks) {
  std::vector<float> out;
  for (const Block& b : blocks) {
    for (int i = 0; i < 32; ++i) {
      const double d = half_ref(b.d);
      const double x = type == 8   ? d * b.q[i]
                       : type == 2 ? (b.q[i] - 8) * d
                                   : b.q[i] * d + half_ref(b.m);
      out.push_back(static_cast<float>(x));  // exact: d*q fits a float; one rounding for +m
    }
  }
  return out;
}

std::vector<Block> random_blocks(uint32_t type, int n, std::mt19937& rng) {
  const uint16_t scales[] = {0x3C00, 0xBC00, 0x2E66, 0x0001, 0x03FF,
                             0x7BFF, 0x1234, 0xA000, 0x0000};
  std::vector<Block> blocks(n);
  for (Block& b : blocks) {
    b.d = scales[rng() % 9];
    b.m = scales[rng() % 9];
    for (int i = 0; i < 32; ++i) {
      b.q.push_back(type == 8 ? static_cast<int>(rng() % 256) - 128 : static_cast<int>(rng() % 16));
    }
  }
  return blocks;
}

void check_type(uint32_t type, uint32_t bytes_per_block) {
  std::mt19937 rng(type);
  for (int n_blocks : {1, 2, 7}) {
    const auto blocks = random_blocks(type, n_blocks, rng);
    const std::vector<uint8_t> packed = pack(type, blocks);
    ASSERT_EQ(packed.size(), bytes_per_block * n_blocks);
    ASSERT_EQ(*tensor_bytes(type, 32 * n_blocks), packed.size());
    std::vector<float> out(32 * n_blocks);
    ASSERT_TRUE(dequantize(type, packed.data(), out.data(), out.size()).ok());
    const std::vector<float> want = reference(type, blocks);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(bits(out[i]), bits(want[i])) << i;
  }
}

TEST(Dequant, Q8_0MatchesScalarReference) { check_type(8, 34); }
TEST(Dequant, Q4_0MatchesScalarReference) { check_type(2, 18); }
TEST(Dequant, Q4_1MatchesScalarReference) { check_type(3, 20); }

TEST(Dequant, KnownQ4_0Block) {
  Block b;
  b.d = 0x4000;  // 2.0
  for (int i = 0; i < 32; ++i) b.q.push_back(i % 16);
  const auto packed = pack(2, {b});
  EXPECT_EQ(packed[2], 0x00);  // q[0] = 0 low, q[16] = 0 high
  EXPECT_EQ(packed[3], 0x11);
  std::vector<float> out(32);
  ASSERT_TRUE(dequantize(2, packed.data(), out.data(), 32).ok());
  EXPECT_EQ(out[0], -16.0f);
  EXPECT_EQ(out[15], 14.0f);
  EXPECT_EQ(out[16], -16.0f);
  EXPECT_EQ(out[31], 14.0f);
}

TEST(Dequant, PlainTypes) {
  const std::vector<float> f32 = {1.5f, -0.0f, 3e-40f, INFINITY};
  std::vector<float> out(4);
  ASSERT_TRUE(dequantize(0, reinterpret_cast<const uint8_t*>(f32.data()), out.data(), 4).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bits(out[i]), bits(f32[i]));
  const auto f16 = test::Bytes().u16(0x3C00).u16(0xC000).u16(0x0001).u16(0x7C00).b;
  ASSERT_TRUE(dequantize(1, f16.data(), out.data(), 4).ok());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), INFINITY}));
  const auto bf16 = test::Bytes().u16(0x3F80).u16(0xC040).u16(0x0001).u16(0xFF80).b;
  ASSERT_TRUE(dequantize(30, bf16.data(), out.data(), 4).ok());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -3.0f, std::ldexp(1.0f, -133), -INFINITY}));
}

TEST(Dequant, SizesNamesAndErrors) {
  EXPECT_EQ(*tensor_bytes(GgmlType::kF32, 10), 40u);
  EXPECT_EQ(*tensor_bytes(GgmlType::kBF16, 10), 20u);
  EXPECT_EQ(*tensor_bytes(GgmlType::kQ4_1, 64), 40u);
  EXPECT_EQ(*tensor_bytes(12, 512), 288u);  // Q4_K
  EXPECT_EQ(*tensor_bytes(16, 512), 132u);  // IQ2_XXS, size only
  EXPECT_EQ(*tensor_bytes(GgmlType::kQ8_0, 0), 0u);
  EXPECT_FALSE(tensor_bytes(GgmlType::kQ8_0, 33).ok());
  EXPECT_FALSE(tensor_bytes(99, 32).ok());
  EXPECT_FALSE(tensor_bytes(GgmlType::kF32, uint64_t{1} << 62).ok());
  EXPECT_EQ(ggml_type_name(3), "Q4_1");
  EXPECT_EQ(ggml_type_name(30), "BF16");
  EXPECT_EQ(ggml_type_name(99), "type 99");
  float out[256];
  uint8_t src[144] = {};
  auto e = dequantize(16, src, out, 256);  // IQ2_XXS: known by size, no dequantizer
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("IQ2_XXS"), std::string::npos);
  EXPECT_NE(e.error().message.find("supported: F32, F16, Q4_0"), std::string::npos);
  EXPECT_FALSE(dequantize(12, src, out, 32).ok());  // Q4_K: 32 is not a whole block
  EXPECT_TRUE(dequantize(12, src, out, 256).ok());
  EXPECT_FALSE(dequantize(8, src, out, 31).ok());
  EXPECT_FALSE(dequantize(99, src, out, 1).ok());
}

std::vector<float> dequant_range(const GgufFile& g, const GgufTensorInfo& t, uint64_t start,
                                 uint64_t n) {
  std::vector<float> out(n);
  const uint64_t offset = *tensor_bytes(t.raw_type, start);
  EXPECT_LE(offset + *tensor_bytes(t.raw_type, n), t.nbytes);
  EXPECT_TRUE(dequantize(t.raw_type, g.tensor_data(t) + offset, out.data(), n).ok());
  return out;
}

TEST(Dequant, RealModelRowsAreSane) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  const GgufTensorInfo* embd = g->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  ASSERT_EQ(embd->raw_type, 8u);
  const std::vector<float> row0 = dequant_range(*g, *embd, 0, embd->dims[0]);
  const GgufTensorInfo* q = g->find_tensor("blk.0.attn_q.weight");
  ASSERT_EQ(q->raw_type, 3u);
  const std::vector<float> wq = dequant_range(*g, *q, 0, q->num_elements());
  for (const auto* v : {&row0, &wq}) {
    double sum_abs = 0;
    std::set<float> distinct;
    for (float x : *v) {
      ASSERT_TRUE(std::isfinite(x));
      sum_abs += std::fabs(x);
      distinct.insert(x);
    }
    const double mean_abs = sum_abs / v->size();
    EXPECT_GT(mean_abs, 1e-3);
    EXPECT_LT(mean_abs, 1.0);
    EXPECT_GT(distinct.size(), 50u);
  }
}

TEST(Dequant, RealModelMatchesGgufPythonPackage) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  simdjson::dom::parser parser;
  simdjson::dom::element golden;
  ASSERT_EQ(
      parser.load(std::string(PAGODA_TEST_DATA_DIR) + "/formats/dequant_golden.json").get(golden),
      simdjson::SUCCESS);
  std::set<std::string> types_seen;
  simdjson::dom::array samples;
  ASSERT_EQ(golden["samples"].get(samples), simdjson::SUCCESS);
  for (simdjson::dom::element sample : samples) {
    std::string_view name, type_name;
    uint64_t n = 0;
    ASSERT_EQ(sample["name"].get(name), simdjson::SUCCESS);
    ASSERT_EQ(sample["type_name"].get(type_name), simdjson::SUCCESS);
    ASSERT_EQ(sample["num_elements"].get(n), simdjson::SUCCESS);
    const GgufTensorInfo* t = g->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(ggml_type_name(t->raw_type), type_name);
    EXPECT_EQ(t->num_elements(), n);
    types_seen.insert(std::string(type_name));
    simdjson::dom::array runs;
    ASSERT_EQ(sample["runs"].get(runs), simdjson::SUCCESS);
    for (simdjson::dom::element run : runs) {
      uint64_t start = 0;
      simdjson::dom::array values;
      ASSERT_EQ(run["start"].get(start), simdjson::SUCCESS);
      ASSERT_EQ(run["values"].get(values), simdjson::SUCCESS);
      const std::vector<float> mine = dequant_range(*g, *t, start, values.size());
      size_t i = 0;
      for (simdjson::dom::element v : values) {
        double want = 0;
        ASSERT_EQ(v.get(want), simdjson::SUCCESS);
        ASSERT_EQ(mine[i], static_cast<float>(want)) << name << " element " << start + i;
        ++i;
      }
    }
  }
  EXPECT_EQ(types_seen, (std::set<std::string>{"Q8_0", "Q4_1", "F32"}));
}

}  // namespace
}  // namespace pagoda::model
