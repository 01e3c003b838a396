// LlamaModel and its pieces: the CPU backend's matmul wiring, the GGUF path
// (tiny HF models converted to GGUF here, compared with HF's logits), the
// quantized path's fused weights, loader and batch errors, and the simple
// generator. References are independent: HF goldens, double-precision sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gpu/quant_format.hpp"
#include "llama_test_util.hpp"
#include "model/simple_generator.hpp"
#include "tiny_gguf_writer.hpp"

namespace pagoda {
namespace {

using model::LlamaModel;
using model::WeightPrecision;

// ---- CpuBackend::matmul ----------------------------------------------------------

// y = x W^T + b with x rows `stride` apart, against a double reference on
// dequantized weights (the quantized path gets the int8-activation bound).
void check_matmul(gpu::WeightFormat fmt, double tol) {
  const int64_t M = 5, N = 40, K = 64, stride = 80;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> x(size_t(M * stride), std::numeric_limits<float>::quiet_NaN());
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) x[size_t(m * stride + k)] = nd(rng);  // gaps stay NaN
  }
  std::vector<float> wf(static_cast<size_t>(N * K)), bias(static_cast<size_t>(N));
  for (float& v : wf) v = nd(rng);
  for (float& v : bias) v = nd(rng);
  std::vector<uint8_t> wq = fmt == gpu::WeightFormat::Q8_0 ? test::quantize_q8_0(wf)
                                                           : test::f32_bytes(wf);
  std::vector<float> wd = gpu::dequantize(fmt, wq.data(), N * K);
  auto backend = test::cpu_backend(2);
  std::vector<float> y(size_t(M * N));
  gpu::MatmulParams p;
  p.x = x.data();
  p.x_stride = stride;
  p.weight = gpu::LinearWeight{fmt, N, K, wq.data()};
  p.bias = bias.data();
  p.y = y.data();
  p.m = M;
  ASSERT_TRUE(backend->matmul(p).ok());
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double ref = bias[size_t(n)];
      for (int64_t k = 0; k < K; ++k) ref += double(x[size_t(m * stride + k)]) * wd[size_t(n * K + k)];
      EXPECT_NEAR(y[size_t(m * N + n)], ref, tol) << format_name(fmt) << " m=" << m << " n=" << n;
    }
  }
}

TEST(CpuBackendMatmul, StridedRowsAndBiasF32) { check_matmul(gpu::WeightFormat::F32, 1e-4); }
TEST(CpuBackendMatmul, StridedRowsAndBiasQ8_0) { check_matmul(gpu::WeightFormat::Q8_0, 0.3); }

TEST(CpuBackendMatmul, RejectsF16AndShortStride) {
  auto backend = test::cpu_backend(1);
  std::vector<uint16_t> w(64, 0);
  std::vector<float> x(64), y(2);
  gpu::MatmulParams p;
  p.x = x.data();
  p.x_stride = 32;
  p.weight = gpu::LinearWeight{gpu::WeightFormat::F16, 2, 32, w.data()};
  p.y = y.data();
  p.m = 1;
  EXPECT_FALSE(backend->matmul(p).ok());
  p.weight.format = gpu::WeightFormat::F32;
  p.x_stride = 16;
  EXPECT_FALSE(backend->matmul(p).ok());
}

// ---- the GGUF path against HF --------------------------------------------------------

model::LoadOptions small_options(WeightPrecision precision) {
  model::LoadOptions o;
  o.precision = precision;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 4;
  o.max_logits_rows = 64;
  return o;
}

// Every position's logits of the golden sequences, as a [sum len, V] array.
std::vector<float> all_logits(LlamaModel& m, gpu::Backend& backend, const test::TinyGolden& g,
                              int32_t chunk) {
  auto cache = backend.create_kv_cache(m.kv_cache_spec(), 4);
  EXPECT_TRUE(cache.ok());
  std::vector<float> out;
  for (const auto& ids : g.ids) {
    auto l = test::run_sequence(m, *cache, ids, test::sequential_blocks(int32_t(ids.size()), 16),
                                chunk);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

std::vector<float> golden_rows(const test::TinyGolden& g) {
  std::vector<float> out;
  for (const auto& l : g.logits) out.insert(out.end(), l.begin(), l.end());
  return out;
}

void check_gguf_against_hf(const std::string& name) {
  const std::string path = test::write_tiny_gguf(test::logits_data(name), name + "-f32");
  auto backend = test::cpu_backend();
  auto m = LlamaModel::load(path, *backend, small_options(WeightPrecision::kExact));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->config().rope_interleaved, name == "tiny-llama");
  const test::TinyGolden g = test::load_tiny_golden(test::logits_data(name + ".json"));
  const std::vector<float> ref = golden_rows(g);
  for (int32_t chunk : {64, 5}) {
    std::vector<float> ours = all_logits(**m, *backend, g, chunk);
    const double rel = test::max_row_relative_error(ours.data(), ref.data(),
                                                    int64_t(ref.size()) / g.vocab, g.vocab);
    std::printf("[%s GGUF f32] chunk %d: max row-relative error vs HF %.3g\n", name.c_str(),
                chunk, rel);
    EXPECT_LE(rel, 1e-4);
  }
}

// Llama: permuted Q/K + interleaved rope, llama3 scaling as rope_freqs, untied.
TEST(LlamaGguf, TinyLlamaMatchesHf) { check_gguf_against_hf("tiny-llama"); }
// Qwen2: NeoX rope, theta 1e6, QKV biases, tied lm_head.
TEST(LlamaGguf, TinyQwen2MatchesHf) { check_gguf_against_hf("tiny-qwen2"); }

// Q8_0 weights (layer 1's attn_v kept F32, so that layer's QKV group mixes
// formats and falls back to fp32): the quantized path (int8 activations)
// against the exact path on the same file; the quantized path must keep the
// blocks (less memory) and stay within the activation-quantization error.
TEST(LlamaGguf, QuantizedPathKeepsBlocksAndTracksExact) {
  test::TinyGgufOptions opt;
  opt.q8_0 = true;
  opt.keep_f32 = {"blk.1.attn_v.weight"};
  const std::string path = test::write_tiny_gguf(test::logits_data("tiny-llama"), "tiny-q8", opt);
  auto backend = test::cpu_backend();
  auto exact = LlamaModel::load(path, *backend, small_options(WeightPrecision::kExact));
  auto quant = LlamaModel::load(path, *backend, small_options(WeightPrecision::kQuantized));
  ASSERT_TRUE(exact.ok()) << exact.error().message;
  ASSERT_TRUE(quant.ok()) << quant.error().message;
  std::printf("weights: exact %llu bytes, quantized %llu bytes\n",
              (unsigned long long)(*exact)->weight_bytes(), (unsigned long long)(*quant)->weight_bytes());
  EXPECT_LT((*quant)->weight_bytes(), (*exact)->weight_bytes() * 3 / 4);
  const test::TinyGolden g = test::load_tiny_golden(test::logits_data("tiny-llama.json"));
  std::vector<float> a = all_logits(**exact, *backend, g, 64);
  std::vector<float> b = all_logits(**quant, *backend, g, 7);
  const double rel = test::max_row_relative_error(b.data(), a.data(), int64_t(a.size()) / g.vocab,
                                                  g.vocab);
  std::printf("[tiny-llama Q8_0] quantized vs exact: max row-relative error %.3g\n", rel);
  EXPECT_LE(rel, 0.05);
  EXPECT_GT(rel, 0.0);  // the int8 path really ran
}

// ---- loader errors name the tensor ------------------------------------------------

void expect_load_error(const test::TinyGgufOptions& opt, const std::string& tensor,
                       const std::string& what) {
  const std::string path = test::write_tiny_gguf(test::logits_data("tiny-llama"), "broken", opt);
  auto backend = test::cpu_backend(1);
  auto m = LlamaModel::load(path, *backend, small_options(WeightPrecision::kQuantized));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find(tensor), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find(what), std::string::npos) << m.error().message;
}

TEST(LlamaWeights, MissingTensorIsNamed) {
  test::TinyGgufOptions o;
  o.drop = "blk.2.ffn_up.weight";
  expect_load_error(o, "blk.2.ffn_up.weight", "missing");
}

TEST(LlamaWeights, WrongShapeIsNamed) {
  test::TinyGgufOptions o;
  o.bad_shape = "blk.1.attn_k.weight";
  expect_load_error(o, "blk.1.attn_k.weight", "[31, 96], expected [32, 96]");
}

TEST(LlamaWeights, UnsupportedTypeIsNamed) {
  test::TinyGgufOptions o;
  o.bad_type = "blk.0.ffn_gate.weight";
  expect_load_error(o, "blk.0.ffn_gate.weight", "not supported");
}

// ---- batch validation ---------------------------------------------------------------

class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = test::cpu_backend().release();
    const std::string path =
        test::write_tiny_gguf(test::logits_data("tiny-llama"), "tiny-llama-batch");
    model::LoadOptions o = small_options(WeightPrecision::kExact);
    o.max_num_batched_tokens = 32;
    auto m = LlamaModel::load(path, *backend_, o);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete backend_;
  }

  gpu::KvCache make_cache(int32_t blocks, int32_t block_size = 16) {
    gpu::KvCacheSpec spec = model_->kv_cache_spec();
    spec.block_size = block_size;
    auto c = backend_->create_kv_cache(spec, blocks);
    EXPECT_TRUE(c.ok());
    return std::move(c).value();
  }
  static void fill(gpu::KvCache& c, float v) {
    for (int32_t l = 0; l < c.num_layers(); ++l) {
      for (void* p : {c.layer(l).k, c.layer(l).v}) {
        std::fill_n(static_cast<float*>(p), c.layout().layer_elements(), v);
      }
    }
  }
  static bool all_equal(const gpu::KvCache& c, float v) {
    for (int32_t l = 0; l < c.num_layers(); ++l) {
      for (void* p : {c.layer(l).k, c.layer(l).v}) {
        const float* f = static_cast<const float*>(p);
        for (int64_t i = 0; i < c.layout().layer_elements(); ++i) {
          if (f[i] != v) return false;
        }
      }
    }
    return true;
  }

  static gpu::Backend* backend_;
  static LlamaModel* model_;
};
gpu::Backend* TinyModel::backend_ = nullptr;
LlamaModel* TinyModel::model_ = nullptr;

TEST_F(TinyModel, RejectsBadBatchesBeforeWritingTheCache) {
  gpu::KvCache cache = make_cache(4);
  fill(cache, 7.0f);
  const std::vector<int32_t> ids = {5, 6, 7};
  const std::vector<int32_t> blocks = {2, 0};
  auto good = [&] {
    model::ForwardBatch b;
    b.clear(2);
    b.add_sequence(ids, 0, blocks, 16);
    return b;
  };
  std::vector<float> logits(size_t(model_->config().vocab_size) * 4);
  struct Case {
    const char* what;
    std::function<void(model::ForwardBatch&)> breaker;
  };
  const Case cases[] = {
      {"token_ids", [](model::ForwardBatch& b) { b.token_ids[1] = 517; }},
      {"slot_mapping", [](model::ForwardBatch& b) { b.slot_mapping[2] = 3; }},
      {"positions", [](model::ForwardBatch& b) { b.positions[0] = 1; }},
      {"block_tables", [](model::ForwardBatch& b) { b.block_tables[0] = 4; }},
      {"context_lens", [](model::ForwardBatch& b) { b.context_lens[0] = 2; }},
      {"logits_rows", [](model::ForwardBatch& b) { b.logits_rows[0] = 3; }},
      {"padding", [](model::ForwardBatch& b) {
         b.add_padding(1);
         b.slot_mapping.back() = 9;
       }},
      {"tokens", [](model::ForwardBatch& b) { b.add_padding(30); }},  // 33 > 32
  };
  for (const Case& c : cases) {
    model::ForwardBatch b = good();
    c.breaker(b);
    auto r = model_->forward(b, cache, logits.data());
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.error().message.find(c.what), std::string::npos) << r.error().message;
    EXPECT_TRUE(all_equal(cache, 7.0f)) << c.what << ": a rejected batch wrote the cache";
  }
  EXPECT_FALSE(model_->forward(good(), cache, nullptr).ok());  // logits asked, nowhere to go
  gpu::KvCache other = make_cache(8, 8);
  EXPECT_FALSE(model_->forward(good(), other, logits.data()).ok());  // another geometry
  EXPECT_TRUE(model_->forward(good(), cache, logits.data()).ok());
  EXPECT_FALSE(all_equal(cache, 7.0f));
}

// ---- the simple generator ---------------------------------------------------------------

TEST_F(TinyModel, GreedyGenerationEqualsArgmaxOfOneShotPrefill) {
  const std::vector<int32_t> prompt = {11, 400, 3, 77, 250, 9, 12, 500, 1, 42};
  model::SimpleGenerator gen(*model_);
  model::GenerateOptions o;
  o.max_new_tokens = 40;  // crosses blocks of 16 and a prefill chunk of 32
  auto r = gen.generate(prompt, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tokens.size(), 40u);
  EXPECT_EQ(r->finish, model::FinishReason::kLength);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), r->tokens.begin(), r->tokens.end() - 1);
  gpu::KvCache cache = make_cache(4);
  const int32_t V = model_->config().vocab_size;
  std::vector<float> logits = test::run_sequence(*model_, cache, all,
                                                 test::sequential_blocks(int32_t(all.size()), 16), 32);
  for (size_t i = 0; i < r->tokens.size(); ++i) {
    const float* row = logits.data() + (prompt.size() - 1 + i) * size_t(V);
    EXPECT_EQ(r->tokens[i], test::argmax(row, V)) << "token " << i;
    // Greedy logprob = log-softmax of the chosen logit.
    double sum = 0;
    const float mx = *std::max_element(row, row + V);
    for (int32_t j = 0; j < V; ++j) sum += std::exp(double(row[j]) - mx);
    EXPECT_NEAR(r->logprobs[i], -std::log(sum), 1e-4) << "token " << i;
  }
}

TEST_F(TinyModel, GenerationStopsOnStopTokenCallbackAndContext) {
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  model::SimpleGenerator gen(*model_);
  model::GenerateOptions o;
  o.max_new_tokens = 12;
  auto free_run = gen.generate(prompt, o);
  ASSERT_TRUE(free_run.ok());
  const int32_t stop = free_run->tokens[4];
  const size_t first = size_t(std::find(free_run->tokens.begin(), free_run->tokens.end(), stop) -
                              free_run->tokens.begin());
  o.stop_token_ids = {stop};
  auto stopped = gen.generate(prompt, o);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish, model::FinishReason::kStop);
  EXPECT_EQ(stopped->tokens.size(), first + 1);
  o.stop_token_ids.clear();
  int calls = 0;
  o.on_token = [&calls](int32_t) { return ++calls < 3; };
  auto cb = gen.generate(prompt, o);
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(cb->finish, model::FinishReason::kCallback);
  EXPECT_EQ(cb->tokens.size(), 3u);
  o.on_token = nullptr;
  o.max_new_tokens = 1000;  // more than max_model_len (the config's 256) allows
  auto full = gen.generate(prompt, o);
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(full->finish, model::FinishReason::kContextFull);
  EXPECT_EQ(full->tokens.size() + prompt.size(), size_t(model_->limits().max_model_len));
  EXPECT_FALSE(gen.generate(std::vector<int32_t>{}, o).ok());
  EXPECT_FALSE(gen.generate(std::vector<int32_t>{517}, o).ok());  // out of the vocabulary
}

TEST_F(TinyModel, SeededSamplingIsReproducible) {
  const std::vector<int32_t> prompt = {8, 16, 32, 64};
  model::SimpleGenerator gen(*model_);
  model::GenerateOptions o;
  o.max_new_tokens = 16;
  o.sampling.temperature = 1.0f;
  o.sampling.top_p = 0.9f;
  o.sampling.seed = 1234;
  auto a = gen.generate(prompt, o);
  auto b = gen.generate(prompt, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  o.sampling.seed = 99;
  auto c = gen.generate(prompt, o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->tokens, c->tokens);  // 16 draws from a flat random model: a collision is ~impossible
}

}  // namespace
}  // namespace pagoda
