// Mixtral and Qwen3-MoE against HF transformers' fp32 logits of every
// position (tiny random models of tools/gen-arch-goldens.py: 4 experts, top
// 2, every expert of every layer chosen by some of the golden tokens): from
// the HF directories (per-expert safetensors), from the F32 GGUF files
// llama.cpp's converter wrote (experts merged into 3-D tensors, Mixtral as
// arch "llama" with permuted Q/K) and from llama-quantize's Q8_0 and Q4_K_M
// files of them (committed, tests/data/logits/moe-gguf: expert gate/up in
// Q4_K, expert down in Q5_0/Q8_0, attention Q4_K/Q5_0/Q6_K, the router F32).
// Qwen3-MoE also without norm_topk_prob (HF logits of the same weights, the
// top-k probabilities not renormalised). Also: the bytes of weights a decode
// step reads (only the chosen experts), and the CUDA backend's refusal.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats_test_util.hpp"
#include "llama_test_util.hpp"
#include "model/llama_model.hpp"
#include "model/model_config.hpp"
#include "model/model_inspect.hpp"
#include "model/gguf_file.hpp"
#include "model/moe_ffn.hpp"

namespace pagoda {
namespace {

using model::WeightPrecision;

std::string gguf_path(const std::string& name, const std::string& type) {
  return test::logits_data("moe-gguf/" + name + "-" + type + ".gguf");
}

struct Errors {
  double abs = 0;
  int32_t argmax_same = 0, rows = 0;
  std::vector<double> row_abs;  // each row's max abs difference (whole, then chunked)

  int32_t rows_over(double bound) const {
    return int32_t(
        std::count_if(row_abs.begin(), row_abs.end(), [&](double d) { return d > bound; }));
  }
};

// The golden sequences of `golden` (HF logits) through the model at `path`,
// whole and in prefill chunks of 4.
Errors errors(const std::string& golden, const std::string& path, WeightPrecision precision,
              const std::string& label) {
  Errors worst;
  auto backend = test::cpu_backend();
  model::LoadOptions o;
  o.precision = precision;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 4;
  o.max_logits_rows = 64;
  auto m = model::LlamaModel::load(path, *backend, o);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return {1e9, 0, 1, {}};
  const test::TinyGolden g = test::load_tiny_golden(test::logits_data(golden) + ".json");
  EXPECT_EQ(g.vocab, (*m)->config().vocab_size);
  auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 16);
  EXPECT_TRUE(cache.ok());
  for (size_t s = 0; s < g.ids.size(); ++s) {
    const int32_t len = int32_t(g.ids[s].size());
    for (int32_t chunk : {len, 4}) {
      std::vector<float> ours =
          test::run_sequence(**m, *cache, g.ids[s], test::sequential_blocks(len, 16), chunk);
      const double abs = test::max_abs_error(ours.data(), g.logits[s].data(), ours.size());
      for (int32_t r = 0; r < len; ++r) {
        const size_t at = size_t(r) * size_t(g.vocab);
        double row = 0;
        for (int32_t j = 0; j < g.vocab; ++j)
          row = std::max(row, double(std::fabs(ours[at + j] - g.logits[s][at + j])));
        worst.row_abs.push_back(std::isnan(row) ? INFINITY : row);
        worst.argmax_same += test::argmax(ours.data() + at, g.vocab) ==
                             test::argmax(g.logits[s].data() + at, g.vocab);
        ++worst.rows;
      }
      std::printf("[%s] sequence %zu (len %d, chunk %d): max abs %.3g\n", label.c_str(), s, len,
                  chunk, abs);
      worst.abs = std::max(worst.abs, abs);
    }
  }
  std::printf("[%s] argmax equal to HF's at %d of %d positions\n", label.c_str(), worst.argmax_same,
              worst.rows);
  return worst;
}

TEST(MoeConfig, FromHfAndGguf) {
  for (const char* name : {"tiny-mixtral", "tiny-qwen3moe"}) {
    for (const std::string& path : {test::logits_data(name), gguf_path(name, "f32")}) {
      auto c = model::load_model_config(path);
      ASSERT_TRUE(c.ok()) << c.error().message;
      EXPECT_EQ(c->num_experts, 4) << path;
      EXPECT_EQ(c->num_experts_used, 2) << path;
      EXPECT_EQ(c->expert_intermediate_size, 32) << path;
      EXPECT_TRUE(c->moe_norm_topk_prob) << path;
    }
  }
  // llama.cpp converts Mixtral as "llama" with experts; Qwen3-MoE as qwen3moe.
  EXPECT_EQ(model::load_model_config(gguf_path("tiny-mixtral", "f32"))->architecture, "llama");
  EXPECT_EQ(model::load_model_config(test::logits_data("tiny-mixtral"))->architecture, "mixtral");
  EXPECT_EQ(model::load_model_config(gguf_path("tiny-qwen3moe", "f32"))->architecture, "qwen3_moe");
}

TEST(MoeFidelity, HfDirectories) {
  for (const char* name : {"tiny-mixtral", "tiny-qwen3moe"}) {
    const Errors e =
        errors(name, test::logits_data(name), WeightPrecision::kExact, std::string(name) + " HF");
    EXPECT_LE(e.abs, 1e-3) << name;
  }
}

TEST(MoeFidelity, GgufF32) {
  for (const char* name : {"tiny-mixtral", "tiny-qwen3moe"}) {
    const Errors e = errors(name, gguf_path(name, "f32"), WeightPrecision::kExact,
                            std::string(name) + " GGUF F32");
    EXPECT_LE(e.abs, 1e-3) << name;
  }
}

// The same weights with norm_topk_prob = false: HF's logits of that config
// are matched, and the renormalised golden is not (the switch is live).
TEST(MoeFidelity, Qwen3MoeWithoutTopkRenormalisation) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(test::temp_dir()) / "tiny-qwen3moe-nonorm";
  fs::create_directories(dir);
  const fs::path src = test::logits_data("tiny-qwen3moe");
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  std::ifstream in(src / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string cfg = text.str();
  const size_t at = cfg.find("\"norm_topk_prob\": true");
  ASSERT_NE(at, std::string::npos);
  cfg.replace(at, std::strlen("\"norm_topk_prob\": true"), "\"norm_topk_prob\": false");
  std::ofstream(dir / "config.json") << cfg;
  auto c = model::load_model_config(dir.string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->moe_norm_topk_prob);
  const Errors e =
      errors("tiny-qwen3moe-nonorm", dir.string(), WeightPrecision::kExact, "qwen3moe no renorm");
  EXPECT_LE(e.abs, 1e-3);
  const Errors other = errors("tiny-qwen3moe", dir.string(), WeightPrecision::kExact,
                              "qwen3moe no renorm vs renormalised golden");
  EXPECT_GT(other.abs, 0.05);
}

// The quantized path against HF on the file's own weights: every position
// within 0.08 but two (each position is run twice: whole and chunked), which
// may be off by up to 0.5: a token whose top-2 route is nearly tied can pick
// the other expert under int8 activations (measured: mixa's position 10 of
// the 19-token sequence, 0.23, every other position <= 0.03; tiny-mixtral
// q4_k_m, whose layer-1 Q4_K|Q4_K|Q6_K attention runs in its own types
// (mixed_block_group_test), positions 2 and 10: 0.15 / 0.27); argmax equal
// at >= 90% of the positions.
void expect_quantized_close(const Errors& e, const std::string& label) {
  EXPECT_LE(e.rows_over(0.08), 4) << label;
  EXPECT_LE(e.abs, 0.5) << label;
  EXPECT_GE(double(e.argmax_same), 0.9 * e.rows) << label;
}

// llama-quantize's files against HF's logits of the very weights they hold
// (tiny-<name>-<type>-dequant.json: dequantized by the gguf package, experts
// split): the exact path (the weights dequantized at load) must match as
// tightly as the F32 file does, so every expert slice of every block type was
// read right; the quantized path (int8 activations in the packed kernels)
// within 0.08, ~1.7x the largest measured error (AVX-512 VNNI, 2026-12-03:
// max abs Q8_0 0.027-0.039, Q4_K_M 0.026-0.046; logits span about +-2.5;
// exact path 1.5e-6-2.4e-6), as expect_quantized_close says (measured
// argmax 50-54 of 54). Against the fp32
// HF goldens (as quant_variant_fidelity_test does for SmolLM2) the
// quantization's own error dominates: measured max abs Q8_0 0.04-0.05,
// Q4_K_M 0.34-0.50 (random N(0, 0.2) weights, near-tied routes flip); the
// bound there only catches a broken file (an expert swapped or the
// renormalisation lost moves logits by 0.3-1 and argmaxes with them).
TEST(MoeFidelity, QuantizedGguf) {
  struct Case {
    const char* type;
    double fp32_max_abs, fp32_min_agree;
  };
  for (const char* name : {"tiny-mixtral", "tiny-qwen3moe"}) {
    for (const Case& q : {Case{"q8_0", 0.12, 0.9}, Case{"q4_k_m", 1.0, 0.7}}) {
      const std::string file = gguf_path(name, q.type);
      const std::string own = std::string(name) + "-" + q.type + "-dequant";
      const std::string label = std::string(name) + " " + q.type;
      const Errors exact =
          errors(own, file, WeightPrecision::kExact, label + " exact vs HF on its weights");
      EXPECT_LE(exact.abs, 1e-3) << label;
      const Errors quant =
          errors(own, file, WeightPrecision::kQuantized, label + " quantized vs HF on its weights");
      expect_quantized_close(quant, label);
      const Errors fp32 =
          errors(name, file, WeightPrecision::kQuantized, label + " quantized vs HF fp32");
      EXPECT_LE(fp32.abs, q.fp32_max_abs) << label;
      EXPECT_GE(double(fp32.argmax_same), q.fp32_min_agree * fp32.rows) << label;
    }
  }
}

// Every supported type in an expert tensor (llama-quantize --tensor-type,
// tools/gen-arch-goldens.py MIXES; the rest Q8_0): mixa Q2_K / Q3_K gate|up,
// Q4_0 / Q4_1 down; mixb Q5_K / Q6_K, Q5_1 / IQ4_NL; mixc IQ4_XS / BF16,
// F16 / Q5_0 (layer 0 / layer 1). Against HF on each file's own weights:
// the exact path as tightly as F32 (measured 1.4e-6-1.6e-6), the quantized
// path (each type's packed kernel) as expect_quantized_close says (measured
// 0.03 everywhere but mixa's one flipped route).
TEST(MoeFidelity, EveryTypeInExpertTensors) {
  for (const char* mix : {"mixa", "mixb", "mixc"}) {
    const std::string file = gguf_path("tiny-qwen3moe", mix);
    const std::string own = std::string("tiny-qwen3moe-") + mix + "-dequant";
    const Errors exact = errors(own, file, WeightPrecision::kExact, std::string(mix) + " exact");
    EXPECT_LE(exact.abs, 1e-3) << mix;
    const Errors quant =
        errors(own, file, WeightPrecision::kQuantized, std::string(mix) + " quantized");
    expect_quantized_close(quant, mix);
  }
}

// A one-token decode step reads the router and exactly k experts per layer;
// a 19-token prefill runs 19 k (token, expert) pairs per layer.
TEST(MoeBytes, DecodeReadsOnlyTheChosenExperts) {
  for (const std::string& path :
       {gguf_path("tiny-qwen3moe", "q4_k_m"), gguf_path("tiny-mixtral", "f32")}) {
    auto backend = test::cpu_backend();
    model::LoadOptions o;
    o.max_num_batched_tokens = 64;
    o.max_num_seqs = 4;
    o.max_logits_rows = 64;
    auto m = model::LlamaModel::load(path, *backend, o);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const model::ModelConfig& c = (*m)->config();
    auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 8);
    ASSERT_TRUE(cache.ok());
    const test::TinyGolden g = test::load_tiny_golden(test::logits_data("tiny-qwen3moe") + ".json");
    std::vector<int32_t> ids = g.ids[2];
    (*m)->reset_moe_counters();
    std::vector<float> logits =
        test::run_sequence(**m, *cache, ids, test::sequential_blocks(20, 16), 19);
    EXPECT_EQ((*m)->moe().pairs_run(), int64_t(19) * c.num_experts_used * c.num_layers);
    // decode: position 19, one token
    model::ForwardBatch b;
    b.clear(2);
    const int32_t next = 7;
    const std::vector<int32_t> blocks = test::sequential_blocks(20, 16);
    b.add_sequence(std::span<const int32_t>(&next, 1), 19, blocks, 16, true);
    (*m)->reset_moe_counters();
    std::vector<float> out(size_t(c.vocab_size));
    ASSERT_TRUE((*m)->forward(b, *cache, out.data()).ok());
    EXPECT_EQ((*m)->moe().pairs_run(), int64_t(c.num_experts_used) * c.num_layers);
    // Every expert of a layer has its layer's size (one 3-D tensor, one type);
    // bytes = sum over layers of router + k experts.
    uint64_t expect = 0;
    for (const model::LlamaLayerWeights& lw : (*m)->weights().layers) {
      const uint64_t expert = model::linear_weight_bytes(lw.experts[0].gate_up) +
                              model::linear_weight_bytes(lw.experts[0].down);
      expect += model::linear_weight_bytes(lw.router) + expert * uint64_t(c.num_experts_used);
    }
    EXPECT_EQ((*m)->moe().bytes_read(), expect);
    std::printf(
        "[%s] decode step: %llu bytes of router and expert weights read per token (%d of %d "
        "experts per layer)\n",
        path.c_str(), (unsigned long long)(*m)->moe().bytes_read(), c.num_experts_used,
        c.num_experts);
  }
}

// `pagoda inspect`: the expert layout, the quant mix of the expert groups and
// the bytes a decode token reads (every non-expert tensor, the tied
// embedding as lm_head, 2 of the 4 experts), from the file's own tensor sizes.
// Opt-in measurement (skips without PAGODA_MOE_CONFIG, an HF directory or
// config.json of an MoE model, e.g. Qwen3-30B-A3B's shape): dummy Q4_0
// weights, a 32-token prefill, then 8 one-token decode steps; prints the
// weight bytes a decode step reads (the dense weights, counted once, plus
// the router and expert bytes MoeFfn counted) against all the weights, and
// the median decode step time (wall clock; noisy on a shared machine).
TEST(MoeBytes, DecodeBytesPerTokenOfAConfig) {
  const char* config = std::getenv("PAGODA_MOE_CONFIG");
  if (config == nullptr)
    GTEST_SKIP() << "set PAGODA_MOE_CONFIG to an MoE config.json / HF directory";
  auto backend = test::cpu_backend();
  model::LoadOptions o;
  o.load_format = model::LoadFormat::kDummy;
  o.dummy_dtype = model::DummyDtype::kQ4_0;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 4;
  o.max_model_len = 256;
  o.max_logits_rows = 64;
  auto m = model::LlamaModel::load(config, *backend, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const model::ModelConfig& c = (*m)->config();
  uint64_t moe_all = 0;
  for (const model::LlamaLayerWeights& lw : (*m)->weights().layers) {
    moe_all += model::linear_weight_bytes(lw.router);
    for (const model::MoeExpertWeights& x : lw.experts) {
      moe_all += model::linear_weight_bytes(x.gate_up) + model::linear_weight_bytes(x.down);
    }
  }
  // The embedding table is gathered (one row per token), not read whole.
  const uint64_t embed = uint64_t(c.vocab_size) * uint64_t(c.hidden_size) * sizeof(float);
  const uint64_t dense = (*m)->weight_bytes() - moe_all - embed;
  auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 8);
  ASSERT_TRUE(cache.ok());
  std::vector<int32_t> ids(32);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i * 7919 % size_t(c.vocab_size));
  const std::vector<int32_t> blocks = test::sequential_blocks(64, 16);
  (void)test::run_sequence(**m, *cache, ids, blocks, 32);
  std::vector<double> ms;
  std::vector<float> out(size_t(c.vocab_size));
  uint64_t moe_read = 0;
  for (int32_t step = 0; step < 8; ++step) {
    model::ForwardBatch b;
    b.clear(int32_t(blocks.size()));
    const int32_t next = (step * 31 + 5) % c.vocab_size;
    b.add_sequence(std::span<const int32_t>(&next, 1), 32 + step, blocks, 16, true);
    (*m)->reset_moe_counters();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE((*m)->forward(b, *cache, out.data()).ok());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    moe_read = std::max(moe_read, (*m)->moe().bytes_read());
    EXPECT_EQ((*m)->moe().pairs_run(), int64_t(c.num_experts_used) * c.num_layers);
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "%s: %d layers, %d experts, top %d: decode step reads %.1f MB (dense %.1f + router/experts "
      "%.1f) "
      "of %.1f MB of weights (%.1f MB of them router/experts); median step %.1f ms (min %.1f)\n",
      config, c.num_layers, c.num_experts, c.num_experts_used, double(dense + moe_read) / 1e6,
      double(dense) / 1e6, double(moe_read) / 1e6, double(dense + moe_all) / 1e6,
      double(moe_all) / 1e6, ms[ms.size() / 2], ms[0]);
}

TEST(MoeInspect, ShowsExpertLayoutQuantMixAndBytesPerToken) {
  const std::string path = gguf_path("tiny-qwen3moe", "q4_k_m");
  auto text = model::inspect_model_json(path);
  ASSERT_TRUE(text.ok()) << text.error().message;
  simdjson::dom::parser parser;
  simdjson::dom::element j = parser.parse(*text);
  EXPECT_EQ(std::string_view(j["quant_mix"]["ffn_gate_exps"]), "Q4_K x2");
  EXPECT_EQ(std::string_view(j["quant_mix"]["ffn_gate_inp"]), "F32 x2");
  auto g = model::GgufFile::open(path);
  ASSERT_TRUE(g.ok());
  uint64_t experts = 0, other = 0;
  for (const model::GgufTensorInfo& t : g->tensors()) {
    (t.name.find("_exps.") != std::string::npos ? experts : other) += t.nbytes;
  }
  simdjson::dom::element moe = j["moe"];
  EXPECT_EQ(int64_t(moe["num_experts"]), 4);
  EXPECT_EQ(int64_t(moe["num_experts_used"]), 2);
  EXPECT_EQ(uint64_t(int64_t(moe["expert_bytes"])), experts);
  EXPECT_EQ(uint64_t(int64_t(moe["decode_bytes_per_token"])), other + experts / 2);
  std::printf("%s", text->c_str());
  // HF: one group per projection for all experts.
  auto hf = model::inspect_model_json(test::logits_data("tiny-mixtral"));
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  simdjson::dom::element h = parser.parse(*hf);
  EXPECT_EQ(std::string_view(h["quant_mix"]["block_sparse_moe.experts.w1"]), "F32 x8");
  EXPECT_TRUE(bool(h["moe"]["norm_topk_prob"]));
}

TEST(MoeBackend, CudaRefusesMoeNamingWhatIsMissing) {
  auto c = model::load_model_config(test::logits_data("tiny-mixtral"));
  ASSERT_TRUE(c.ok());
  auto ok = model::check_backend_support(*c, gpu::BackendKind::kCuda);
  ASSERT_FALSE(ok.ok());
  EXPECT_NE(ok.error().message.find("mixture-of-experts"), std::string::npos) << ok.error().message;
  EXPECT_TRUE(model::check_backend_support(*c, gpu::BackendKind::kCpu).ok());
}

// --load-format dummy makes random MoE weights of the config's shape: a
// 19-token prefill runs 19 k pairs per layer and spreads them over experts.
TEST(MoeBackend, DummyWeights) {
  auto backend = test::cpu_backend();
  model::LoadOptions o;
  o.load_format = model::LoadFormat::kDummy;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 4;
  o.max_logits_rows = 64;
  auto m = model::LlamaModel::load(test::logits_data("tiny-qwen3moe"), *backend, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto cache = backend->create_kv_cache((*m)->kv_cache_spec(), 8);
  ASSERT_TRUE(cache.ok());
  const test::TinyGolden g = test::load_tiny_golden(test::logits_data("tiny-qwen3moe") + ".json");
  std::vector<float> logits =
      test::run_sequence(**m, *cache, g.ids[2], test::sequential_blocks(19, 16), 19);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  const model::ModelConfig& c = (*m)->config();
  EXPECT_EQ((*m)->moe().pairs_run(), int64_t(19) * c.num_experts_used * c.num_layers);
  const model::MoeRouting& r = (*m)->moe().last_routing();
  int32_t chosen = 0;
  for (int32_t e = 0; e < c.num_experts; ++e)
    chosen += r.offsets[size_t(e + 1)] > r.offsets[size_t(e)];
  EXPECT_GE(chosen, 3);
}

}  // namespace
}  // namespace pagoda
