// Gemma 2 / Gemma 3 settings of ModelConfig beyond the tiny models' own
// configs (gemma_fidelity_test): GGUF sliding-window patterns (absent:
// llama.cpp's defaults 2 and 6; an integer; a bool per layer), the default
// window of gemma2 files, the local RoPE base and llama.cpp's attention-scale
// rule; HF configs as transformers 4 wrote them (rope_local_base_freq,
// sliding_window_pattern, rope_scaling), null soft-caps (off) against absent
// ones (the class default), an unsupported activation; and a dummy-weight
// Gemma model running a few steps with its logits inside the final soft-cap.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "formats_test_util.hpp"
#include "gpu/backend.hpp"
#include "model/gguf_file.hpp"
#include "model/llama_model.hpp"
#include "model/model_config.hpp"

namespace pagoda {
namespace {

using model::ModelConfig;

// A metadata-only GGUF of `arch` with `layers` layers (head_dim 32 != 64 / 4).
std::string gemma_gguf(const std::string& name, const std::string& arch, uint32_t layers,
                       const std::function<void(test::GgufWriter&)>& extra) {
  test::GgufWriter w;
  const std::string p = arch + ".";
  w.kv_str("general.architecture", arch);
  w.kv_u32(p + "block_count", layers);
  w.kv_u32(p + "context_length", 256);
  w.kv_u32(p + "embedding_length", 64);
  w.kv_u32(p + "feed_forward_length", 128);
  w.kv_u32(p + "attention.head_count", 4);
  w.kv_u32(p + "attention.head_count_kv", 2);
  w.kv_u32(p + "attention.key_length", 32);
  w.kv_u32(p + "vocab_size", 100);
  w.kv_f32(p + "rope.freq_base", 1e6f);
  w.kv_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (extra) extra(w);
  return test::write_file(name, w.build());
}

Result<ModelConfig> gguf_config(const std::string& path) {
  auto g = model::GgufFile::open(path);
  if (!g) return g.error();
  return model::config_from_gguf(*g);
}

TEST(GemmaGguf, SlidingPatternDefaultsIntegerAndPerLayer) {
  auto g3 = gguf_config(gemma_gguf("g3-default.gguf", "gemma3", 7, [](test::GgufWriter& w) {
    w.kv_u32("gemma3.attention.sliding_window", 8);
  }));
  ASSERT_TRUE(g3.ok()) << g3.error().message;
  EXPECT_EQ(g3->sliding_window, 8);
  EXPECT_EQ(g3->sliding_layers, (std::vector<bool>{true, true, true, true, true, false, true}));
  EXPECT_EQ(g3->rope_local_theta, 1e6);  // no rope.freq_base_swa: the global base, unscaled
  EXPECT_EQ(g3->query_pre_attn_scalar, 32.0);  // llama.cpp's rule: head_dim
  auto every_third = gguf_config(gemma_gguf("g3-int.gguf", "gemma3", 4, [](test::GgufWriter& w) {
    w.kv_u32("gemma3.attention.sliding_window", 8);
    w.kv_u32("gemma3.attention.sliding_window_pattern", 3);
    w.kv_f32("gemma3.rope.freq_base_swa", 1e4f);
  }));
  ASSERT_TRUE(every_third.ok()) << every_third.error().message;
  EXPECT_EQ(every_third->sliding_layers, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(every_third->rope_local_theta, 1e4);
  auto listed = gguf_config(gemma_gguf("g3-arr.gguf", "gemma3", 3, [](test::GgufWriter& w) {
    w.kv_u32("gemma3.attention.sliding_window", 8);
    test::Bytes p;
    p.u32(7).u64(3).u8(0).u8(1).u8(1);  // an array of 3 bools
    w.kv("gemma3.attention.sliding_window_pattern", 9, p);
  }));
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  EXPECT_EQ(listed->sliding_layers, (std::vector<bool>{false, true, true}));
  auto none = gguf_config(gemma_gguf("g3-none.gguf", "gemma3", 3, nullptr));  // no window key
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none->sliding_window, 0);
  EXPECT_TRUE(none->sliding_layers.empty());
}

TEST(GemmaGguf, Gemma2DefaultsAndAttentionScale) {
  auto c = gguf_config(gemma_gguf("g2.gguf", "gemma2", 3, [](test::GgufWriter& w) {
    w.kv_f32("gemma2.attn_logit_softcapping", 50.0f);
    w.kv_f32("gemma2.attention.scale", 0.125f);  // 1 / sqrt(64)
  }));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->sliding_window, 4096);  // llama.cpp's gemma2 default
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c->attn_logit_softcap, 50.0);
  EXPECT_EQ(c->final_logit_softcap, 0.0);
  EXPECT_EQ(c->rope_local_theta, 0.0);  // Gemma 2: one RoPE for every layer
  EXPECT_DOUBLE_EQ(c->query_pre_attn_scalar, 64.0);
  auto big = gguf_config(gemma_gguf("g2-46.gguf", "gemma2", 46, nullptr));  // the 27B's depth
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_EQ(big->query_pre_attn_scalar, 16.0);  // hidden 64 / 4 heads, not head_dim 32
}

std::string config_json(const std::string& name, const std::string& fields) {
  const std::string dir = test::temp_dir() + "/" + name;
  std::filesystem::create_directories(dir);
  test::write_file(name + "/config.json",
                   "{\"num_hidden_layers\": 7, \"hidden_size\": 64, \"num_attention_heads\": 4,"
                   " \"num_key_value_heads\": 2, \"head_dim\": 32, \"intermediate_size\": 128,"
                   " \"vocab_size\": 100, " + fields + "}");
  return dir;
}

TEST(GemmaHf, Gemma3AsTransformers4WroteIt) {
  auto c = model::load_model_config(config_json(
      "g3-v4", "\"model_type\": \"gemma3_text\", \"rope_theta\": 1000000.0,"
               " \"rope_local_base_freq\": 10000.0, \"rope_scaling\": {\"rope_type\": \"linear\","
               " \"factor\": 8.0}, \"sliding_window\": 512, \"sliding_window_pattern\": 6,"
               " \"query_pre_attn_scalar\": 256, \"final_logit_softcapping\": null,"
               " \"attn_logit_softcapping\": null, \"hidden_activation\": \"gelu_pytorch_tanh\""));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->sliding_window, 512);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, true, true, true, true, false, true}));
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_local_theta, 1e4);
  EXPECT_EQ(c->rope_scaling.type, model::RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c->final_logit_softcap, 0.0);
}

TEST(GemmaHf, Gemma2NullSoftcapIsOffAbsentIsTheDefault) {
  auto absent = model::load_model_config(config_json("g2-absent", "\"model_type\": \"gemma2\""));
  ASSERT_TRUE(absent.ok()) << absent.error().message;
  EXPECT_EQ(absent->attn_logit_softcap, 50.0);  // Gemma2Config's defaults
  EXPECT_EQ(absent->final_logit_softcap, 30.0);
  EXPECT_EQ(absent->sliding_window, 4096);
  EXPECT_EQ(absent->query_pre_attn_scalar, 256.0);
  auto null = model::load_model_config(
      config_json("g2-null", "\"model_type\": \"gemma2\", \"attn_logit_softcapping\": null"));
  ASSERT_TRUE(null.ok()) << null.error().message;
  EXPECT_EQ(null->attn_logit_softcap, 0.0);
  auto relu = model::load_model_config(
      config_json("g2-relu", "\"model_type\": \"gemma2\", \"hidden_activation\": \"relu\""));
  ASSERT_FALSE(relu.ok());
  EXPECT_NE(relu.error().message.find("relu"), std::string::npos);
}

// Dummy weights of the tiny Gemma 2 config: post norms present, every step
// runs, the logits stay inside the final soft-cap (2.5).
TEST(GemmaDummy, RunsWithLogitsInsideTheCap) {
  auto backend = gpu::make_backend(gpu::BackendKind::kCpu);
  ASSERT_TRUE(backend.ok());
  model::LoadOptions lo;
  lo.load_format = model::LoadFormat::kDummy;
  lo.max_num_batched_tokens = 32;
  lo.max_num_seqs = 2;
  auto m = model::LlamaModel::load(std::string(PAGODA_TEST_DATA_DIR) + "/logits/tiny-gemma2",
                                   **backend, lo);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto cache = (*backend)->create_kv_cache((*m)->kv_cache_spec(), 4);
  ASSERT_TRUE(cache.ok());
  std::vector<float> logits(size_t((*m)->config().vocab_size));
  model::ForwardBatch b;
  b.clear(8);
  const std::vector<int32_t> tokens = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}, table = {2, 0};
  b.add_sequence(tokens, 0, table, 16);
  ASSERT_TRUE((*m)->forward(b, *cache, logits.data()).ok());
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    EXPECT_LE(std::fabs(v), 2.5f);
  }
}

}  // namespace
}  // namespace pagoda
