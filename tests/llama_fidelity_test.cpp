// Fidelity of LlamaModel::forward against HuggingFace transformers (goldens of
// tools/gen-logits-goldens.py in tests/data/logits/):
//  - SmolLM2-135M-Instruct (the real Q4_1 GGUF; transformers dequantises it to
//    fp32): last-position logits of 8 prompts and their 32-token greedy
//    continuations, on the exact path (fp32 weights) and the quantized path
//    (Q4_1/Q8_0 weights with int8 activations; there also the argmax at each
//    of the 32 positions with HF's tokens fed back, teacher-forced);
//  - tiny random Llama (llama3 rope scaling, untied) and Qwen2 (QKV bias,
//    tied) safetensors models: the logits of every position;
//  - tiny random Qwen3 (q/k norm), Mistral-Nemo-style (head_dim != hidden /
//    heads) and Llama-3.2-style (llama3 rope, tied) models of
//    tools/gen-arch-goldens.py: from the HF directory, and
//    as the F32 and F16 GGUF files llama.cpp's convert_hf_to_gguf.py makes of
//    them (rebuilt at test time from the committed listing of what it wrote).
// Error measures: "max abs" = max_j |ours - HF| over a row; "row-relative" =
// max_j |ours - HF| / max_j |HF| per row (the logits' scale varies by model).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>
#include <fstream>

#include "formats_test_util.hpp"
#include "llama_test_util.hpp"
#include "tiny_fidelity.hpp"
#include "tiny_gguf_writer.hpp"
#include "model/dequant.hpp"
#include "model/gguf_file.hpp"
#include "model/simple_generator.hpp"

namespace pagoda {
namespace {

using model::LlamaModel;
using model::WeightPrecision;
using test::TinyErrors;
using test::tiny_errors;
using test::llama_cpp_gguf;
using test::check_llama_cpp_gguf;

struct SmolGolden {
  std::vector<std::vector<int32_t>> ids, greedy;
  std::vector<int32_t> argmax;
  std::vector<float> last;  // [8, vocab]
  int32_t vocab = 0;
};

SmolGolden load_smol_golden() {
  SmolGolden g;
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.load(test::logits_data("smollm2.json"));
  g.vocab = int32_t(int64_t(root["vocab"]));
  for (simdjson::dom::element p : root["prompts"].get_array()) {
    std::vector<int32_t> ids, greedy;
    for (int64_t v : p["ids"].get_array()) ids.push_back(int32_t(v));
    for (int64_t v : p["greedy"].get_array()) greedy.push_back(int32_t(v));
    g.ids.push_back(ids);
    g.greedy.push_back(greedy);
    g.argmax.push_back(int32_t(int64_t(p["argmax"])));
  }
  g.last.resize(g.ids.size() * size_t(g.vocab));
  std::ifstream f(test::logits_data("smollm2_last.f32"), std::ios::binary);
  f.read(reinterpret_cast<char*>(g.last.data()), std::streamsize(g.last.size() * 4));
  EXPECT_TRUE(bool(f)) << "smollm2_last.f32 is short";
  return g;
}

constexpr int32_t kMaxLen = 128;  // every prompt + 32 tokens fits

// Quantized path (int8 activations against the same dequantised weights): the
// measured max abs logit error over the 8 prompts was 0.894 (RMS 0.07-0.12;
// AVX2 kernel); the bound leaves margin for other kernels' summation order.
constexpr double kQuantizedMaxAbs = 1.5;
// Greedy tokens equal to HF's over 8 x 32 (measured 151: prompts 0, 3, 4 and 6
// match all 32; prompts 1 and 5 differ from the first token, where HF's top-2
// logits are only 0.038 and 0.0056 apart).
constexpr size_t kQuantizedMinGreedyTotal = 120;
// The same 8 x 32 positions with HF's tokens fed back (teacher forcing), so
// a near-tie costs one position, not the rest of the prompt: the robust
// measure of the two (see teacher_forced_agreement). Measured 247 (AVX-512
// VNNI and AVX2 kernels) and 248 (scalar), where the greedy prefix count
// above moved between 139 and 144 on the same machine.
constexpr size_t kQuantizedMinTeacherForced = 236;

// One SmolLM2 model per precision, with a cache of kMaxLen tokens per prompt.
struct Smol {
  std::unique_ptr<gpu::Backend> backend = test::cpu_backend();
  std::unique_ptr<LlamaModel> model;
  gpu::KvCache cache;
};

Smol* smol(WeightPrecision precision) {
  static std::unique_ptr<Smol> loaded[2];
  auto& s = loaded[precision == WeightPrecision::kExact ? 0 : 1];
  if (s) return s.get();
  const std::string path = test::real_model_path();
  if (path.empty()) return nullptr;
  s = std::make_unique<Smol>();
  model::LoadOptions o;
  o.precision = precision;
  o.max_num_batched_tokens = 256;
  o.max_num_seqs = 8;
  o.max_model_len = kMaxLen;
  auto m = LlamaModel::load(path, *s->backend, o);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return nullptr;
  s->model = std::move(m).value();
  auto cache = s->backend->create_kv_cache(s->model->kv_cache_spec(), 8 * kMaxLen / 16);
  EXPECT_TRUE(cache.ok());
  s->cache = std::move(cache).value();
  return s.get();
}

// All prompts in one batch (prefill), then `steps - 1` batched greedy decode
// steps. Returns the last-position logits of the prefill and the tokens.
struct BatchedRun {
  std::vector<float> prefill_logits;            // [S, vocab]
  std::vector<std::vector<int32_t>> generated;  // [S][steps]
};

BatchedRun run_batched_greedy(Smol& s, const std::vector<std::vector<int32_t>>& prompts,
                              int32_t steps) {
  const int32_t S = int32_t(prompts.size()), V = s.model->config().vocab_size;
  const int32_t bs = s.model->options().block_size, bps = kMaxLen / bs;
  std::vector<std::vector<int32_t>> tables;
  for (int32_t i = 0; i < S; ++i) tables.push_back(test::sequential_blocks(kMaxLen, bs, i * bps));
  BatchedRun run;
  run.prefill_logits.resize(size_t(S) * size_t(V));
  run.generated.resize(size_t(S));
  std::vector<float> logits(size_t(S) * size_t(V));
  model::ForwardBatch b;
  b.clear(bps);
  for (int32_t i = 0; i < S; ++i) b.add_sequence(prompts[size_t(i)], 0, tables[size_t(i)], bs);
  for (int32_t step = 0; step < steps; ++step) {
    auto r = s.model->forward(b, s.cache, logits.data());
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return run;
    if (step == 0) run.prefill_logits = logits;
    b.clear(bps);
    for (int32_t i = 0; i < S; ++i) {
      const int32_t tok = test::argmax(logits.data() + size_t(i) * size_t(V), V);
      run.generated[size_t(i)].push_back(tok);
      const int32_t pos = int32_t(prompts[size_t(i)].size()) + step;
      b.add_sequence(std::span<const int32_t>(&tok, 1), pos, tables[size_t(i)], bs);
    }
  }
  return run;
}

// Teacher forcing: the same batch, but every decode step feeds HF's greedy
// token (not ours), so one near-tie does not change every later position.
// Returns, per prompt, how many of our argmaxes equal HF's greedy token
// (32 positions: after the prompt and after each of HF's first 31 tokens).
std::vector<size_t> teacher_forced_agreement(Smol& s, const std::vector<std::vector<int32_t>>& prompts,
                                             const std::vector<std::vector<int32_t>>& golden) {
  const int32_t S = int32_t(prompts.size()), V = s.model->config().vocab_size;
  const int32_t bs = s.model->options().block_size, bps = kMaxLen / bs;
  std::vector<std::vector<int32_t>> tables;
  for (int32_t i = 0; i < S; ++i) tables.push_back(test::sequential_blocks(kMaxLen, bs, i * bps));
  std::vector<size_t> agree(size_t(S), 0);
  std::vector<float> logits(size_t(S) * size_t(V));  // [S, vocab]
  model::ForwardBatch b;
  b.clear(bps);
  for (int32_t i = 0; i < S; ++i) b.add_sequence(prompts[size_t(i)], 0, tables[size_t(i)], bs);
  for (size_t step = 0; step < golden[0].size(); ++step) {
    auto r = s.model->forward(b, s.cache, logits.data());
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return agree;
    b.clear(bps);
    for (int32_t i = 0; i < S; ++i) {
      const int32_t gold = golden[size_t(i)][step];
      agree[size_t(i)] += test::argmax(logits.data() + size_t(i) * size_t(V), V) == gold;
      const int32_t pos = int32_t(prompts[size_t(i)].size() + step);
      b.add_sequence(std::span<const int32_t>(&gold, 1), pos, tables[size_t(i)], bs);
    }
  }
  return agree;
}

size_t matching_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST(SmolLM2Fidelity, ExactPathLastLogitsAndGreedy) {
  Smol* s = smol(WeightPrecision::kExact);
  if (s == nullptr) GTEST_SKIP() << "real model absent: set PAGODA_MODEL or run tools/fetch-model";
  const SmolGolden g = load_smol_golden();
  ASSERT_EQ(g.vocab, s->model->config().vocab_size);
  BatchedRun run = run_batched_greedy(*s, g.ids, 32);
  for (size_t p = 0; p < g.ids.size(); ++p) {
    const float* ours = run.prefill_logits.data() + p * size_t(g.vocab);
    const double err = test::max_abs_error(ours, g.last.data() + p * size_t(g.vocab), size_t(g.vocab));
    std::printf("[exact] prompt %zu: max abs logit error %.3g, greedy match %zu/32\n", p, err,
                matching_prefix(run.generated[p], g.greedy[p]));
    EXPECT_LE(err, 1e-3) << "prompt " << p;
    EXPECT_EQ(test::argmax(ours, g.vocab), g.argmax[p]) << "prompt " << p;
    EXPECT_EQ(run.generated[p], g.greedy[p]) << "prompt " << p;
  }
}

TEST(SmolLM2Fidelity, QuantizedPathLastLogitsAndGreedy) {
  Smol* s = smol(WeightPrecision::kQuantized);
  if (s == nullptr) GTEST_SKIP() << "real model absent: set PAGODA_MODEL or run tools/fetch-model";
  const SmolGolden g = load_smol_golden();
  BatchedRun run = run_batched_greedy(*s, g.ids, 32);
  size_t total_match = 0;
  for (size_t p = 0; p < g.ids.size(); ++p) {
    const float* ours = run.prefill_logits.data() + p * size_t(g.vocab);
    const double err = test::max_abs_error(ours, g.last.data() + p * size_t(g.vocab), size_t(g.vocab));
    const size_t match = matching_prefix(run.generated[p], g.greedy[p]);
    total_match += match;
    const float* gold = g.last.data() + p * size_t(g.vocab);
    double sq = 0;
    for (int32_t j = 0; j < g.vocab; ++j) sq += (ours[j] - gold[j]) * double(ours[j] - gold[j]);
    std::vector<float> sorted(gold, gold + g.vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    const double gap = sorted[0] - sorted[1];
    const int32_t ours_top = test::argmax(ours, g.vocab);
    std::printf("[quantized] prompt %zu: max abs logit error %.3g (RMS %.3g), HF top-2 gap %.3g, "
                "argmax %s, greedy match %zu/32\n", p, err, std::sqrt(sq / g.vocab), gap,
                ours_top == g.argmax[p] ? "same" : "differs", match);
    EXPECT_LE(err, kQuantizedMaxAbs) << "prompt " << p;
    // Our top token is HF's wherever HF's margin exceeds twice the error; elsewhere
    // it is one HF ranks within that error of its top.
    if (gap > 2 * err) {
      EXPECT_EQ(ours_top, g.argmax[p]) << "prompt " << p;
    }
    EXPECT_GE(gold[ours_top], sorted[0] - 2 * err) << "prompt " << p;
  }
  std::printf("[quantized] greedy tokens matching HF: %zu of %zu\n", total_match, 32 * g.ids.size());
  EXPECT_GE(total_match, kQuantizedMinGreedyTotal);
  const std::vector<size_t> forced = teacher_forced_agreement(*s, g.ids, g.greedy);
  size_t forced_total = 0;
  for (size_t p = 0; p < forced.size(); ++p) {
    std::printf("[quantized] prompt %zu: teacher-forced argmax = HF's token at %zu/32\n", p, forced[p]);
    forced_total += forced[p];
  }
  std::printf("[quantized] teacher-forced agreement: %zu of %zu\n", forced_total, 32 * g.ids.size());
  EXPECT_GE(forced_total, kQuantizedMinTeacherForced);
}

TEST(SmolLM2Fidelity, SimpleGeneratorMatchesGreedyGolden) {
  Smol* s = smol(WeightPrecision::kExact);
  if (s == nullptr) GTEST_SKIP() << "real model absent: set PAGODA_MODEL or run tools/fetch-model";
  const SmolGolden g = load_smol_golden();
  model::SimpleGenerator gen(*s->model);
  model::GenerateOptions o;
  o.max_new_tokens = 32;
  o.ignore_eos = true;  // the goldens were made with eos_token_id=None
  for (size_t p : {size_t(0), size_t(4)}) {
    auto r = gen.generate(g.ids[p], o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->tokens, g.greedy[p]) << "prompt " << p;
    EXPECT_EQ(r->finish, model::FinishReason::kLength);
  }
}

// Not a check: the simple generator's speed on SmolLM2 (run with
// --gtest_also_run_disabled_tests). Prints prefill time and decode tokens/s
// per precision for a 1-thread and an all-threads CPU backend.
TEST(SmolLM2Fidelity, DISABLED_GeneratorSpeed) {
  const std::string path = test::real_model_path();
  if (path.empty()) GTEST_SKIP() << "real model absent";
  const SmolGolden g = load_smol_golden();
  for (size_t threads : {size_t(1), size_t(0)}) {
    for (WeightPrecision prec : {WeightPrecision::kQuantized, WeightPrecision::kExact}) {
      auto backend = test::cpu_backend(threads);
      model::LoadOptions o;
      o.precision = prec;
      o.max_model_len = 256;
      auto m = LlamaModel::load(path, *backend, o);
      ASSERT_TRUE(m.ok()) << m.error().message;
      model::SimpleGenerator gen(**m);
      model::GenerateOptions go;
      go.max_new_tokens = 64;
      go.ignore_eos = true;
      auto r = gen.generate(g.ids[2], go);
      ASSERT_TRUE(r.ok()) << r.error().message;
      std::printf("[speed] %s (%.0f MB of weights), %zu thread(s): prefill %d tokens + first "
                  "token %.3f s, decode %.2f tok/s\n", model::weight_precision_name(prec),
                  double((*m)->weight_bytes()) / 1e6,
                  threads == 0 ? size_t(std::thread::hardware_concurrency()) : threads,
                  r->prompt_tokens, r->prefill_seconds, r->decode_tokens_per_second());
    }
  }
}

// ---- tiny random models (fp32 safetensors) ------------------------------------

void check_tiny(const std::string& name) {
  const std::string dir = test::logits_data(name);
  {
    auto backend = test::cpu_backend();
    auto config = model::load_model_config(dir);
    ASSERT_TRUE(config.ok()) << config.error().message;
    if (std::string why = test::rope_config_problem(dir, *config); !why.empty()) GTEST_SKIP() << why;
  }
  const TinyErrors e = tiny_errors(name, dir, name);
  EXPECT_LE(e.rel, 1e-4);
}

TEST(TinyFidelity, LlamaLlama3RopeUntiedEveryPosition) { check_tiny("tiny-llama"); }
TEST(TinyFidelity, Qwen2BiasTiedEveryPosition) { check_tiny("tiny-qwen2"); }
// Qwen3: per-head q/k RMSNorm before RoPE, head_dim 32 != 96 / 6, tied, no bias.
TEST(TinyFidelity, Qwen3QkNormEveryPosition) {
  auto c = model::load_model_config(test::logits_data("tiny-qwen3"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->head_dim, 32);
  const TinyErrors e = tiny_errors("tiny-qwen3", test::logits_data("tiny-qwen3"), "tiny-qwen3 HF");
  EXPECT_LE(e.rel, 1e-4);
  EXPECT_LE(e.abs, 1e-3);
}
// Mistral-Nemo style: head_dim 32 != hidden 96 / 6 heads, untied.
TEST(TinyFidelity, MistralExplicitHeadDimEveryPosition) {
  const TinyErrors e =
      tiny_errors("tiny-mistral-hd", test::logits_data("tiny-mistral-hd"), "tiny-mistral-hd HF");
  EXPECT_LE(e.rel, 1e-4);
  EXPECT_LE(e.abs, 1e-3);
}

// Llama-3.2 style: llama3 rope scaling (factor 32), tied embeddings.
TEST(TinyFidelity, Llama32Llama3RopeTiedEveryPosition) {
  auto c = model::load_model_config(test::logits_data("tiny-llama32"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope_scaling.type, model::RopeScalingType::kLlama3);
  EXPECT_TRUE(c->tie_word_embeddings);
  const TinyErrors e = tiny_errors("tiny-llama32", test::logits_data("tiny-llama32"), "tiny-llama32 HF");
  EXPECT_LE(e.rel, 1e-4);
  EXPECT_LE(e.abs, 1e-3);
}

// Phi-3 / Phi-4-mini style: fused qkv_proj and gate_up_proj, partial rotary
// (12 of 16 dims), longrope with original context 16: the 1- and 7-token
// goldens use short_factor, the 19-token one long_factor at every position
// and all of them the attention factor sqrt(2) (model_config.hpp). Chunked
// prefill runs only the sequences within the original context: a longer one
// prefilled in chunks keeps its first chunks' short-factor keys, unlike HF's
// one forward over the whole sequence.
constexpr int32_t kPhi3OriginalContext = 16;

TEST(TinyFidelity, Phi3LongRopeFusedPartialRotaryEveryPosition) {
  auto c = model::load_model_config(test::logits_data("tiny-phi3"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "phi3");
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->rotary_dim, 12);
  ASSERT_EQ(c->rope_scaling.type, model::RopeScalingType::kLongRope);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, kPhi3OriginalContext);
  EXPECT_NEAR(c->rope_scaling.attention_factor, std::sqrt(2.0), 1e-12);  // factor 256 / 16
  EXPECT_EQ(c->rope_scaling.short_factor.size(), 6u);
  const TinyErrors e = tiny_errors("tiny-phi3", test::logits_data("tiny-phi3"), "tiny-phi3 HF",
                                   kPhi3OriginalContext);
  EXPECT_LE(e.rel, 1e-4);
  EXPECT_LE(e.abs, 1e-3);
}

// Sliding windows of the families other than Gemma, as transformers applies
// them (model/sliding_window_config.cpp): Mistral window 5 on every layer,
// Qwen3 window 4 on layers 1-2 only (use_sliding_window, max_window_layers 1),
// Phi-3 window 6 on every layer. Without the window the 19-token goldens move
// by 0.58 to 1.23 (tools/gen-arch-goldens.py checks that they move).
void check_windowed(const char* name, int32_t window, const std::vector<bool>& layers) {
  auto c = model::load_model_config(test::logits_data(name));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->sliding_window, window);
  EXPECT_EQ(c->sliding_layers, layers);
  const TinyErrors e = tiny_errors(name, test::logits_data(name), std::string(name) + " HF");
  EXPECT_LE(e.rel, 1e-4);
  EXPECT_LE(e.abs, 1e-3);
}
TEST(TinyFidelity, SlidingWindowMistralEveryLayer) { check_windowed("tiny-mistral-swa", 5, {true, true, true}); }
TEST(TinyFidelity, SlidingWindowQwen3FromMaxWindowLayers) {
  check_windowed("tiny-qwen3-swa", 4, {false, true, true});
}
TEST(TinyFidelity, SlidingWindowPhi3EveryLayer) { check_windowed("tiny-phi3-swa", 6, {true, true, true}); }

// ---- the same models as llama.cpp's convert_hf_to_gguf.py writes them ----------

// F32: the same numbers as the safetensors (measured max abs < 1e-6). F16:
// every matrix rounded to fp16 (relative 2^-11), measured max abs 6e-4..1.2e-3
// (bound 5e-3).
TEST(TinyFidelityGguf, Qwen3F32) { check_llama_cpp_gguf("tiny-qwen3", "f32", 1e-3); }
TEST(TinyFidelityGguf, Qwen3F16) { check_llama_cpp_gguf("tiny-qwen3", "f16", 5e-3); }
TEST(TinyFidelityGguf, MistralHeadDimF32) { check_llama_cpp_gguf("tiny-mistral-hd", "f32", 1e-3); }
// Llama 3.2: llama3 scaling as rope_freqs.weight (values checked against llama.cpp's).
TEST(TinyFidelityGguf, Llama32F32) { check_llama_cpp_gguf("tiny-llama32", "f32", 1e-3); }
TEST(TinyFidelityGguf, Llama32F16) { check_llama_cpp_gguf("tiny-llama32", "f16", 5e-3); }
TEST(TinyFidelityGguf, MistralHeadDimF16) { check_llama_cpp_gguf("tiny-mistral-hd", "f16", 5e-3); }
// Phi-3: attn_qkv / ffn_up (fused gate|up), rope.dimension_count 12,
// rope_factors_long/short.weight (values checked against llama.cpp's) and
// rope.scaling.attn_factor.
TEST(TinyFidelityGguf, Phi3F32) {
  check_llama_cpp_gguf("tiny-phi3", "f32", 1e-3, kPhi3OriginalContext);
}
TEST(TinyFidelityGguf, Phi3F16) {
  check_llama_cpp_gguf("tiny-phi3", "f16", 5e-3, kPhi3OriginalContext);
}
// The test writer's own phi3 metadata (tests/tiny_gguf_writer.hpp) reads back
// as the HF config does, and runs the same.
TEST(TinyFidelityGguf, Phi3OwnWriterMatchesHfConfig) {
  auto hf = model::load_model_config(test::logits_data("tiny-phi3"));
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  const std::string path = test::write_tiny_gguf(test::logits_data("tiny-phi3"), "tiny-phi3-own");
  auto g = model::load_model_config(path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->rotary_dim, hf->rotary_dim);
  EXPECT_EQ(g->rope_scaling.type, model::RopeScalingType::kLongRope);
  EXPECT_NEAR(g->rope_scaling.attention_factor, hf->rope_scaling.attention_factor, 1e-6);
  EXPECT_EQ(g->rope_scaling.original_max_position_embeddings, kPhi3OriginalContext);
  ASSERT_EQ(g->rope_scaling.long_factor.size(), hf->rope_scaling.long_factor.size());
  for (size_t i = 0; i < g->rope_scaling.long_factor.size(); ++i) {
    EXPECT_NEAR(g->rope_scaling.long_factor[i], hf->rope_scaling.long_factor[i], 1e-6);
    EXPECT_NEAR(g->rope_scaling.short_factor[i], hf->rope_scaling.short_factor[i], 1e-6);
  }
  const TinyErrors e = tiny_errors("tiny-phi3", path, "tiny-phi3 own GGUF", kPhi3OriginalContext);
  EXPECT_LE(e.abs, 1e-3);
}

}  // namespace
}  // namespace pagoda
