// The block-quantized types' dequantizers against the `gguf` Python package
// (gguf.quants.dequantize), bit for bit: tests/data/formats/quant_golden.json,
// made by tools/gen-quant-goldens.py from random blocks and from blocks of
// files that llama.cpp's llama-quantize wrote. Also the type table's sizes
// against the package's, and the fp32 -> Q8_0 quantizer the loader uses for
// the formats without CPU kernels.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpu/quant_format.hpp"
#include "gpu/weight_format.hpp"
#include "model/dequant.hpp"

namespace pagoda::model {
namespace {

std::vector<uint8_t> from_hex(std::string_view h) {
  std::vector<uint8_t> out(h.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(std::stoi(std::string(h.substr(2 * i, 2)), nullptr, 16));
  }
  return out;
}

uint32_t bits_at(const std::vector<uint8_t>& le, size_t i) {
  return uint32_t(le[4 * i]) | uint32_t(le[4 * i + 1]) << 8 | uint32_t(le[4 * i + 2]) << 16 |
         uint32_t(le[4 * i + 3]) << 24;
}

struct Case {
  uint32_t type = 0;
  std::string type_name, source;
  uint64_t block_elems = 0, block_bytes = 0;
  std::vector<uint8_t> blocks, values;  // values: float32 bit patterns, little-endian
};

std::vector<Case> load_cases() {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  const std::string path = std::string(PAGODA_TEST_DATA_DIR) + "/formats/quant_golden.json";
  EXPECT_EQ(parser.load(path).get(root), simdjson::SUCCESS) << path;
  std::vector<Case> cases;
  simdjson::dom::array arr;
  if (root["cases"].get(arr) != simdjson::SUCCESS) return cases;
  for (simdjson::dom::element c : arr) {
    Case k;
    uint64_t type = 0;
    std::string_view name, source, blocks, values;
    EXPECT_EQ(c["type"].get(type), simdjson::SUCCESS);
    EXPECT_EQ(c["type_name"].get(name), simdjson::SUCCESS);
    EXPECT_EQ(c["source"].get(source), simdjson::SUCCESS);
    EXPECT_EQ(c["block_elems"].get(k.block_elems), simdjson::SUCCESS);
    EXPECT_EQ(c["block_bytes"].get(k.block_bytes), simdjson::SUCCESS);
    EXPECT_EQ(c["blocks"].get(blocks), simdjson::SUCCESS);
    EXPECT_EQ(c["values"].get(values), simdjson::SUCCESS);
    k.type = uint32_t(type);
    k.type_name = name;
    k.source = source;
    k.blocks = from_hex(blocks);
    k.values = from_hex(values);
    cases.push_back(std::move(k));
  }
  return cases;
}

TEST(QuantGolden, EveryCaseEqualsTheGgufPackageBitForBit) {
  const std::vector<Case> cases = load_cases();
  ASSERT_FALSE(cases.empty());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type_name + " " + c.source);
    const uint64_t n = c.values.size() / 4;
    ASSERT_EQ(n % c.block_elems, 0u);
    ASSERT_EQ(c.blocks.size(), n / c.block_elems * c.block_bytes);
    auto bytes = tensor_bytes(c.type, n);
    ASSERT_TRUE(bytes.ok());
    ASSERT_EQ(*bytes, c.blocks.size());
    // Once from an aligned buffer, once from one starting at an odd address.
    std::vector<uint8_t> shifted(c.blocks.size() + 1);
    std::memcpy(shifted.data() + 1, c.blocks.data(), c.blocks.size());
    for (const uint8_t* src : {c.blocks.data(), static_cast<const uint8_t*>(shifted.data() + 1)}) {
      std::vector<float> out(n, -1.0f);
      ASSERT_TRUE(dequantize(c.type, src, out.data(), n).ok());
      for (uint64_t i = 0; i < n; ++i) {
        uint32_t got;
        std::memcpy(&got, &out[i], 4);
        ASSERT_EQ(got, bits_at(c.values, i)) << "element " << i << ": got " << out[i];
      }
    }
  }
}

// The golden file covers each new type with random and with real blocks, so
// a regenerated file that lost one is caught here.
TEST(QuantGolden, CoversEveryBlockTypeWithRandomAndRealBlocks) {
  std::map<std::string, std::set<bool>> kinds;  // type -> {is real}
  for (const Case& c : load_cases()) kinds[c.type_name].insert(c.source.rfind("random", 0) != 0);
  for (const char* t : {"Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL",
                        "IQ4_XS"}) {
    EXPECT_EQ(kinds[t], (std::set<bool>{false, true})) << t;
  }
  for (const char* t : {"Q4_0", "Q4_1", "Q8_0"}) EXPECT_TRUE(kinds[t].count(false)) << t;
}

TEST(QuantGolden, TypeTableSizesEqualTheGgufPackage) {
  std::set<uint32_t> seen;
  for (const Case& c : load_cases()) {
    if (!seen.insert(c.type).second) continue;
    const gpu::WeightTypeTraits* t = gpu::weight_type_traits(c.type);
    ASSERT_NE(t, nullptr) << c.type_name;
    EXPECT_EQ(std::string(t->name), c.type_name);
    EXPECT_EQ(uint64_t(t->block_elems), c.block_elems) << c.type_name;
    EXPECT_EQ(uint64_t(t->block_bytes), c.block_bytes) << c.type_name;
    auto f = gpu::weight_format_from_ggml(c.type);
    ASSERT_TRUE(f.has_value()) << c.type_name;
    EXPECT_EQ(uint32_t(*f), c.type);
    EXPECT_EQ(gpu::format_name(*f), c.type_name);
  }
  EXPECT_EQ(seen.size(), 12u);
}

TEST(QuantGolden, TableRowsAreConsistent) {
  std::set<uint32_t> ids;
  for (const gpu::WeightTypeTraits& t : gpu::kWeightTypes) {
    EXPECT_TRUE(ids.insert(t.ggml_type).second) << t.name << " listed twice";
    EXPECT_GT(t.block_elems, 0) << t.name;
    EXPECT_GT(t.block_bytes, 0) << t.name;
    for (int s = 0; s < t.half_count; ++s) EXPECT_LE(t.half_at[s] + 2, t.block_bytes) << t.name;
    EXPECT_EQ(gpu::weight_format_from_ggml(t.ggml_type).has_value(), t.dequantize != nullptr);
  }
  EXPECT_EQ(gpu::supported_format_names(),
            "F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
            "IQ4_XS, BF16");
}

// quantize_q8_0 follows ggml's reference quantizer: d = max|x|/127 stored as
// fp16, q = round(x * 127/max|x|); dequantized it is within half a step
// (plus the fp16 rounding of d) of the input.
TEST(QuantizeQ8_0, RoundTripsWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = nd(rng);
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;  // an all-zero block: d = 0, q = 0
  std::vector<uint8_t> q(size_t(gpu::storage_bytes(gpu::WeightFormat::Q8_0, int64_t(x.size()))));
  gpu::quantize_q8_0(x.data(), q.data(), int64_t(x.size()));
  const std::vector<float> y = gpu::dequantize(gpu::WeightFormat::Q8_0, q.data(), int64_t(x.size()));
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    int8_t qmax = 0;
    for (int j = 0; j < 32; ++j) {
      const auto qj = static_cast<int8_t>(q[b * 34 + 2 + j]);
      qmax = std::max<int8_t>(qmax, static_cast<int8_t>(std::abs(qj)));
      EXPECT_NEAR(y[b * 32 + j], x[b * 32 + j], 0.5f * d + amax * 1e-3f) << b << " " << j;
    }
    EXPECT_EQ(qmax, amax > 0 ? 127 : 0) << "block " << b;
  }
}

}  // namespace
}  // namespace pagoda::model
