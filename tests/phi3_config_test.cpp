// Phi-3 / Phi-4-mini: the architecture row (fused tensor names), longrope and
// partial rotary read from HF config.json (old "rope_scaling" with type "su",
// transformers-5 "rope_parameters") and from GGUF (llama.cpp's
// rope_factors_long/short.weight and rope.scaling.attn_factor), and the rope
// op's cos/sin scale (the attention factor) on the CPU backend. The forward
// against HF's logits is llama_fidelity_test's TinyFidelity*Phi3*.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "formats_test_util.hpp"
#include "llama_test_util.hpp"
#include "model/architecture.hpp"
#include "model/gguf_file.hpp"
#include "model/model_config.hpp"

namespace pagoda::model {
namespace {

// A Phi-3 config.json: hidden 64, 4 heads (head_dim 16), with `rope` the
// rope fields (already with a trailing comma, or empty).
std::string phi3_json(const std::string& rope) {
  return R"({"model_type": "phi3", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
    "vocab_size": 32064, "max_position_embeddings": 131072, )" + rope + R"( "rms_norm_eps": 1e-5})";
}

const char* kEight = "[1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5]";
const char* kEightLong = "[2, 3, 4, 5, 6, 7, 8, 9]";

TEST(Phi3Architecture, FusedTensorNames) {
  const Architecture* a = find_hf_architecture("phi3");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(find_gguf_architecture("phi3"), a);
  EXPECT_TRUE(a->fused_qkv);
  EXPECT_TRUE(a->fused_gate_up);
  EXPECT_EQ(tensor_name(*a, false, TensorRole::kQkv, 3), "model.layers.3.self_attn.qkv_proj.weight");
  EXPECT_EQ(tensor_name(*a, true, TensorRole::kQkv, 3), "blk.3.attn_qkv.weight");
  EXPECT_EQ(tensor_name(*a, false, TensorRole::kGateUp, 0), "model.layers.0.mlp.gate_up_proj.weight");
  EXPECT_EQ(tensor_name(*a, true, TensorRole::kGateUp, 0), "blk.0.ffn_up.weight");
  EXPECT_FALSE(find_hf_architecture("llama")->fused_qkv);
}

// Phi-3-mini-128k style (transformers < 5): top-level rope_scaling of type
// "su" and original_max_position_embeddings; the attention factor follows
// from 131072 / 4096 = 32.
TEST(Phi3ConfigHf, OldSuRopeScaling) {
  auto c = config_from_hf_json(test::write_file(
      "phi3-su.json", phi3_json(std::string(R"("original_max_position_embeddings": 4096,
      "rope_theta": 10000.0, "rope_scaling": {"type": "su", "short_factor": )") + kEight +
                                ", \"long_factor\": " + kEightLong + "},")));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "phi3");
  const RopeScaling& rs = c->rope_scaling;
  ASSERT_EQ(rs.type, RopeScalingType::kLongRope);
  EXPECT_EQ(rs.original_max_position_embeddings, 4096);
  EXPECT_EQ(rs.short_factor, (std::vector<double>{1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}));
  EXPECT_EQ(rs.long_factor, (std::vector<double>{2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_NEAR(rs.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
  EXPECT_EQ(c->rotary_dim, 0);  // whole head
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{32000});  // Phi3Config's defaults
}

// Phi-4-mini style: partial_rotary_factor 0.75 at the top level (12 of 16
// dims, 6 factors each), an explicit attention_factor, and a context no
// longer than the original one.
TEST(Phi3ConfigHf, PartialRotaryAndExplicitAttentionFactor) {
  auto c = config_from_hf_json(test::write_file("phi4mini.json", phi3_json(R"(
      "partial_rotary_factor": 0.75, "tie_word_embeddings": true,
      "rope_parameters": {"rope_type": "longrope", "rope_theta": 250000.0,
        "original_max_position_embeddings": 4096, "attention_factor": 1.25,
        "short_factor": [1, 1, 1, 1, 1, 1], "long_factor": [1, 2, 3, 4, 5, 6]},)")));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rotary_dim, 12);
  EXPECT_EQ(c->rope_theta, 250000.0);
  EXPECT_EQ(c->rope_scaling.attention_factor, 1.25);
  EXPECT_TRUE(c->tie_word_embeddings);
  auto same = config_from_hf_json(test::write_file("phi3-nofactor.json", phi3_json(R"(
      "rope_parameters": {"rope_type": "longrope", "original_max_position_embeddings": 131072,
        "short_factor": )" + std::string(kEight) + ", \"long_factor\": " + kEight + "},")));
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_EQ(same->rope_scaling.attention_factor, 1.0);  // factor 1: no scaling
}

TEST(Phi3ConfigHf, Errors) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("rope_scaling": {"type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2]},)",
       "8 positive numbers"},
      {R"("rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1]},)",
       "\"long_factor\" is missing"},
      {R"("rope_scaling": {"type": "su", "short_factor": "x", "long_factor": [1]},)",
       "a list of numbers"},
      {R"("partial_rotary_factor": 1.5,)", "partial_rotary_factor"},
  };
  for (const auto& [rope, want] : cases) {
    auto c = config_from_hf_json(test::write_file("phi3-bad.json", phi3_json(rope)));
    ASSERT_FALSE(c.ok()) << rope;
    EXPECT_NE(c.error().message.find(want), std::string::npos) << c.error().message;
  }
}

// A phi3 GGUF header (no weights): rope.dimension_count `rot`, and `factors`
// entries in each rope_factors tensor (0: leave the tensors out; -1: only the long one).
std::string phi3_gguf(const std::string& name, uint32_t rot, int factors) {
  test::GgufWriter w;
  w.kv_str("general.architecture", "phi3");
  w.kv_u32("phi3.block_count", 2).kv_u32("phi3.context_length", 131072);
  w.kv_u32("phi3.embedding_length", 64).kv_u32("phi3.feed_forward_length", 128);
  w.kv_u32("phi3.attention.head_count", 4).kv_u32("phi3.attention.head_count_kv", 4);
  w.kv_u32("phi3.rope.dimension_count", rot).kv_u32("phi3.vocab_size", 100);
  w.kv_f32("phi3.attention.layer_norm_rms_epsilon", 1e-5f).kv_f32("phi3.rope.freq_base", 1e4f);
  w.kv_u32("phi3.rope.scaling.original_context_length", 4096);
  w.kv_f32("phi3.rope.scaling.attn_factor", 1.19024f);
  const auto tensor = [&](const char* n, float base) {
    test::Bytes b;
    for (int i = 0; i < std::abs(factors); ++i) b.f32(base + float(i));
    w.tensor(test::spec(n, {uint64_t(std::abs(factors))}, 0, b.b));
  };
  if (factors != 0) tensor("rope_factors_long.weight", 2.0f);
  if (factors > 0) tensor("rope_factors_short.weight", 1.0f);
  return test::write_file(name, w.build());
}

Result<ModelConfig> gguf_config(const std::string& path) {
  auto g = GgufFile::open(path);
  if (!g) return g.error();
  return config_from_gguf(*g);
}

TEST(Phi3ConfigGguf, LongRopeFactorsAndPartialRotary) {
  auto c = gguf_config(phi3_gguf("phi3-ok.gguf", 12, 6));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "phi3");
  EXPECT_EQ(c->rotary_dim, 12);
  EXPECT_FALSE(c->rope_interleaved);
  const RopeScaling& rs = c->rope_scaling;
  ASSERT_EQ(rs.type, RopeScalingType::kLongRope);
  EXPECT_EQ(rs.long_factor, (std::vector<double>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(rs.short_factor, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_NEAR(rs.attention_factor, 1.19024, 1e-6);
  EXPECT_EQ(rs.original_max_position_embeddings, 4096);
  auto plain = gguf_config(phi3_gguf("phi3-plain.gguf", 16, 0));  // Phi-3-mini-4k: no factors
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(plain->rotary_dim, 0);
}

TEST(Phi3ConfigGguf, Errors) {
  const std::pair<std::string, std::string> cases[] = {
      {phi3_gguf("phi3-one.gguf", 16, -8), "need each other"},
      {phi3_gguf("phi3-len.gguf", 12, 8), "6 elements"},
      {phi3_gguf("phi3-rot.gguf", 18, 0), "must be even and in"},
  };
  for (const auto& [path, want] : cases) {
    auto c = gguf_config(path);
    ASSERT_FALSE(c.ok()) << path;
    EXPECT_NE(c.error().message.find(want), std::string::npos) << c.error().message;
  }
}

// The rope op's scale multiplies cos and sin: rotated elements scale with it,
// the unrotated tail (partial rotary) does not.
TEST(Phi3Rope, AttentionFactorScalesOnlyTheRotatedElements) {
  auto backend = test::cpu_backend(1);
  gpu::RopeConfig rc;
  rc.head_dim = 8;
  rc.rotary_dim = 4;
  rc.attention_factor = 1.5f;
  auto table = backend->create_rope_table(rc);
  ASSERT_TRUE(table.ok()) << table.error().message;
  std::vector<float> q = {1, 2, 3, 4, 5, 6, 7, 8};
  const int32_t pos = 0;  // angle 0: cos 1, sin 0, so each rotated element is x * scale
  backend->rope(table->params(q.data(), 8, nullptr, 8, &pos, 1, 1, 1));
  backend->synchronize();
  EXPECT_EQ(q, (std::vector<float>{1.5f, 3, 4.5f, 6, 5, 6, 7, 8}));
}

}  // namespace
}  // namespace pagoda::model
