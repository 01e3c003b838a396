// A fused Q|K|V group whose tensors differ in block type (llama-quantize's
// Q4_K_M gives the tiny Mixtral's layer 1 attn_q/attn_k Q4_K and attn_v
// Q6_K, tests/data/logits/moe-gguf) keeps each tensor in its own type on the
// CPU in quantized precision: three weights instead of one stacked weight
// that the loader would requantize to Q8_0. Checked: the layer's weights and
// their formats, no requantized tensor in the load summary, and the logits
// against HF run on the file's own dequantized weights
// (tiny-mixtral-q4_k_m-dequant.json, tools/gen-arch-goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "formats_test_util.hpp"
#include "llama_test_util.hpp"
#include "model/llama_model.hpp"

namespace pagoda {
namespace {

using gpu::WeightFormat;
using model::WeightPrecision;

const std::string kFile = "moe-gguf/tiny-mixtral-q4_k_m.gguf";

Result<std::unique_ptr<model::LlamaModel>> load(gpu::Backend& backend, WeightPrecision precision) {
  model::LoadOptions o;
  o.precision = precision;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 4;
  o.max_logits_rows = 64;
  return model::LlamaModel::load(test::logits_data(kFile), backend, o);
}

struct Errors {
  double max_abs = 0;
  int32_t rows = 0, rows_over = 0, argmax_same = 0;  // rows_over: positions off by > 0.08
};

// Logit differences vs HF on the file's own weights at every position of the
// golden sequences (each run whole and in chunks of 4).
Errors errors(model::LlamaModel& m, gpu::Backend& backend) {
  const test::TinyGolden g = test::load_tiny_golden(test::logits_data("tiny-mixtral-q4_k_m-dequant.json"));
  auto cache = backend.create_kv_cache(m.kv_cache_spec(), 16);
  EXPECT_TRUE(cache.ok());
  Errors e;
  for (size_t s = 0; s < g.ids.size(); ++s) {
    const int32_t len = int32_t(g.ids[s].size());
    for (int32_t chunk : {len, 4}) {
      std::vector<float> ours = test::run_sequence(m, *cache, g.ids[s], test::sequential_blocks(len, 16), chunk);
      for (int32_t r = 0; r < len; ++r) {
        const float* a = ours.data() + size_t(r) * size_t(g.vocab);
        const float* b = g.logits[s].data() + size_t(r) * size_t(g.vocab);
        const double d = test::max_abs_error(a, b, size_t(g.vocab));
        e.max_abs = std::max(e.max_abs, std::isnan(d) ? INFINITY : d);
        e.rows_over += d > 0.08;
        e.argmax_same += test::argmax(a, g.vocab) == test::argmax(b, g.vocab);
        ++e.rows;
      }
    }
  }
  return e;
}

TEST(MixedBlockGroup, QkvOfMixedTypesKeepsEachType) {
  auto backend = test::cpu_backend();
  auto m = load(*backend, WeightPrecision::kQuantized);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const model::LlamaWeights& w = (*m)->weights();
  ASSERT_EQ(w.layers.size(), 2u);
  // Layer 0: Q4_K | Q4_K | Q4_K, one stacked weight in its own type.
  EXPECT_NE(w.layers[0].qkv.weight.data, nullptr);
  EXPECT_EQ(w.layers[0].qkv.weight.format, WeightFormat::Q4_K);
  // Layer 1: Q4_K | Q4_K | Q6_K, three weights.
  const model::LlamaLayerWeights& l1 = w.layers[1];
  EXPECT_EQ(l1.qkv.weight.data, nullptr);
  EXPECT_EQ(l1.q.weight.format, WeightFormat::Q4_K);
  EXPECT_EQ(l1.k.weight.format, WeightFormat::Q4_K);
  EXPECT_EQ(l1.v.weight.format, WeightFormat::Q6_K);
  EXPECT_EQ(w.requantized_tensors, 0);
  // The quantized path as MoeFidelity.QuantizedGguf bounds it. Measured
  // (AVX-512 VNNI, 2026-12-03): every position <= 0.06 but two, 0.153 and
  // 0.267 (positions 2 and 10 of the 19-token sequence, near-tied top-2
  // routes that the native Q4_K/Q6_K kernels' activation rounding flips);
  // with the group requantized to Q8_0 (before) max 0.046. The split itself
  // changes nothing: with PAGODA_CPU_PACKED=0 (every K-quant through Q8_0)
  // the per-position errors of the split and the stacked group are identical
  // (max 0.076).
  const Errors e = errors(**m, *backend);
  std::printf("[mixed qkv] quantized path vs HF on the file's weights: max abs %.4g, %d of %d rows over 0.08, "
              "argmax equal at %d\n", e.max_abs, e.rows_over, e.rows, e.argmax_same);
  EXPECT_LE(e.rows_over, 4);
  EXPECT_LE(e.max_abs, 0.5);
  EXPECT_GE(double(e.argmax_same), 0.9 * e.rows);
}

// The exact path stacks the group in fp32 as before and matches HF on the
// file's weights as tightly as an F32 file.
TEST(MixedBlockGroup, ExactPathStillStacks) {
  auto backend = test::cpu_backend();
  auto m = load(*backend, WeightPrecision::kExact);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_NE((*m)->weights().layers[1].qkv.weight.data, nullptr);
  const Errors e = errors(**m, *backend);
  std::printf("[mixed qkv] exact path vs HF on the file's weights: max abs %.3g\n", e.max_abs);
  EXPECT_LE(e.max_abs, 1e-3);
}

}  // namespace
}  // namespace pagoda
