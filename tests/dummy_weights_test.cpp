// --load-format dummy (model/dummy_weights.hpp) and the byte-level stand-in
// tokenizer (model/standin_tokenizer.hpp) on the CPU backend: the generator is
// a pure function of (seed, tensor, index); the tiny config's model loads
// without any weight file, runs prefill + decode with finite logits, and is
// bitwise reproducible across loads; every dtype runs; f32 and bf16 dummy
// weights are the same model; a qwen2 shape (biases) runs; bad combinations
// are Errors; the stand-in tokenizer round-trips bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "gpu/quant_format.hpp"
#include "model/dummy_weights.hpp"
#include "model/llama_model.hpp"
#include "model/model_text.hpp"
#include "model/standin_tokenizer.hpp"

namespace pagoda {
namespace {

using model::DummyDtype;
using model::LoadFormat;
using model::WeightPrecision;

const std::string kTiny = std::string(PAGODA_TEST_DATA_DIR) + "/../../model/configs/tiny";

TEST(DummyUniform, PureFunctionOfSeedTensorAndIndex) {
  std::vector<float> whole(1000), a(400), b(600);
  model::dummy_uniform(7, 3, 0, 0.5f, whole);
  model::dummy_uniform(7, 3, 0, 0.5f, a);
  model::dummy_uniform(7, 3, 400, 0.5f, b);
  for (size_t i = 0; i < 1000; ++i) EXPECT_EQ(whole[i], i < 400 ? a[i] : b[i - 400]) << i;
  std::vector<float> other_seed(1000), other_tensor(1000);
  model::dummy_uniform(8, 3, 0, 0.5f, other_seed);
  model::dummy_uniform(7, 4, 0, 0.5f, other_tensor);
  EXPECT_NE(whole, other_seed);
  EXPECT_NE(whole, other_tensor);
  double sum = 0, sq = 0;
  for (float v : whole) {
    EXPECT_LE(std::fabs(v), 0.5f);
    EXPECT_EQ(v, gpu::bf16_to_fp32(gpu::fp32_to_bf16(v)));  // bf16-representable
    sum += v;
    sq += double(v) * v;
  }
  EXPECT_NEAR(sum / 1000, 0.0, 0.03);          // uniform in +-0.5: mean 0 ...
  EXPECT_NEAR(sq / 1000, 0.25 / 3, 0.01);      // ... variance a^2/3
}

// Prefill of `prompt` then 3 greedy decode steps; returns every logits row.
// kv: the KV cache dtype (nullopt: the auto choice, bf16 with quantized weights).
std::vector<float> run_model(const std::string& path, DummyDtype dtype, WeightPrecision precision,
                             std::optional<gpu::KvDtype> kv = std::nullopt) {
  auto backend = gpu::make_backend(gpu::BackendKind::kCpu);
  EXPECT_TRUE(backend.ok());
  model::LoadOptions lo;
  lo.load_format = LoadFormat::kDummy;
  lo.dummy_dtype = dtype;
  lo.precision = precision;
  lo.max_num_batched_tokens = 64;
  lo.max_num_seqs = 2;
  lo.max_model_len = 128;
  lo.kv_dtype = kv;
  auto m = model::LlamaModel::load(path, **backend, lo);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  if (!m.ok()) return {};
  auto cache = (*backend)->create_kv_cache((*m)->kv_cache_spec(), 8);
  EXPECT_TRUE(cache.ok());
  const int32_t V = (*m)->config().vocab_size;
  const std::vector<int32_t> table = {5, 2, 7};
  std::vector<int32_t> tokens = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  std::vector<float> all, logits(static_cast<size_t>(V));
  int32_t cached = 0;
  for (int step = 0; step < 4; ++step) {
    model::ForwardBatch b;
    b.clear(8);
    b.add_sequence(tokens, cached, table, 16);
    EXPECT_TRUE((*m)->forward(b, *cache, logits.data()).ok());
    all.insert(all.end(), logits.begin(), logits.end());
    cached += int32_t(tokens.size());
    tokens = {int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin())};
  }
  return all;
}

void expect_finite_and_spread(const std::vector<float>& logits) {
  ASSERT_FALSE(logits.empty());
  float lo = logits[0], hi = logits[0];
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1.0f);  // not a constant: the weights reach the output
}

TEST(DummyModel, TinyConfigRunsAndIsReproducible) {
  const std::vector<float> a = run_model(kTiny, DummyDtype::kAuto, WeightPrecision::kExact);
  const std::vector<float> b = run_model(kTiny, DummyDtype::kAuto, WeightPrecision::kExact);
  expect_finite_and_spread(a);
  EXPECT_EQ(a, b);  // bitwise: fixed seed, same backend
  // f32 and bf16 storage of the same bf16-rounded values: the same model
  // (with the exact path's fp32 KV cache).
  EXPECT_EQ(a, run_model(kTiny, DummyDtype::kBf16, WeightPrecision::kExact));
  EXPECT_EQ(a, run_model(kTiny, DummyDtype::kF32, WeightPrecision::kQuantized, gpu::KvDtype::kF32));
}

TEST(DummyModel, QuantizedDtypesRun) {
  for (DummyDtype d : {DummyDtype::kQ8_0, DummyDtype::kQ4_0}) {
    const std::vector<float> a = run_model(kTiny, d, WeightPrecision::kQuantized);
    expect_finite_and_spread(a);
    EXPECT_EQ(a, run_model(kTiny, d, WeightPrecision::kQuantized));
  }
}

TEST(DummyModel, BlockDtypeWithExactPrecisionIsAnError) {
  auto backend = gpu::make_backend(gpu::BackendKind::kCpu);
  ASSERT_TRUE(backend.ok());
  model::LoadOptions lo;
  lo.load_format = LoadFormat::kDummy;
  lo.dummy_dtype = DummyDtype::kQ4_0;
  lo.precision = WeightPrecision::kExact;
  auto m = model::LlamaModel::load(kTiny, **backend, lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("quantized precision"), std::string::npos) << m.error().message;
  lo.precision = WeightPrecision::kQuantized;
  EXPECT_FALSE(model::LlamaModel::load(kTiny + "/no-such", **backend, lo).ok());
}

TEST(DummyModel, Qwen2ShapeWithBiasesRuns) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "pagoda-dummy-qwen2";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen2", "hidden_size": 128,
    "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
    "num_hidden_layers": 2, "vocab_size": 600, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
    "bos_token_id": 300, "eos_token_id": 301})";
  expect_finite_and_spread(run_model(dir.string(), DummyDtype::kAuto, WeightPrecision::kExact));
  expect_finite_and_spread(run_model(dir.string(), DummyDtype::kQ8_0, WeightPrecision::kQuantized));
  // The stand-in tokenizer for a directory without one: "<s>"/"</s>" at the config's ids.
  auto text = model::load_model_text(dir.string());
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text->tokenizer->bos_id(), 300);
  EXPECT_EQ(text->bos_token, "<s>");
  EXPECT_EQ(text->eos_token, "</s>");
  std::filesystem::remove_all(dir);
}

// Qwen3 shape: separate q/k/v projections and per-head q/k norms, head_dim 64
// != 128 / 4 (the --load-format dummy path of a qk_norm architecture).
TEST(DummyModel, Qwen3ShapeWithQkNormRuns) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "pagoda-dummy-qwen3";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen3", "hidden_size": 128,
    "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 600, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true})";
  const std::vector<float> a = run_model(dir.string(), DummyDtype::kAuto, WeightPrecision::kExact);
  expect_finite_and_spread(a);
  EXPECT_EQ(a, run_model(dir.string(), DummyDtype::kAuto, WeightPrecision::kExact));
  expect_finite_and_spread(run_model(dir.string(), DummyDtype::kQ8_0, WeightPrecision::kQuantized));
  std::filesystem::remove_all(dir);
}

TEST(StandinTokenizer, BytesRoundTrip) {
  auto tok = model::make_standin_tokenizer(128000, 128001);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::string text = "h\xc3\xa9llo \xe2\x82\xac\n\x01";
  std::vector<int32_t> ids = (*tok)->encode(text);
  ASSERT_EQ(ids.size(), text.size() + 1);
  EXPECT_EQ(ids[0], 128000);
  for (size_t i = 0; i < text.size(); ++i) EXPECT_EQ(ids[i + 1], int32_t(uint8_t(text[i])));
  EXPECT_EQ((*tok)->decode(ids, true), text);
  EXPECT_EQ((*tok)->decode(std::vector<int32_t>{104, 5000, 105}), "hi");  // no byte: nothing
  EXPECT_EQ((*tok)->encode("a<s>b", false), (std::vector<int32_t>{97, 128000, 98}));
}

TEST(StandinTokenizer, TinyConfigDirGetsIt) {
  auto text = model::load_model_text(kTiny);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text->tokenizer->bos_id(), 1);  // a byte id: still BOS, no "<s>" text
  EXPECT_EQ(text->tokenizer->encode("AB"), (std::vector<int32_t>{1, 65, 66}));
  auto via_json = model::load_model_text(kTiny + "/config.json");
  ASSERT_TRUE(via_json.ok()) << via_json.error().message;
}

}  // namespace
}  // namespace pagoda
