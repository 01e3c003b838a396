// MoeFfn: the mixture-of-experts MLP of Mixtral and Qwen3-MoE (one layer's
// MLP; ModelConfig::num_experts > 0), run as grouped matmuls.
//
// For T tokens x [T, H] (the post-attention norm's output):
//   router logits  l = x W_router^T                          [T, E]
//   p = softmax(l) over all E experts; the top k of p per token (ties: the
//   lower expert index first); weights w = those p, divided by their sum
//   when ModelConfig::moe_norm_topk_prob (transformers' MixtralTopKRouter /
//   Qwen3MoeTopKRouter, llama.cpp's build_moe_ffn with softmax gating)
//   y[t] = sum over the k chosen e of w[t, e] * down_e(silu(gate_e x[t]) * up_e x[t])
// Dispatch (no per-token loop over experts): route_topk groups the T k
// (token, expert) pairs by expert; for every expert with n > 0 rows the rows
// x[tokens of e] are gathered into [n, H], gate|up [n, 2 Ie] and down
// [n, H] run as two backend matmuls over those n rows (the backend's
// packed / quantized kernels), and w * row is added into y[token]. Experts
// are visited in ascending order (y sums them in that order, as
// transformers' index_add_ loop does). An expert no token chose is not
// touched: a step reads the router and only the chosen experts' weights
// (bytes_read() counts them).
//
// Requirements: a host-accessible backend whose ops complete before they
// return (the CPU backend; model/llama_model.cpp refuses MoE models on CUDA
// at load), since routing and the gather/scatter run on the host between ops.
// Memory: scratch for max_tokens rows is allocated by create(); forward
// allocates nothing. Thread-safety: one forward at a time (the executor).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/result.hpp"
#include "model/llama_weights.hpp"
#include "model/model_config.hpp"

namespace pagoda::model {

// The (token, expert) pairs of a step, grouped by expert.
struct MoeRouting {
  std::vector<int32_t> offsets;  // [E + 1]: expert e's pairs are [offsets[e], offsets[e + 1])
  std::vector<int32_t> tokens;   // [T k]: each pair's token, ascending within an expert
  std::vector<float> weights;    // [T k]: each pair's routing weight
  std::vector<int32_t> chosen;   // [T k]: per token, its k experts by descending p
  std::vector<float> chosen_w;   // [T k]: their weights, in that order
  std::vector<float> probs;      // [E]: scratch
  std::vector<int32_t> fill;     // [E]: scratch
};

// Routes T tokens: logits [T, E] row-major (finite), 1 <= k <= E. Reuses
// `out`'s capacity (no allocation once it has held T k pairs).
void route_topk(const float* logits, int32_t T, int32_t E, int32_t k, bool norm_topk,
                MoeRouting& out);

// Bytes of a linear weight as it lies in backend memory (its storage, or its
// view's rows when it aliases the file).
uint64_t linear_weight_bytes(const DeviceLinear& w);

class MoeFfn {
 public:
  MoeFfn() = default;
  // Scratch for up to max_tokens rows; an Error when the backend is not
  // host-accessible or an allocation fails.
  static Result<MoeFfn> create(gpu::Backend& backend, const ModelConfig& config,
                               int32_t max_tokens);

  // y [T, H] := the MoE MLP of x [T, H] (rows H apart, backend memory; y must
  // not overlap x) with layer weights w (router + experts). T <= max_tokens.
  Result<void> forward(gpu::Backend& backend, const LlamaLayerWeights& w, const float* x, float* y,
                       int32_t T);

  // Weight bytes forward has read (router + chosen experts) since the last
  // reset, and the (token, expert) pairs it ran.
  uint64_t bytes_read() const { return bytes_read_; }
  int64_t pairs_run() const { return pairs_run_; }
  void reset_counters() {
    bytes_read_ = 0;
    pairs_run_ = 0;
  }
  const MoeRouting& last_routing() const { return routing_; }

 private:
  Result<void> run_expert(gpu::Backend& backend, const MoeExpertWeights& ex, int32_t e,
                          const float* x, float* y);

  int32_t hidden_ = 0, num_experts_ = 0, used_ = 0, inter_ = 0, max_tokens_ = 0;
  bool norm_topk_ = false;
  gpu::DeviceBuffer logits_;    // [T, E]
  gpu::DeviceBuffer gathered_;  // [T, H]: one expert's rows of x
  gpu::DeviceBuffer gate_up_;   // [T, 2 Ie]
  gpu::DeviceBuffer act_;       // [T, Ie]
  gpu::DeviceBuffer out_;       // [T, H]: one expert's output rows
  MoeRouting routing_;
  uint64_t bytes_read_ = 0;
  int64_t pairs_run_ = 0;
};

}  // namespace pagoda::model
