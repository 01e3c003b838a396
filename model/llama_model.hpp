// LlamaModel: the one forward pass of every architecture that
// model/architecture.hpp describes (llama, mistral, qwen2, qwen3; SmolLM2),
// over the paged KV cache, written only against gpu::Backend so that it runs
// on the CPU backend and on CUDA alike.
//
// One step (forward) takes a flattened ForwardBatch (model/forward_batch.hpp)
// of prefill chunks, decode tokens and padding rows, and per layer runs
//   rms_norm (fused residual add) -> QKV matmul (+bias) [-> per-head q/k
//   rms_norm (qk_norm)] -> RoPE -> write K/V into the cache by slot -> paged
//   attention -> O matmul -> rms_norm (fused add) -> gate|up matmul ->
//   silu*mul -> down matmul,
// Gemma (post_norms, gelu_tanh, embed_scale in model/architecture.hpp): the
// embedding scaled by sqrt(H); the O and down outputs each RMS-normed in
// place before the next fused residual add; gelu_tanh*mul instead of
// silu*mul; attention with the config's scale (query_pre_attn_scalar),
// soft-cap and, in windowed layers, sliding window (and, Gemma 3, the local
// RoPE table); the logits soft-capped. Such models load on the CPU backend
// only (load() names what the CUDA kernels lack).
// Mixture of experts (Mixtral, Qwen3-MoE; ModelConfig::num_experts > 0): the
// gate|up .. down MLP is the routed experts of model/moe_ffn.hpp, run as
// grouped matmuls; CPU backend only.
// then the final norm, a gather of the logits rows and the lm_head matmul.
// Every row's result depends only on its own sequence (tokens, cache
// contents, positions), not on which other rows share the batch, up to the
// GEMM's summation order (OpenBLAS may pick other kernels for other M).
//
// Memory: weights and a RunState sized for LoadOptions' limits are allocated
// at load; a step allocates nothing. The KV cache is the caller's (made with
// kv_cache_spec()); forward writes the batch's slots in every layer and reads
// only the blocks the batch's tables name.
//
// Thread-safety: one forward at a time (the executor thread); config() and
// the other const accessors may be read from any thread. Must not outlive the
// Backend given to load().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gpu/backend.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/result.hpp"
#include "gpu/rope_table.hpp"
#include "model/architecture.hpp"
#include "model/forward_batch.hpp"
#include "model/llama_weights.hpp"
#include "model/model_config.hpp"
#include "model/moe_ffn.hpp"
#include "model/run_state.hpp"
#include "model/step_graphs.hpp"

namespace pagoda::model {

struct LoadOptions {
  WeightPrecision precision = WeightPrecision::kQuantized;
  int32_t max_num_batched_tokens = 2048;  // T per step
  int32_t max_num_seqs = 256;             // S per step
  int32_t max_logits_rows = 0;            // R per step; 0 = max_num_seqs
  int32_t max_model_len = 0;              // 0 = the config's max_context
  // max_model_len above the config's max_context is an Error unless set.
  bool allow_long_max_model_len = false;
  int32_t block_size = 16;                // the KV cache's (8, 16 or 32)
  // PagedAttentionParams::partition_size: -1 lets the backend choose; 0 never
  // splits (then attention is bitwise batch-independent on every backend).
  int32_t attention_partition_size = -1;
  // Decode steps in arena mode padded to a batch-size bucket (up to
  // step_graph_max_batch and the step limits) and replayed from op graphs
  // (CUDA graphs; see model/step_graphs.hpp). On a backend that cannot
  // capture (the CPU backend) each bucket falls back to eager launches of
  // the padded step after two failed captures: the executor turns this on
  // only on CUDA.
  bool step_graphs = false;
  // The KV cache's element type; nullopt = auto: bf16 on CUDA; on the CPU
  // bf16 for quantized weights (half the cache bytes a step reads and the
  // memory a token holds) and fp32 for exact ones (the path that matches
  // transformers). CPU bf16 needs head_dim <= 512 (kv_cache_spec says so).
  std::optional<gpu::KvDtype> kv_dtype;
  int32_t step_graph_max_batch = 256;
  std::function<void(int32_t done, int32_t total)> progress;  // per loaded layer
  // --load-format dummy: random weights of the config's shape (model/dummy_weights.hpp).
  LoadFormat load_format = LoadFormat::kAuto;
  DummyDtype dummy_dtype = DummyDtype::kAuto;
};

// The KV cache dtype a model with this head_dim gets on a `kind` backend
// under options `o` (LoadOptions::kv_dtype; auto when unset).
inline constexpr int32_t kCpuBf16KvMaxHeadDim = 512;  // gpu/cpu/paged_attention.cpp's kMaxWidenD
gpu::KvDtype kv_dtype_for(gpu::BackendKind kind, const LoadOptions& o, int32_t head_dim);

// An Error naming what the kernels of a `kind` backend lack for this model
// (Gemma's attention soft-cap, sliding window, GeGLU and scale/soft-cap ops,
// and mixture-of-experts routing, exist on the CPU backend only); ok for every model on the CPU backend and
// for the other families everywhere. load() checks it before any upload.
Result<void> check_backend_support(const ModelConfig& config, gpu::BackendKind kind);

class LlamaModel {
 public:
  // model_path: a .gguf file or an HF directory (see load_llama_weights).
  static Result<std::unique_ptr<LlamaModel>> load(const std::string& model_path,
                                                  gpu::Backend& backend,
                                                  const LoadOptions& options = {});

  const ModelConfig& config() const { return weights_.config; }
  const LoadOptions& options() const { return options_; }  // with defaults resolved
  const RunStateLimits& limits() const { return state_.limits(); }
  gpu::Backend& backend() const { return backend_; }
  uint64_t weight_bytes() const { return weights_.device_bytes; }
  const LlamaWeights& weights() const { return weights_; }
  // MoE models: the router and expert weight bytes read, and the (token,
  // expert) pairs run, since the last reset_moe_counters() (executor thread).
  const MoeFfn& moe() const { return moe_; }
  void reset_moe_counters() { moe_.reset_counters(); }
  uint64_t run_state_bytes() const { return state_.device_bytes(); }
  // Counters of the decode-step graphs; nullptr when they are off.
  const StepGraphStats* graph_stats() const { return graphs_ ? &graphs_->stats() : nullptr; }

  // The KV cache geometry this model needs (F32 on the CPU backend, BF16 on CUDA).
  gpu::KvCacheSpec kv_cache_spec() const;

  // Runs one step. logits_out: host memory for [batch.num_logits_rows(),
  // vocab] floats (may be nullptr when the batch asks for no logits). An
  // invalid batch or a cache of another geometry is an Error, reported before
  // the cache is written.
  Result<void> forward(const ForwardBatch& batch, gpu::KvCache& cache, float* logits_out);

  // The same, leaving the logits in backend memory: returns [R, vocab]
  // floats, valid until the next forward (for on-device sampling).
  Result<const float*> forward_device(const ForwardBatch& batch, gpu::KvCache& cache);

  // forward_device in two halves, for a caller that runs the pass on another
  // thread (the executor's step thread): stage_forward() checks the batch and
  // stages its metadata (it reads the batch and its arena's host rows);
  // issue_forward() runs the pass (CPU) or queues it (CUDA) from the staged
  // step and reads neither, so the caller may change both in between.
  // Requires issue_forward() of each staged step before the next
  // stage_forward(), one thread at a time, and the arena's device rows
  // unchanged until the pass has run.
  struct StagedForward {
    StagedStep step;
    int32_t bucket = 0;  // > 0: the decode-graph bucket (forward_graph)
    int32_t bound = 0;   // the graph's context bucket
    GraphFingerprint fp;
  };
  Result<StagedForward> stage_forward(const ForwardBatch& batch, gpu::KvCache& cache);
  Result<const float*> issue_forward(const StagedForward& staged, gpu::KvCache& cache);

 private:
  LlamaModel(gpu::Backend& backend, LlamaWeights weights, LoadOptions options,
             RunState state, gpu::RopeTable rope)
      : backend_(backend), weights_(std::move(weights)), options_(std::move(options)),
        state_(std::move(state)), rope_(std::move(rope)) {}

  // A layer's rotated-to-be q, k, v: [T, *] rows q_stride / kv_stride floats apart.
  struct Qkv {
    float* q;
    float* k;
    float* v;
    int64_t q_stride, kv_stride;
  };
  Result<Qkv> attention_input(int32_t layer, const StagedStep& step);
  Result<void> run_layer(int32_t layer, const StagedStep& step, gpu::KvCache& cache);
  // Enqueues every op of a staged step (embedding .. lm_head).
  Result<void> issue_step(const StagedStep& step, gpu::KvCache& cache);
  // The graph bucket for this batch, or 0 when it runs eagerly.
  int32_t graph_bucket(const ForwardBatch& batch) const;
  Result<StagedForward> stage_graph(const ForwardBatch& batch, gpu::KvCache& cache,
                                    int32_t bucket);
  Result<void> linear(const DeviceLinear& w, const float* x, int64_t x_stride, float* y,
                      int64_t m);

  gpu::Backend& backend_;
  LlamaWeights weights_;
  LoadOptions options_;
  RunState state_;
  gpu::RopeTable rope_;
  // Longrope (ModelConfig, kLongRope): rope_ holds the short-factor table and
  // rope_long_ the long-factor one, used for a step whose longest sequence
  // exceeds the original context (long_step_, set before each step's ops).
  gpu::RopeTable rope_long_;
  bool long_step_ = false;
  // Gemma 3's windowed layers' table (ModelConfig::rope_local_theta > 0).
  gpu::RopeTable rope_local_;
  const Architecture* arch_ = nullptr;  // of config().architecture; set by load
  std::unique_ptr<StepGraphs> graphs_;  // null unless options.step_graphs
  MoeFfn moe_;  // MoE models only: routing and the experts' scratch
};

}  // namespace pagoda::model
