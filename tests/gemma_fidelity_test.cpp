// Gemma 2 and Gemma 3 (text) against HF transformers' fp32 logits of every
// position (tiny random models of tools/gen-arch-goldens.py: soft-caps that
// bite, query_pre_attn_scalar != head_dim, windows shorter than the longest
// golden sequence, interleaved windowed and global layers, Gemma 3's local
// and global RoPE bases and q/k norms, tied embeddings): from the HF
// directory and from the F32 / F16 GGUF files llama.cpp's converter makes
// (rebuilt from the committed listing; tests/tiny_fidelity.hpp), whole and in
// prefill chunks of 4, with KV blocks of 16 and of 8 tokens (with 8, the
// 19-token sequence's late rows skip whole blocks before their window).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "llama_test_util.hpp"
#include "tiny_fidelity.hpp"
#include "model/llama_model.hpp"
#include "model/model_config.hpp"

namespace pagoda {
namespace {

// llama.cpp's converter drops query_pre_attn_scalar (llama.cpp assumes head_dim,
// or hidden / heads for the 27B sizes); the tiny models' value travels in
// <arch>.attention.scale, which the loader honours (model_config.hpp).
std::vector<std::pair<std::string, float>> attention_scale(const std::string& arch, double qpas) {
  return {{arch + ".attention.scale", float(1.0 / std::sqrt(qpas))}};
}

void expect_fidelity(const std::string& name, const std::string& path, const std::string& label,
                     double max_abs) {
  for (int32_t bs : {16, 8}) {
    const test::TinyErrors e = test::tiny_errors(name, path, label + " BS " + std::to_string(bs),
                                                 INT32_MAX, bs);
    EXPECT_LE(e.abs, max_abs) << label << " block size " << bs;
  }
}

TEST(GemmaConfig, Gemma2FromHfDirectory) {
  auto c = model::load_model_config(test::logits_data("tiny-gemma2"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "gemma2");
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_DOUBLE_EQ(c->attn_logit_softcap, 4.0);
  EXPECT_DOUBLE_EQ(c->final_logit_softcap, 2.5);
  EXPECT_DOUBLE_EQ(c->query_pre_attn_scalar, 24.0);
  EXPECT_EQ(c->sliding_window, 5);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c->rope_local_theta, 0.0);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 2);
}

TEST(GemmaConfig, Gemma3FromHfDirectory) {
  auto c = model::load_model_config(test::logits_data("tiny-gemma3"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "gemma3_text");
  EXPECT_TRUE(c->qk_norm);
  EXPECT_DOUBLE_EQ(c->attn_logit_softcap, 0.0);
  EXPECT_DOUBLE_EQ(c->final_logit_softcap, 3.0);
  EXPECT_DOUBLE_EQ(c->query_pre_attn_scalar, 20.0);
  EXPECT_EQ(c->sliding_window, 6);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, true, true, true, true, false}));
  EXPECT_DOUBLE_EQ(c->rope_theta, 100000.0);
  EXPECT_DOUBLE_EQ(c->rope_local_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.type, model::RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 4.0);
}

// The converter's metadata reads back as the HF config, except the attention
// scale: without attention.scale llama.cpp's rule gives head_dim.
TEST(GemmaConfig, GgufListingMatchesHfConfig) {
  for (const char* name : {"tiny-gemma2", "tiny-gemma3"}) {
    auto hf = model::load_model_config(test::logits_data(name));
    ASSERT_TRUE(hf.ok()) << hf.error().message;
    auto g = model::load_model_config(test::llama_cpp_gguf(name, "f32"));
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->architecture, hf->architecture) << name;
    EXPECT_NEAR(g->attn_logit_softcap, hf->attn_logit_softcap, 1e-6) << name;
    EXPECT_NEAR(g->final_logit_softcap, hf->final_logit_softcap, 1e-6) << name;
    EXPECT_EQ(g->sliding_window, hf->sliding_window) << name;
    EXPECT_EQ(g->sliding_layers, hf->sliding_layers) << name;
    EXPECT_EQ(g->rope_local_theta, hf->rope_local_theta) << name;
    EXPECT_EQ(g->rope_theta, hf->rope_theta) << name;
    EXPECT_EQ(g->rope_scaling.type, hf->rope_scaling.type) << name;
    EXPECT_EQ(g->qk_norm, hf->qk_norm) << name;
    EXPECT_DOUBLE_EQ(g->query_pre_attn_scalar, double(g->head_dim)) << name;
  }
}

TEST(GemmaFidelity, Gemma2HfEveryPosition) {
  expect_fidelity("tiny-gemma2", test::logits_data("tiny-gemma2"), "tiny-gemma2 HF", 1e-3);
}

TEST(GemmaFidelity, Gemma3HfEveryPosition) {
  expect_fidelity("tiny-gemma3", test::logits_data("tiny-gemma3"), "tiny-gemma3 HF", 1e-3);
}

// F32: the safetensors' numbers (norms stored as 1 + w by the converter;
// measured max abs 7e-6, as from the HF directory). F16: every matrix rounded
// to fp16 (relative 2^-11): measured max abs 5.5e-3 (Gemma 2) and 8.3e-3
// (Gemma 3), above the other tiny models' 1.2e-3 because the rounded
// embedding enters scaled by sqrt(H) (9.8, 8) and again as the tied lm_head;
// bound 1.5e-2.
TEST(GemmaFidelity, Gemma2GgufF32AndF16) {
  for (const auto& [type, bound] : {std::pair<const char*, double>{"f32", 1e-3}, {"f16", 1.5e-2}}) {
    const std::string path = test::llama_cpp_gguf("tiny-gemma2", type, attention_scale("gemma2", 24));
    expect_fidelity("tiny-gemma2", path, std::string("tiny-gemma2 GGUF ") + type, bound);
  }
}

TEST(GemmaFidelity, Gemma3GgufF32AndF16) {
  for (const auto& [type, bound] : {std::pair<const char*, double>{"f32", 1e-3}, {"f16", 1.5e-2}}) {
    const std::string path = test::llama_cpp_gguf("tiny-gemma3", type, attention_scale("gemma3", 20));
    expect_fidelity("tiny-gemma3", path, std::string("tiny-gemma3 GGUF ") + type, bound);
  }
}

// The prefix cache with windowed layers: a second sequence that shares the
// first 16 tokens' blocks of the 19-token golden (as a prefix-cache hit does)
// and prefills only the last 3 tokens into a block of its own gets HF's
// logits at positions 16..18 (its windowed layers read only the shared
// blocks inside the window, its global layers all of them).
TEST(GemmaFidelity, SharedPrefixBlocksGiveHfLogits) {
  for (const char* name : {"tiny-gemma2", "tiny-gemma3"}) {
    for (int32_t bs : {16, 8}) {
      auto backend = test::cpu_backend();
      model::LoadOptions o;
      o.precision = model::WeightPrecision::kExact;
      o.max_num_batched_tokens = 64;
      o.max_num_seqs = 4;
      o.max_logits_rows = 64;
      o.block_size = bs;
      auto m = model::LlamaModel::load(test::logits_data(name), *backend, o);
      ASSERT_TRUE(m.ok()) << m.error().message;
      auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 16);
      ASSERT_TRUE(cache.ok());
      const test::TinyGolden g = test::load_tiny_golden(test::logits_data(name) + ".json");
      const std::vector<int32_t>& ids = g.ids[2];
      ASSERT_EQ(ids.size(), 19u);
      test::run_sequence(**m, *cache, ids, test::sequential_blocks(19, bs), 19);
      std::vector<int32_t> table = test::sequential_blocks(16, bs);  // the shared full blocks
      table.push_back(12);                                           // the new sequence's own
      model::ForwardBatch b;
      b.clear(int32_t(table.size()));
      b.add_sequence(std::span<const int32_t>(ids.data() + 16, 3), 16, table, bs, true, true);
      std::vector<float> logits(3 * size_t(g.vocab));
      ASSERT_TRUE((*m)->forward(b, *cache, logits.data()).ok());
      double worst = 0;
      for (size_t i = 0; i < logits.size(); ++i) {
        worst = std::max(worst, double(std::fabs(logits[i] - g.logits[2][16 * size_t(g.vocab) + i])));
      }
      EXPECT_LE(worst, 1e-3) << name << " block size " << bs;
    }
  }
}

// The CUDA kernels lack the soft-cap, the window and the Gemma ops: load()
// refuses Gemma on CUDA (before uploading weights), naming them; the CPU takes it.
TEST(GemmaConfig, CudaBackendRefusesGemmaNamingTheMissingKernels) {
  auto c = model::load_model_config(test::logits_data("tiny-gemma2"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(model::check_backend_support(*c, gpu::BackendKind::kCpu).ok());
  auto refused = model::check_backend_support(*c, gpu::BackendKind::kCuda);
  ASSERT_FALSE(refused.ok());
  for (const char* what : {"soft-capping", "sliding-window", "gelu_tanh_mul", "scale_cap"}) {
    EXPECT_NE(refused.error().message.find(what), std::string::npos) << refused.error().message;
  }
  auto qwen3 = model::load_model_config(test::logits_data("tiny-qwen3"));
  ASSERT_TRUE(qwen3.ok());
  EXPECT_TRUE(model::check_backend_support(*qwen3, gpu::BackendKind::kCuda).ok());
}

}  // namespace
}  // namespace pagoda
