// Paging proofs at the model level (tiny random Llama: 3 layers, GQA 6/2,
// llama3 rope scaling, loaded from a GGUF converted here): where a
// sequence's KV lives must not change its logits.
//  - contiguous vs shuffled physical blocks: bitwise identical logits, for
//    lengths 1, BS-1, BS, BS+1, 97 and 1000 and block sizes 8, 16, 32 (chunked
//    prefill of 64 tokens), and equal to a dense double-precision reference;
//  - NaN in every unused slot and block, padded block-table entries that
//    point at NaN blocks and padding rows: nothing leaks, bitwise;
//  - a mixed batch (decodes, a later chunk of a long prompt, a fresh prefill,
//    padding) equals each sequence run alone; decode step by step equals
//    one-shot prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "llama_test_util.hpp"
#include "tiny_gguf_writer.hpp"

namespace pagoda {
namespace {

using model::ForwardBatch;
using model::LlamaModel;

constexpr int32_t kChunk = 64;
constexpr int32_t kMaxLen = 1024;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- a dense reference forward in double, from the HF safetensors ----------------

class DenseReference {
 public:
  explicit DenseReference(const std::string& dir) {
    simdjson::dom::parser parser;
    simdjson::dom::element c = parser.load(dir + "/config.json");
    H_ = int64_t(c["hidden_size"]);
    heads_ = int64_t(c["num_attention_heads"]);
    kv_heads_ = int64_t(c["num_key_value_heads"]);
    D_ = H_ / heads_;
    I_ = int64_t(c["intermediate_size"]);
    V_ = int64_t(c["vocab_size"]);
    layers_ = int64_t(c["num_hidden_layers"]);
    eps_ = double(c["rms_norm_eps"]);
    simdjson::dom::element r = c["rope_parameters"];
    // HF's llama3 inv_freq (float32 like HF), from the rope_parameters.
    const double theta = double(r["rope_theta"]), factor = double(r["factor"]);
    const double low = double(r["low_freq_factor"]), high = double(r["high_freq_factor"]);
    const double orig = double(int64_t(r["original_max_position_embeddings"]));
    for (int64_t i = 0; i < D_ / 2; ++i) {
      const double f = 1.0 / std::pow(theta, 2.0 * double(i) / double(D_));
      const double wavelen = 2 * M_PI / f;
      double g = f;
      if (wavelen > orig / low) {
        g = f / factor;
      } else if (wavelen >= orig / high) {
        const double s = (orig / wavelen - low) / (high - low);
        g = (1 - s) * f / factor + s * f;
      }
      inv_freq_.push_back(double(float(g)));
    }
    auto st = model::SafetensorsModel::open(dir);
    for (const model::StTensor* t : st->tensors()) {
      std::vector<float> v = model::to_float(*t);
      w_[t->name] = std::vector<double>(v.begin(), v.end());
    }
  }

  // Logits of every position of ids: [len, V].
  std::vector<float> run(const std::vector<int32_t>& ids) const {
    const int64_t L = int64_t(ids.size());
    std::vector<std::vector<double>> keys(static_cast<size_t>(layers_)), vals(static_cast<size_t>(layers_));
    std::vector<float> logits;
    for (int64_t t = 0; t < L; ++t) {
      const double* e = &w("model.embed_tokens.weight")[size_t(ids[size_t(t)] * H_)];
      std::vector<double> x(e, e + H_);
      for (int64_t l = 0; l < layers_; ++l) layer(l, t, x, keys[size_t(l)], vals[size_t(l)]);
      std::vector<double> h = norm(x, w("model.norm.weight"));
      std::vector<double> y = matvec(w("lm_head.weight"), h, V_);
      logits.insert(logits.end(), y.begin(), y.end());
    }
    return logits;
  }

 private:
  const std::vector<double>& w(const std::string& n) const { return w_.at(n); }
  std::string lw(int64_t l, const std::string& n) const {
    return "model.layers." + std::to_string(l) + "." + n + ".weight";
  }
  std::vector<double> norm(const std::vector<double>& x, const std::vector<double>& g) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / double(x.size()) + eps_);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * r * g[i];
    return out;
  }
  static std::vector<double> matvec(const std::vector<double>& W, const std::vector<double>& x,
                                    int64_t n) {
    std::vector<double> y(size_t(n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < x.size(); ++k) y[size_t(i)] += W[size_t(i) * x.size() + k] * x[k];
    }
    return y;
  }
  void rope(std::vector<double>& v, int64_t nh, int64_t pos) const {  // NeoX pairs (i, i + D/2)
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t i = 0; i < D_ / 2; ++i) {
        const double a = v[size_t(h * D_ + i)], b = v[size_t(h * D_ + i + D_ / 2)];
        const double th = double(pos) * inv_freq_[size_t(i)];
        v[size_t(h * D_ + i)] = a * std::cos(th) - b * std::sin(th);
        v[size_t(h * D_ + i + D_ / 2)] = b * std::cos(th) + a * std::sin(th);
      }
    }
  }
  void layer(int64_t l, int64_t t, std::vector<double>& x, std::vector<double>& keys,
             std::vector<double>& vals) const {
    std::vector<double> h = norm(x, w(lw(l, "input_layernorm")));
    std::vector<double> q = matvec(w(lw(l, "self_attn.q_proj")), h, heads_ * D_);
    std::vector<double> k = matvec(w(lw(l, "self_attn.k_proj")), h, kv_heads_ * D_);
    std::vector<double> v = matvec(w(lw(l, "self_attn.v_proj")), h, kv_heads_ * D_);
    rope(q, heads_, t);
    rope(k, kv_heads_, t);
    keys.insert(keys.end(), k.begin(), k.end());
    vals.insert(vals.end(), v.begin(), v.end());
    std::vector<double> attn(size_t(heads_ * D_), 0.0);
    const int64_t kvw = kv_heads_ * D_, group = heads_ / kv_heads_;
    for (int64_t hq = 0; hq < heads_; ++hq) {
      const int64_t hk = hq / group;
      std::vector<double> s(size_t(t + 1));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= t; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D_; ++i) d += q[size_t(hq * D_ + i)] * keys[size_t(j * kvw + hk * D_ + i)];
        s[size_t(j)] = d / std::sqrt(double(D_));
        mx = std::max(mx, s[size_t(j)]);
      }
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t j = 0; j <= t; ++j) {
        for (int64_t i = 0; i < D_; ++i) {
          attn[size_t(hq * D_ + i)] += s[size_t(j)] / sum * vals[size_t(j * kvw + hk * D_ + i)];
        }
      }
    }
    std::vector<double> o = matvec(w(lw(l, "self_attn.o_proj")), attn, H_);
    for (int64_t i = 0; i < H_; ++i) x[size_t(i)] += o[size_t(i)];
    h = norm(x, w(lw(l, "post_attention_layernorm")));
    std::vector<double> g = matvec(w(lw(l, "mlp.gate_proj")), h, I_);
    std::vector<double> u = matvec(w(lw(l, "mlp.up_proj")), h, I_);
    for (int64_t i = 0; i < I_; ++i) g[size_t(i)] = g[size_t(i)] / (1 + std::exp(-g[size_t(i)])) * u[size_t(i)];
    std::vector<double> d = matvec(w(lw(l, "mlp.down_proj")), g, H_);
    for (int64_t i = 0; i < H_; ++i) x[size_t(i)] += d[size_t(i)];
  }

  int64_t H_, heads_, kv_heads_, D_, I_, V_, layers_;
  double eps_;
  std::vector<double> inv_freq_;
  std::map<std::string, std::vector<double>> w_;
};

// ---- fixture: the tiny Llama per block size, one random 1000-token stream -----------

std::vector<int32_t> token_stream() {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int32_t> tok(0, 516);
  std::vector<int32_t> ids(1000);
  for (int32_t& t : ids) t = tok(rng);
  return ids;
}

const std::vector<float>& reference_logits() {  // [1000, V], computed once
  static const std::vector<float> ref =
      DenseReference(test::logits_data("tiny-llama")).run(token_stream());
  return ref;
}

struct Tiny {
  std::unique_ptr<gpu::Backend> backend = test::cpu_backend();
  std::unique_ptr<LlamaModel> model;
};

Tiny& tiny(int32_t block_size) {
  static std::map<int32_t, std::unique_ptr<Tiny>> models;
  auto& t = models[block_size];
  if (t) return *t;
  t = std::make_unique<Tiny>();
  static const std::string path =
      test::write_tiny_gguf(test::logits_data("tiny-llama"), "tiny-llama-paging");
  model::LoadOptions o;
  o.precision = model::WeightPrecision::kExact;
  o.max_num_batched_tokens = kChunk;
  o.max_num_seqs = 8;
  o.max_logits_rows = kChunk;
  o.max_model_len = kMaxLen;
  o.allow_long_max_model_len = true;  // the tiny config says 256
  o.block_size = block_size;
  auto m = LlamaModel::load(path, *t->backend, o);
  EXPECT_TRUE(m.ok()) << m.error().message;
  t->model = std::move(m).value();
  return *t;
}

gpu::KvCache make_cache(Tiny& t, int32_t blocks, float fill) {
  auto c = t.backend->create_kv_cache(t.model->kv_cache_spec(), blocks);
  EXPECT_TRUE(c.ok());
  for (int32_t l = 0; l < c->num_layers(); ++l) {
    for (void* p : {c->layer(l).k, c->layer(l).v}) {
      std::fill_n(static_cast<float*>(p), c->layout().layer_elements(), fill);
    }
  }
  return std::move(c).value();
}

// `count` distinct blocks of [0, pool) in random order.
std::vector<int32_t> shuffled_blocks(int32_t count, int32_t pool, uint32_t seed) {
  std::vector<int32_t> all(static_cast<size_t>(pool));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  all.resize(size_t(count));
  return all;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

// ---- contiguous vs shuffled blocks, against the dense reference ---------------------

class PagingByBlockSize : public ::testing::TestWithParam<int32_t> {};

TEST_P(PagingByBlockSize, ShuffledBlocksGiveIdenticalLogitsAndMatchDenseReference) {
  const int32_t bs = GetParam();
  Tiny& t = tiny(bs);
  ASSERT_TRUE(t.model);
  const std::vector<int32_t> stream = token_stream();
  const int32_t V = t.model->config().vocab_size;
  for (int32_t len : {1, bs - 1, bs, bs + 1, 97, 1000}) {
    const std::vector<int32_t> ids(stream.begin(), stream.begin() + len);
    const int32_t need = (len + bs - 1) / bs, pool = 2 * need + 3;
    gpu::KvCache c1 = make_cache(t, pool, kNaN);
    std::vector<float> a = test::run_sequence(*t.model, c1, ids, test::sequential_blocks(len, bs), kChunk);
    gpu::KvCache c2 = make_cache(t, pool, kNaN);
    std::vector<float> b = test::run_sequence(*t.model, c2, ids,
                                              shuffled_blocks(need, pool, uint32_t(len)), kChunk);
    EXPECT_TRUE(bitwise_equal(a, b)) << "len " << len;
    EXPECT_TRUE(all_finite(a)) << "len " << len;
    const double rel = test::max_row_relative_error(a.data(), reference_logits().data(), len, V);
    std::printf("[block %d] len %d: shuffled == contiguous %s; max row-relative error vs dense "
                "double reference %.3g\n", bs, len, bitwise_equal(a, b) ? "bitwise" : "NO", rel);
    EXPECT_LE(rel, 1e-4) << "len " << len;
  }
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, PagingByBlockSize, ::testing::Values(8, 16, 32));

// ---- poison: unused slots, padded table entries, padding rows --------------------------

// Prefill 37 tokens then 3 decodes, every batch with 5 padding rows and a
// block table 6 wide whose unused entries name `pad_block`.
std::vector<float> padded_run(Tiny& t, gpu::KvCache& cache, int32_t pad_block) {
  const int32_t V = t.model->config().vocab_size, bs = 16;
  const std::vector<int32_t> stream = token_stream();
  const std::vector<int32_t> blocks = {3, 1, 4};  // 48 slots: 37 + 3 used
  std::vector<float> out, logits(size_t(kChunk) * size_t(V));
  ForwardBatch b;
  for (int32_t step = 0; step < 4; ++step) {
    const int32_t begin = step == 0 ? 0 : 36 + step, n = step == 0 ? 37 : 1;
    b.clear(6);
    b.add_sequence(std::span<const int32_t>(stream.data() + begin, size_t(n)), begin, blocks, bs,
                   true, true, pad_block);
    b.add_padding(5);
    EXPECT_TRUE(t.model->forward(b, cache, logits.data()).ok());
    out.insert(out.end(), logits.begin(), logits.begin() + ptrdiff_t(n) * V);
  }
  return out;
}

TEST(PagingPoison, NaNInUnusedSlotsBlocksAndPaddingNeverLeaks) {
  Tiny& t = tiny(16);
  gpu::KvCache clean = make_cache(t, 8, 0.0f);
  std::vector<float> a = padded_run(t, clean, 0);
  gpu::KvCache poisoned = make_cache(t, 8, kNaN);
  std::vector<float> b = padded_run(t, poisoned, 6);  // block 6 is never written: all NaN
  EXPECT_TRUE(all_finite(b));
  EXPECT_TRUE(bitwise_equal(a, b));
  const int32_t V = t.model->config().vocab_size;
  const double rel = test::max_row_relative_error(b.data(), reference_logits().data(), 40, V);
  EXPECT_LE(rel, 1e-4);
}

// ---- a mixed batch equals each sequence alone ---------------------------------------------

// A sequence of the mixed batch: its tokens (a slice of the stream), blocks,
// tokens already cached before the step and tokens added by the step.
struct Seq {
  int32_t offset;  // into the token stream
  int32_t cached, fresh;
  std::vector<int32_t> blocks;
};

void add(ForwardBatch& b, const std::vector<int32_t>& stream, const Seq& s, int32_t from, int32_t n) {
  b.add_sequence(std::span<const int32_t>(stream.data() + s.offset + from, size_t(n)), from,
                 s.blocks, 16, true, true);
}

// Fills the cache with each sequence's first `cached` tokens (alone, in chunks).
void prime(Tiny& t, gpu::KvCache& cache, const std::vector<Seq>& seqs) {
  const std::vector<int32_t> stream = token_stream();
  std::vector<float> sink(size_t(kChunk) * size_t(t.model->config().vocab_size));
  for (const Seq& s : seqs) {
    for (int32_t pos = 0; pos < s.cached; pos += kChunk) {
      ForwardBatch b;
      b.clear(40);
      add(b, stream, s, pos, std::min(kChunk, s.cached - pos));
      ASSERT_TRUE(t.model->forward(b, cache, sink.data()).ok());
    }
  }
}

TEST(PagingBatch, MixedBatchEqualsEachSequenceAlone) {
  Tiny& t = tiny(16);
  const int32_t V = t.model->config().vocab_size;
  const std::vector<int32_t> stream = token_stream();
  std::vector<int32_t> pool = shuffled_blocks(80, 80, 7);
  auto take = [&pool](int32_t n) {
    std::vector<int32_t> b(pool.end() - n, pool.end());
    pool.resize(pool.size() - size_t(n));
    return b;
  };
  const std::vector<Seq> seqs = {
      {0, 40, 1, take(3)},      // decode after a 40-token prompt
      {100, 128, 32, take(19)},  // a later chunk (tokens 128..159) of a long prompt
      {500, 0, 17, take(2)},     // a fresh 17-token prefill
      {700, 1, 1, take(1)},      // decode at context 1
  };
  gpu::KvCache mixed_cache = make_cache(t, 80, kNaN), alone_cache = make_cache(t, 80, kNaN);
  prime(t, mixed_cache, seqs);
  prime(t, alone_cache, seqs);
  ForwardBatch mixed;
  mixed.clear(40);
  for (const Seq& s : seqs) add(mixed, stream, s, s.cached, s.fresh);
  mixed.add_padding(3);
  std::vector<float> together(size_t(kChunk) * size_t(V));
  ASSERT_TRUE(t.model->forward(mixed, mixed_cache, together.data()).ok());
  int32_t row = 0;
  double worst = 0;
  bool bitwise = true;
  for (const Seq& s : seqs) {
    ForwardBatch b;
    b.clear(40);
    add(b, stream, s, s.cached, s.fresh);
    std::vector<float> alone(size_t(s.fresh) * size_t(V));
    ASSERT_TRUE(t.model->forward(b, alone_cache, alone.data()).ok());
    const float* mine = together.data() + size_t(row) * size_t(V);
    worst = std::max(worst, test::max_row_relative_error(mine, alone.data(), s.fresh, V));
    bitwise = bitwise && std::memcmp(mine, alone.data(), alone.size() * sizeof(float)) == 0;
    // And both agree with the dense reference of that sequence's tokens.
    const std::vector<int32_t> ids(stream.begin() + s.offset,
                                   stream.begin() + s.offset + s.cached + s.fresh);
    const std::vector<float> ref = DenseReference(test::logits_data("tiny-llama")).run(ids);
    EXPECT_LE(test::max_row_relative_error(mine, ref.data() + size_t(s.cached) * size_t(V),
                                           s.fresh, V), 1e-4);
    row += s.fresh;
  }
  std::printf("mixed batch vs alone: max row-relative difference %.3g (%s)\n", worst,
              bitwise ? "bitwise equal" : "not bitwise: GEMM kernels depend on M");
  EXPECT_LE(worst, 1e-5);
}

TEST(PagingBatch, DecodeStepByStepEqualsOneShotPrefill) {
  Tiny& t = tiny(16);
  const int32_t V = t.model->config().vocab_size, len = 50;
  const std::vector<int32_t> stream = token_stream();
  const std::vector<int32_t> ids(stream.begin(), stream.begin() + len);
  const std::vector<int32_t> blocks = shuffled_blocks(4, 10, 3);
  gpu::KvCache c1 = make_cache(t, 10, kNaN);
  std::vector<float> one_shot = test::run_sequence(*t.model, c1, ids, blocks, kChunk);
  gpu::KvCache c2 = make_cache(t, 10, kNaN);
  std::vector<float> stepwise = test::run_sequence(*t.model, c2, ids, blocks, 1);
  const double rel = test::max_row_relative_error(stepwise.data(), one_shot.data(), len, V);
  std::printf("decode step by step vs one-shot prefill: max row-relative difference %.3g\n", rel);
  EXPECT_LE(rel, 1e-5);
}

}  // namespace
}  // namespace pagoda
