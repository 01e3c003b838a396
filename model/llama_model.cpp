#include "model/llama_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace pagoda::model {

namespace {

// A table of rope_inv_freq(rc)[i] / divisors[i] (per-pair frequency divisors).
Result<gpu::RopeTable> divided_rope_table(gpu::Backend& backend, const gpu::RopeConfig& rc,
                                          const std::vector<double>& divisors) {
  if (auto ok = gpu::validate_rope_config(rc); !ok) return ok.error();
  std::vector<float> inv = gpu::rope_inv_freq(rc);
  if (divisors.size() != inv.size()) return make_error("rope: the frequency factors have the wrong length");
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = float(double(inv[i]) / divisors[i]);
  auto buf = backend.allocate(inv.size() * sizeof(float));
  if (!buf) return make_error("rope table: " + buf.error().message);
  if (auto up = backend.upload(*buf, 0, inv.data(), inv.size() * sizeof(float)); !up) {
    return up.error();
  }
  return gpu::RopeTable(rc, std::move(buf).value());
}

// Gemma 3's windowed layers: theta = rope_local_theta, no scaling.
Result<gpu::RopeTable> make_local_rope_table(gpu::Backend& backend, const ModelConfig& c) {
  gpu::RopeConfig rc;
  rc.head_dim = c.head_dim;
  rc.rotary_dim = c.rotary_dim;
  rc.theta = float(c.rope_local_theta);
  rc.style = c.rope_interleaved ? gpu::RopeStyle::kInterleaved : gpu::RopeStyle::kNeox;
  return backend.create_rope_table(rc);
}

// What the CUDA kernels lack for this model ("" when nothing): Gemma's ops
// run on the CPU backend only for now.
std::string missing_cuda_features(const ModelConfig& c, const Architecture& a) {
  std::string m;
  const auto add = [&m](const char* what) { m += (m.empty() ? "" : ", ") + std::string(what); };
  if (c.attn_logit_softcap > 0) add("attention logit soft-capping");
  if (c.sliding_window > 0 && c.sliding_window < c.max_context) add("sliding-window attention");
  if (c.final_logit_softcap > 0 || a.embed_scale) add("the scale_cap op (embedding scale, final soft-cap)");
  if (a.gelu_tanh) add("the gelu_tanh_mul op (GeGLU)");
  if (c.num_experts > 0) add("mixture-of-experts routing and grouped expert matmuls (MoE)");
  return m;
}

// The rope op's table: inv_freq from the config, or theta_i / rope_freqs[i]
// for GGUF files that store llama3 scaling as frequency factors, or (longrope)
// theta_i / short_factor[i] (long = false) / long_factor[i] (long = true).
Result<gpu::RopeTable> make_rope_table(gpu::Backend& backend, const LlamaWeights& w, bool long_factors) {
  const ModelConfig& c = w.config;
  gpu::RopeConfig rc;
  rc.head_dim = c.head_dim;
  rc.rotary_dim = c.rotary_dim;
  rc.theta = float(c.rope_theta);
  rc.style = c.rope_interleaved ? gpu::RopeStyle::kInterleaved : gpu::RopeStyle::kNeox;
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeScalingType::kLinear || rs.type == RopeScalingType::kLlama3) {
    rc.scaling = rs.type == RopeScalingType::kLinear ? gpu::RopeScaling::kLinear
                                                     : gpu::RopeScaling::kLlama3;
    rc.factor = float(rs.factor);
    rc.low_freq_factor = float(rs.low_freq_factor);
    rc.high_freq_factor = float(rs.high_freq_factor);
    rc.original_max_positions = int32_t(rs.original_max_position_embeddings);
  }
  if (rs.type == RopeScalingType::kLongRope) {
    rc.attention_factor = float(rs.attention_factor);
    return divided_rope_table(backend, rc, long_factors ? rs.long_factor : rs.short_factor);
  }
  if (rs.type != RopeScalingType::kFreqFactors) return backend.create_rope_table(rc);
  return divided_rope_table(backend, rc, std::vector<double>(w.rope_freq_factors.begin(),
                                                             w.rope_freq_factors.end()));
}

Result<LoadOptions> resolve_options(LoadOptions o, const ModelConfig& c) {
  if (o.max_model_len == 0) o.max_model_len = int32_t(std::min<int64_t>(c.max_context, INT32_MAX));
  if (o.max_model_len <= 0) return make_error("load: the model has no max context; set max_model_len");
  if (o.max_model_len > c.max_context && !o.allow_long_max_model_len) {
    return make_error("load: max_model_len " + std::to_string(o.max_model_len) +
                      " exceeds the model's context of " + std::to_string(c.max_context));
  }
  if (o.max_logits_rows == 0) o.max_logits_rows = o.max_num_seqs;
  if (o.block_size != 8 && o.block_size != 16 && o.block_size != 32) {
    return make_error("load: block_size must be 8, 16 or 32");
  }
  if (o.max_num_batched_tokens <= 0 || o.max_num_seqs <= 0 || o.max_logits_rows <= 0) {
    return make_error("load: max_num_batched_tokens, max_num_seqs, max_logits_rows must be > 0");
  }
  if (o.kv_dtype == gpu::KvDtype::kBF16 && c.head_dim > kCpuBf16KvMaxHeadDim) {
    // The CUDA kernels take any head_dim they load; the CPU's widening buffer does not.
    return make_error("load: a bf16 KV cache on the CPU needs head_dim <= " +
                      std::to_string(kCpuBf16KvMaxHeadDim) + " (the model has " +
                      std::to_string(c.head_dim) + "); use --kv-cache-dtype f32");
  }
  return o;
}

}  // namespace

Result<void> check_backend_support(const ModelConfig& c, gpu::BackendKind kind) {
  const Architecture* arch = find_architecture(c.architecture);
  if (kind == gpu::BackendKind::kCpu || arch == nullptr) return {};
  const std::string m = missing_cuda_features(c, *arch);
  if (m.empty()) return {};
  return make_error("load: " + c.architecture + " needs " + m +
                    ", which the CUDA backend's kernels do not implement yet; use the CPU backend"
                    " (--backend cpu)");
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& model_path,
                                                     gpu::Backend& backend,
                                                     const LoadOptions& options) {
  WeightLoadOptions wo;
  wo.precision = options.precision;
  wo.progress = options.progress;
  wo.load_format = options.load_format;
  wo.dummy_dtype = options.dummy_dtype;
  if (backend.kind() != gpu::BackendKind::kCpu) {  // refuse before uploading any weight
    if (auto c = load_model_config(model_path); c.ok()) {
      if (auto ok = check_backend_support(*c, backend.kind()); !ok) return ok.error();
    }
  }
  auto weights = load_llama_weights(model_path, backend, wo);
  if (!weights) return weights.error();
  const Architecture* arch = find_architecture(weights->config.architecture);
  if (arch == nullptr) return make_error("load: unknown architecture " + weights->config.architecture);
  if (auto ok = check_backend_support(weights->config, backend.kind()); !ok) return ok.error();
  auto opts = resolve_options(options, weights->config);
  if (!opts) return opts.error();
  RunStateLimits limits;
  limits.max_tokens = opts->max_num_batched_tokens;
  limits.max_seqs = opts->max_num_seqs;
  limits.max_logits_rows = opts->max_logits_rows;
  limits.max_model_len = opts->max_model_len;
  limits.block_size = opts->block_size;
  limits.max_blocks_per_seq = (opts->max_model_len + opts->block_size - 1) / opts->block_size;
  auto state = RunState::create(backend, weights->config, limits);
  if (!state) return state.error();
  auto rope = make_rope_table(backend, *weights, false);
  if (!rope) return rope.error();
  const bool longrope = weights->config.rope_scaling.type == RopeScalingType::kLongRope;
  auto rope_long = longrope ? make_rope_table(backend, *weights, true)
                            : Result<gpu::RopeTable>(gpu::RopeTable());
  if (!rope_long) return rope_long.error();
  std::unique_ptr<LlamaModel> model(new LlamaModel(backend, std::move(weights).value(),
                                                  std::move(opts).value(), std::move(state).value(),
                                                  std::move(rope).value()));
  model->rope_long_ = std::move(rope_long).value();
  model->arch_ = arch;
  if (model->config().num_experts > 0) {
    auto moe = MoeFfn::create(backend, model->config(),
                              std::max(limits.max_tokens, model->state_.padded_limit()));
    if (!moe) return moe.error();
    model->moe_ = std::move(moe).value();
  }
  if (model->config().rope_local_theta > 0) {
    auto local = make_local_rope_table(backend, model->config());
    if (!local) return local.error();
    model->rope_local_ = std::move(local).value();
  }
  const LoadOptions& o = model->options_;
  if (o.step_graphs) {
    const int32_t max_bucket = std::min(o.step_graph_max_batch, model->state_.padded_limit());
    if (max_bucket >= 1) model->graphs_ = std::make_unique<StepGraphs>(max_bucket);
  }
  return model;
}

gpu::KvDtype kv_dtype_for(gpu::BackendKind kind, const LoadOptions& o, int32_t head_dim) {
  if (o.kv_dtype) return *o.kv_dtype;
  if (kind == gpu::BackendKind::kCuda) return gpu::KvDtype::kBF16;
  const bool bf16 = o.precision == WeightPrecision::kQuantized && head_dim <= kCpuBf16KvMaxHeadDim;
  return bf16 ? gpu::KvDtype::kBF16 : gpu::KvDtype::kF32;
}

gpu::KvCacheSpec LlamaModel::kv_cache_spec() const {
  gpu::KvCacheSpec spec;
  spec.num_layers = config().num_layers;
  spec.num_kv_heads = config().num_kv_heads;
  spec.head_dim = config().head_dim;
  spec.block_size = options_.block_size;
  spec.dtype = kv_dtype_for(backend_.kind(), options_, config().head_dim);
  return spec;
}

namespace {

gpu::MatmulParams matmul_params(const DeviceLinear& w, const float* x, int64_t x_stride, float* y,
                                int64_t m) {
  gpu::MatmulParams p;
  p.x = x;
  p.x_stride = x_stride;
  p.weight = w.weight;
  p.bias = w.bias_ptr();
  p.y = y;
  p.m = m;
  return p;
}

}  // namespace

Result<void> LlamaModel::linear(const DeviceLinear& w, const float* x, int64_t x_stride, float* y,
                                int64_t m) {
  return backend_.matmul(matmul_params(w, x, x_stride, y, m));
}

// The attention input of layer l: normed = rms_norm(residual (+ delta)), then
// q, k, v = the projections of normed, and (qk_norm) each head's q and k
// RMS-normalised with its own weights [D]. Fused QKV leaves them interleaved
// per token ([T, Hq D | Hk D | Hk D], rows qkv_width apart); qk_norm ones
// are three packed blocks in wide ([T, Hq D], [T, Hk D], [T, Hk D]), so that
// a head is one contiguous row of D for the norm. Three weights without
// qk_norm (a group of mixed block types kept apart) take the second layout
// too, without the norms.
Result<LlamaModel::Qkv> LlamaModel::attention_input(int32_t l, const StagedStep& st) {
  const ModelConfig& c = config();
  const LlamaLayerWeights& w = weights_.layers[size_t(l)];
  const RunState& rs = state_;
  const int32_t T = st.meta.num_tokens, H = c.hidden_size, D = c.head_dim;
  const int64_t q_width = int64_t(c.num_heads) * D, kv_width = int64_t(c.num_kv_heads) * D;
  const float eps = float(c.rms_norm_eps);
  const gpu::RmsNormParams norm{l == 0 ? rs.residual() : rs.delta(),
                                l == 0 ? nullptr : rs.residual(),
                                w.attn_norm.as<const float>(), rs.normed(), T, H, eps};
  float* wide = rs.wide();
  if (w.qkv.weight.data != nullptr) {
    const int64_t qkv_width = q_width + 2 * kv_width;
    auto ok = backend_.rms_norm_matmul(norm, matmul_params(w.qkv, rs.normed(), H, wide, T));
    if (!ok) return ok.error();
    return Qkv{wide, wide + q_width, wide + q_width + kv_width, qkv_width, qkv_width};
  }
  Qkv out{wide, wide + T * q_width, wide + T * (q_width + kv_width), q_width, kv_width};
  if (auto ok = backend_.rms_norm_matmul(norm, matmul_params(w.q, rs.normed(), H, out.q, T)); !ok) {
    return ok.error();
  }
  if (auto ok = linear(w.k, rs.normed(), H, out.k, T); !ok) return ok.error();
  if (auto ok = linear(w.v, rs.normed(), H, out.v, T); !ok) return ok.error();
  if (!c.qk_norm) return out;
  // Per-head norms: the rms_norm op over rows of D ([T Hq, D] and [T Hk, D]).
  backend_.rms_norm({out.q, nullptr, w.q_norm.as<const float>(), out.q, T * c.num_heads, D, eps});
  backend_.rms_norm({out.k, nullptr, w.k_norm.as<const float>(), out.k, T * c.num_kv_heads, D, eps});
  return out;
}

// One decoder layer. On entry residual holds the stream and, for layer > 0,
// delta the previous layer's MLP output (added here by the fused norm).
Result<void> LlamaModel::run_layer(int32_t l, const StagedStep& st, gpu::KvCache& cache) {
  const ModelConfig& c = config();
  const LlamaLayerWeights& w = weights_.layers[size_t(l)];
  const RunState& rs = state_;
  const int32_t T = st.meta.num_tokens, H = c.hidden_size, D = c.head_dim;
  const int64_t q_width = int64_t(c.num_heads) * D;
  const float eps = float(c.rms_norm_eps);

  auto qkv = attention_input(l, st);
  if (!qkv) return qkv.error();
  const gpu::KvLayerView kv = cache.layer(l);
  gpu::KvCacheWriteParams wr{qkv->k, qkv->v, qkv->kv_stride, qkv->kv_stride, kv.k, kv.v,
                             cache.layout(), cache.spec().dtype, st.slot_mapping, T};
  const bool windowed = !c.sliding_layers.empty() && c.sliding_layers[size_t(l)];
  const gpu::RopeTable& rope = windowed && c.rope_local_theta > 0 ? rope_local_
                               : long_step_                      ? rope_long_
                                                                 : rope_;
  backend_.rope_kv_write(rope.params(qkv->q, qkv->q_stride, qkv->k, qkv->kv_stride, st.positions,
                                      T, c.num_heads, c.num_kv_heads),
                         wr);
  gpu::PagedAttentionParams at;
  at.q = qkv->q;
  at.q_stride = qkv->q_stride;
  at.out = rs.mid();  // [T, Hq D]
  at.k_cache = kv.k;
  at.v_cache = kv.v;
  at.layout = cache.layout();
  at.dtype = cache.spec().dtype;
  at.num_q_heads = c.num_heads;
  at.scale = 1.0f / std::sqrt(float(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : D));
  at.partition_size = options_.attention_partition_size;
  at.meta = st.meta;
  at.softcap = float(c.attn_logit_softcap);
  at.sliding_window = windowed ? c.sliding_window : 0;
  if (auto ok = backend_.paged_attention_matmul(
          at, matmul_params(w.o, rs.mid(), q_width, rs.delta(), T));
      !ok) {
    return ok;
  }
  if (arch_->post_norms) {  // Gemma: the attention output's own norm, in place
    backend_.rms_norm({rs.delta(), nullptr, w.post_attn_norm.as<const float>(), rs.delta(), T, H, eps});
  }

  if (c.num_experts > 0) {  // MoE: the routed experts write delta (model/moe_ffn.hpp)
    backend_.rms_norm({rs.delta(), rs.residual(), w.ffn_norm.as<const float>(), rs.normed(), T, H, eps});
    return moe_.forward(backend_, w, rs.normed(), rs.delta(), T);
  }
  const int32_t I = c.intermediate_size;
  if (auto ok = backend_.rms_norm_matmul(
          {rs.delta(), rs.residual(), w.ffn_norm.as<const float>(), rs.normed(), T, H, eps},
          matmul_params(w.gate_up, rs.normed(), H, rs.wide(), T));
      !ok) {
    return ok;
  }
  if (!arch_->gelu_tanh) {
    return backend_.silu_mul_matmul({rs.wide(), rs.mid(), T, I},
                                    matmul_params(w.down, rs.mid(), I, rs.delta(), T));
  }
  backend_.gelu_tanh_mul({rs.wide(), rs.mid(), T, I});
  if (auto ok = linear(w.down, rs.mid(), I, rs.delta(), T); !ok) return ok;
  if (arch_->post_norms) {  // the MLP output's own norm, in place
    backend_.rms_norm({rs.delta(), nullptr, w.post_ffn_norm.as<const float>(), rs.delta(), T, H, eps});
  }
  return {};
}

Result<void> LlamaModel::issue_step(const StagedStep& st, gpu::KvCache& cache) {
  const ModelConfig& c = config();
  const int32_t T = st.meta.num_tokens, H = c.hidden_size;
  const gpu::LinearWeight& rows = weights_.embedding_rows;  // [V, H] quantized, or unset
  backend_.embedding({weights_.embedding.as<const float>(), st.token_ids, state_.residual(), T,
                      H, c.vocab_size, rows.data, rows.format});
  if (arch_->embed_scale) {  // Gemma: x sqrt(H), in fp32 (transformers at fp32, llama.cpp)
    backend_.scale_cap({state_.residual(), int64_t(T) * H, float(std::sqrt(double(H))), 0.0f});
  }
  for (int32_t l = 0; l < c.num_layers; ++l) {
    if (auto ok = run_layer(l, st, cache); !ok) return ok;
  }
  backend_.rms_norm({state_.delta(), state_.residual(), weights_.final_norm.as<const float>(),
                     state_.normed(), T, H, float(c.rms_norm_eps)});
  const int32_t R = st.num_logits_rows;
  if (R == 0) return {};
  backend_.embedding({state_.normed(), st.logits_rows, state_.gathered(), R, H, T});
  if (auto ok = linear(weights_.lm_head, state_.gathered(), H, state_.logits(), R); !ok) return ok;
  if (c.final_logit_softcap > 0) {
    backend_.scale_cap({state_.logits(), int64_t(R) * c.vocab_size, 1.0f, float(c.final_logit_softcap)});
  }
  return {};
}

// Graph-eligible: graphs on, arena mode, one row per sequence, R <= S, S
// within the buckets.
// Longrope models run eagerly: a graph would keep one table's address.
int32_t LlamaModel::graph_bucket(const ForwardBatch& b) const {
  if (!graphs_ || config().rope_scaling.type == RopeScalingType::kLongRope || b.arena == nullptr ||
      b.num_tokens() != b.num_seqs() || b.num_logits_rows() > b.num_seqs()) {
    return 0;
  }
  return graphs_->bucket_for(b.num_seqs());
}

// The context bucket: split-K's partition count (grid z) follows
// max_context_len, so it is frozen at the next power of two >= 1024 that
// holds the batch (empty partitions exit at once), capped at max_model_len;
// unsplit attention does not use it, so one bucket serves every length.
Result<LlamaModel::StagedForward> LlamaModel::stage_graph(const ForwardBatch& b,
                                                          gpu::KvCache& cache, int32_t bucket) {
  const int32_t limit = state_.limits().max_model_len;
  int32_t bound = limit;
  if (options_.attention_partition_size != 0) {
    int32_t ctx = 0;
    for (int32_t c : b.context_lens) ctx = std::max(ctx, c);
    int64_t p = 1024;
    while (p < ctx) p *= 2;
    bound = int32_t(std::min<int64_t>(p, limit));
  }
  auto st = state_.stage_padded(backend_, b, cache, bucket, bound);
  if (!st) return st.error();
  StagedForward out;
  out.step = *st;
  out.bucket = bucket;
  out.bound = bound;
  out.fp = GraphFingerprint{cache.layer(0).k, b.arena->device(), b.arena->width()};
  return out;
}

Result<LlamaModel::StagedForward> LlamaModel::stage_forward(const ForwardBatch& batch,
                                                            gpu::KvCache& cache) {
  // Longrope: transformers' choice, by the step's sequence length max(position) + 1.
  // Other models skip the scan of the positions.
  const RopeScaling& rs = config().rope_scaling;
  long_step_ = false;
  if (rs.type == RopeScalingType::kLongRope) {
    int64_t max_pos = -1;
    for (int32_t p : batch.positions) max_pos = std::max<int64_t>(max_pos, p);
    long_step_ = max_pos + 1 > rs.original_max_position_embeddings;
  }
  if (const int32_t bucket = graph_bucket(batch); bucket > 0) return stage_graph(batch, cache, bucket);
  auto st = state_.stage(backend_, batch, cache);
  if (!st) return st.error();
  StagedForward out;
  out.step = *st;
  return out;
}

Result<const float*> LlamaModel::issue_forward(const StagedForward& staged, gpu::KvCache& cache) {
  if (staged.bucket > 0) {
    auto ok = graphs_->run(backend_, staged.bucket, staged.bound, staged.fp,
                           [this, &staged, &cache] { return issue_step(staged.step, cache); });
    if (!ok) return ok.error();
  } else if (auto ok = issue_step(staged.step, cache); !ok) {
    return ok.error();
  }
  return static_cast<const float*>(state_.logits());
}

Result<const float*> LlamaModel::forward_device(const ForwardBatch& batch, gpu::KvCache& cache) {
  auto staged = stage_forward(batch, cache);
  if (!staged) return staged.error();
  return issue_forward(*staged, cache);
}

Result<void> LlamaModel::forward(const ForwardBatch& batch, gpu::KvCache& cache,
                                 float* logits_out) {
  const size_t bytes = size_t(batch.num_logits_rows()) * size_t(config().vocab_size) * sizeof(float);
  if (bytes > 0 && logits_out == nullptr) {
    return make_error("forward: logits_out is null but logits rows were asked for");
  }
  auto logits = forward_device(batch, cache);
  if (!logits) return logits.error();
  if (bytes == 0) return {};
  return backend_.download(state_.logits_buffer(), 0, logits_out, bytes);
}

}  // namespace pagoda::model
