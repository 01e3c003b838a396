#include "model/dummy_weights.hpp"

#include "model/architecture.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/quant_format.hpp"

namespace pagoda::model {

using gpu::LinearWeight;
using gpu::WeightFormat;

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// splitmix64's finaliser: a bijective 64-bit mix.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The random bits of element i of tensor t: a counter-based stream.
struct Stream {
  uint64_t key;
  Stream(uint64_t seed, uint64_t tensor) : key(mix(seed + kGolden) ^ mix(tensor * kGolden + 1)) {}
  uint64_t at(uint64_t i) const { return mix(key + (i + 1) * kGolden); }
};

// Uniform in [-1, 1) from the top 24 bits, rounded to bf16.
float unit_bf16(uint64_t r) {
  const float u = float(int32_t(r >> 40) - (1 << 23)) * 0x1p-23f;
  return gpu::bf16_to_fp32(gpu::fp32_to_bf16(u));
}

// Runs f(begin, end) over [0, n) on up to 16 threads (one for small n).
template <class F>
void parallel_for(int64_t n, F f) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = n < (int64_t(1) << 18) ? 1 : std::min<int64_t>(std::min(hw, 16u), n);
  if (threads == 1) {
    f(int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back([=] { f(b, e); });
  }
  for (std::thread& th : pool) th.join();
}

// Tensor ids of the hash: 16 per layer after the global ones.
enum Tensor : uint64_t { kEmbed = 1, kFinalNorm = 2, kHead = 3, kLayerBase = 16 };
enum LayerTensor : uint64_t {
  kAttnNorm, kQkv, kO, kFfnNorm, kGateUp, kDown, kQ, kK, kV, kQNorm, kKNorm, kPostAttnNorm, kPostFfnNorm,
  kRouter
};
constexpr uint64_t kBiasOf = uint64_t(1) << 48;  // a bias's tensor id: its weight's | kBiasOf
uint64_t layer_tensor(int32_t layer, LayerTensor t) {
  return kLayerBase + uint64_t(layer) * 16 + uint64_t(t);
}
// MoE experts: their own id space, 2 tensors (gate|up, down) per expert.
uint64_t expert_tensor(int32_t layer, int32_t expert, int32_t which) {
  return (uint64_t(1) << 40) + (uint64_t(layer) << 20) + uint64_t(expert) * 2 + uint64_t(which);
}

// Host storage of one generated linear weight in `format`.
struct HostWeight {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> blocks;
  LinearWeight view;
};

void fill_blocks(const Stream& s, WeightFormat f, int64_t n_blocks, float amp, uint8_t* out) {
  const bool q8 = f == WeightFormat::Q8_0;
  const uint16_t d = gpu::fp32_to_fp16(q8 ? amp / 127.0f : amp / 8.0f);
  parallel_for(n_blocks, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (q8) {
        gpu::BlockQ8_0 blk{d, {}};
        for (int j = 0; j < 32; j += 8) {
          const uint64_t r = s.at(uint64_t(i) * 4 + uint64_t(j / 8));
          for (int k = 0; k < 8; ++k) {
            const int8_t q = int8_t(uint8_t(r >> (8 * k)));
            blk.qs[j + k] = q == -128 ? int8_t(-127) : q;
          }
        }
        std::memcpy(out + i * sizeof blk, &blk, sizeof blk);
      } else {
        gpu::BlockQ4_0 blk{d, {}};
        const uint64_t r0 = s.at(uint64_t(i) * 2), r1 = s.at(uint64_t(i) * 2 + 1);
        std::memcpy(blk.qs, &r0, 8);
        std::memcpy(blk.qs + 8, &r1, 8);
        std::memcpy(out + i * sizeof blk, &blk, sizeof blk);
      }
    }
  });
}

HostWeight make_host_weight(uint64_t seed, uint64_t tensor, int64_t n, int64_t k, float amp,
                            WeightFormat format) {
  HostWeight h;
  const Stream s(seed, tensor);
  const int64_t count = n * k;
  if (gpu::is_block_quantized(format)) {
    h.blocks.resize(size_t(gpu::storage_bytes(format, count)));
    fill_blocks(s, format, count / 32, amp, h.blocks.data());
    h.view = LinearWeight{format, n, k, h.blocks.data()};
  } else if (format == WeightFormat::BF16) {
    h.bf16.resize(size_t(count));
    parallel_for(count, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) h.bf16[i] = gpu::fp32_to_bf16(unit_bf16(s.at(i)) * amp);
    });
    h.view = LinearWeight{format, n, k, h.bf16.data()};
  } else {
    h.f32.resize(size_t(count));
    dummy_uniform(seed, tensor, 0, amp, h.f32);
    h.view = LinearWeight{WeightFormat::F32, n, k, h.f32.data()};
  }
  return h;
}

class DummyMaker {
 public:
  DummyMaker(gpu::Backend& backend, const WeightLoadOptions& o, WeightFormat format,
             LlamaWeights& out)
      : backend_(backend), opts_(o), format_(format), out_(out) {}

  Result<gpu::DeviceBuffer> floats(const std::vector<float>& v, const std::string& what) {
    auto buf = backend_.allocate(v.size() * sizeof(float));
    if (!buf) return make_error("dummy " + what + ": " + buf.error().message);
    if (auto up = backend_.upload(*buf, 0, v.data(), v.size() * sizeof(float)); !up) {
      return make_error("dummy " + what + ": " + up.error().message);
    }
    out_.device_bytes += buf->size();
    return buf;
  }

  // A norm weight [n]: 1 + uniform ±0.1.
  Result<gpu::DeviceBuffer> norm(uint64_t tensor, int64_t n, const std::string& what) {
    std::vector<float> v(static_cast<size_t>(n));
    dummy_uniform(opts_.dummy_seed, tensor, 0, 0.1f, v);
    for (float& x : v) x = gpu::bf16_to_fp32(gpu::fp32_to_bf16(1.0f + x));
    return floats(v, what);
  }

  Result<DeviceLinear> linear(uint64_t tensor, int64_t n, int64_t k, float gain, bool bias,
                              const std::string& what) {
    const float amp = gain * std::sqrt(3.0f / float(k));
    HostWeight h = make_host_weight(opts_.dummy_seed, tensor, n, k, amp, format_);
    std::vector<float> b;
    if (bias) {
      b.resize(size_t(n));
      dummy_uniform(opts_.dummy_seed, tensor | kBiasOf, 0, 0.1f, b);
    }
    auto d = upload_linear_weight(backend_, HostLinear{h.view, bias ? b.data() : nullptr, false},
                                  opts_.precision);
    if (!d) return make_error("dummy " + what + ": " + d.error().message);
    out_.device_bytes += d->storage.size() + d->bias.size();
    return d;
  }

 private:
  gpu::Backend& backend_;
  const WeightLoadOptions& opts_;
  WeightFormat format_;
  LlamaWeights& out_;
};

Result<LlamaLayerWeights> make_layer(DummyMaker& m, const ModelConfig& c, int32_t l) {
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_rows = int64_t(c.num_heads) * D, kv_rows = int64_t(c.num_kv_heads) * D;
  const std::string name = "layer " + std::to_string(l);
  LlamaLayerWeights w;
  auto an = m.norm(layer_tensor(l, kAttnNorm), H, name + " attn_norm");
  if (!an) return an.error();
  w.attn_norm = std::move(an).value();
  if (c.qk_norm) {  // three projections and the per-head norms (LlamaLayerWeights)
    const std::pair<LayerTensor, int64_t> parts[] = {{kQ, q_rows}, {kK, kv_rows}, {kV, kv_rows}};
    DeviceLinear* outs[] = {&w.q, &w.k, &w.v};
    for (size_t i = 0; i < 3; ++i) {
      auto lin = m.linear(layer_tensor(l, parts[i].first), parts[i].second, H, 1.0f,
                          c.attention_bias, name + " q/k/v");
      if (!lin) return lin.error();
      *outs[i] = std::move(lin).value();
    }
    auto qn = m.norm(layer_tensor(l, kQNorm), D, name + " q_norm");
    if (!qn) return qn.error();
    w.q_norm = std::move(qn).value();
    auto kn = m.norm(layer_tensor(l, kKNorm), D, name + " k_norm");
    if (!kn) return kn.error();
    w.k_norm = std::move(kn).value();
  } else {
    auto qkv = m.linear(layer_tensor(l, kQkv), q_rows + 2 * kv_rows, H, 1.0f, c.attention_bias,
                        name + " qkv");
    if (!qkv) return qkv.error();
    w.qkv = std::move(qkv).value();
  }
  const Architecture* arch = find_architecture(c.architecture);
  const bool o_bias = c.attention_bias && arch != nullptr && arch->o_bias_with_attention_bias;
  auto o = m.linear(layer_tensor(l, kO), H, q_rows, 1.0f, o_bias, name + " o");
  if (!o) return o.error();
  w.o = std::move(o).value();
  auto fn = m.norm(layer_tensor(l, kFfnNorm), H, name + " ffn_norm");
  if (!fn) return fn.error();
  w.ffn_norm = std::move(fn).value();
  if (arch != nullptr && arch->post_norms) {  // Gemma's post-attention and post-MLP norms
    auto pa = m.norm(layer_tensor(l, kPostAttnNorm), H, name + " post_attn_norm");
    if (!pa) return pa.error();
    w.post_attn_norm = std::move(pa).value();
    auto pf = m.norm(layer_tensor(l, kPostFfnNorm), H, name + " post_ffn_norm");
    if (!pf) return pf.error();
    w.post_ffn_norm = std::move(pf).value();
  }
  if (c.num_experts > 0) {  // MoE: the router and every expert's gate|up and down
    auto router = m.linear(layer_tensor(l, kRouter), c.num_experts, H, 1.0f, false, name + " router");
    if (!router) return router.error();
    w.router = std::move(router).value();
    const int64_t Ie = c.expert_intermediate_size;
    for (int32_t e = 0; e < c.num_experts; ++e) {
      MoeExpertWeights x;
      auto egu = m.linear(expert_tensor(l, e, 0), 2 * Ie, H, 1.0f, false, name + " expert gate_up");
      if (!egu) return egu.error();
      x.gate_up = std::move(egu).value();
      auto edown = m.linear(expert_tensor(l, e, 1), H, Ie, 1.0f, false, name + " expert down");
      if (!edown) return edown.error();
      x.down = std::move(edown).value();
      w.experts.push_back(std::move(x));
    }
    return w;
  }
  auto gu = m.linear(layer_tensor(l, kGateUp), 2 * I, H, 1.0f, false, name + " gate_up");
  if (!gu) return gu.error();
  w.gate_up = std::move(gu).value();
  auto down = m.linear(layer_tensor(l, kDown), H, I, 1.0f, false, name + " down");
  if (!down) return down.error();
  w.down = std::move(down).value();
  return w;
}

// The stored format of the linear weights for this backend and dtype.
Result<WeightFormat> linear_format(const gpu::Backend& backend, const WeightLoadOptions& o,
                                   const ModelConfig& c) {
  const bool cuda = backend.kind() == gpu::BackendKind::kCuda;
  switch (o.dummy_dtype) {
    case DummyDtype::kAuto: return cuda ? WeightFormat::BF16 : WeightFormat::F32;
    case DummyDtype::kBf16: return WeightFormat::BF16;
    case DummyDtype::kF32: return WeightFormat::F32;
    case DummyDtype::kQ8_0:
    case DummyDtype::kQ4_0: break;
  }
  if (!cuda && o.precision == WeightPrecision::kExact) {
    return make_error("--dummy-dtype " + std::string(dummy_dtype_name(o.dummy_dtype)) +
                      " needs the quantized precision (exact would dequantize every weight "
                      "to fp32)");
  }
  if (c.hidden_size % 32 != 0 || c.intermediate_size % 32 != 0 ||
      (int64_t(c.num_heads) * c.head_dim) % 32 != 0) {
    return make_error("--dummy-dtype " + std::string(dummy_dtype_name(o.dummy_dtype)) +
                      ": hidden, intermediate and attention widths must be multiples of 32");
  }
  return o.dummy_dtype == DummyDtype::kQ8_0 ? WeightFormat::Q8_0 : WeightFormat::Q4_0;
}

// The fp32 token embedding and lm_head (tied: the embedding values).
Result<void> make_embedding_and_head(DummyMaker& m, gpu::Backend& backend,
                                     const WeightLoadOptions& o, LlamaWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t V = c.vocab_size, H = c.hidden_size;
  std::vector<float> table(size_t(V * H));  // [V, H]
  dummy_uniform(o.dummy_seed, kEmbed, 0, 1.0f, table);
  auto emb = m.floats(table, "token embedding");
  if (!emb) return emb.error();
  w.embedding = std::move(emb).value();
  if (!c.tie_word_embeddings) {
    auto head = m.linear(kHead, V, H, 4.0f, false, "lm_head");
    if (!head) return head.error();
    w.lm_head = std::move(head).value();
    return {};
  }
  if (backend.host_accessible()) {  // the table itself, as the file loader does
    w.lm_head.weight = LinearWeight{WeightFormat::F32, V, H, w.embedding.data()};
    return {};
  }
  auto head = upload_linear_weight(backend, HostLinear{LinearWeight{WeightFormat::F32, V, H,
                                                                    table.data()},
                                                       nullptr, false},
                                   o.precision);
  if (!head) return make_error("dummy tied lm_head: " + head.error().message);
  w.device_bytes += head->storage.size();
  w.lm_head = std::move(head).value();
  return {};
}

}  // namespace

void dummy_uniform(uint64_t seed, uint64_t tensor, uint64_t offset, float amplitude,
                   std::span<float> out) {
  const Stream s(seed, tensor);
  parallel_for(int64_t(out.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      out[size_t(i)] = gpu::bf16_to_fp32(
          gpu::fp32_to_bf16(unit_bf16(s.at(offset + uint64_t(i))) * amplitude));
    }
  });
}

Result<LlamaWeights> make_dummy_llama_weights(const ModelConfig& config, gpu::Backend& backend,
                                              const WeightLoadOptions& options) {
  if (auto ok = validate_config(config, "dummy weights"); !ok) return ok.error();
  if (config.rope_scaling.type == RopeScalingType::kFreqFactors) {
    return make_error("dummy weights: a GGUF config with rope_freqs is not supported; use a config.json");
  }
  auto format = linear_format(backend, options, config);
  if (!format) return format.error();
  LlamaWeights w;
  w.config = config;
  w.precision = options.precision;
  DummyMaker m(backend, options, *format, w);
  if (auto ok = make_embedding_and_head(m, backend, options, w); !ok) return ok.error();
  for (int32_t l = 0; l < config.num_layers; ++l) {
    auto layer = make_layer(m, config, l);
    if (!layer) return layer.error();
    w.layers.push_back(std::move(layer).value());
    if (options.progress) options.progress(l + 1, config.num_layers);
  }
  auto norm = m.norm(kFinalNorm, config.hidden_size, "final norm");
  if (!norm) return norm.error();
  w.final_norm = std::move(norm).value();
  return w;
}

}  // namespace pagoda::model
