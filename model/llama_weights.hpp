// LlamaWeights: every tensor of a Llama-family model (llama, mistral, qwen2,
// qwen3; SmolLM2 is llama), read from a GGUF file or a HuggingFace safetensors
// directory, checked against the ModelConfig and placed in a Backend's memory
// in the layout the forward pass (model/llama_model.hpp) uses:
//  - per layer four linear weights: Q|K|V fused into one [(Hq + 2 Hk) D, H]
//    (rows of Q, then K, then V; biases fused the same way for qwen2), O
//    [H, Hq D], gate|up fused into one [2 I, H] (gate rows first, the packing
//    silu_mul expects) and down [H, I];
//  - the token embedding as fp32 [V, H], or on the CPU in quantized precision
//    in its file's quantized rows, dequantized as they are gathered
//    (embedding_rows); the norms as fp32 [H];
//  - lm_head [V, H]: the `output` / `lm_head` tensor, or the token embedding
//    when tied (GGUF: no output.weight; HF: tie_word_embeddings or no lm_head).
//
// Precision:
//  - kExact: every tensor is converted to fp32 at load (exact dequantisation);
//    the CPU backend multiplies with OpenBLAS. The fidelity reference path.
//  - kQuantized: GGUF block-quantized linear weights stay in their blocks
//    (int8 activation kernels on the CPU; Q5_0, Q5_1, IQ4_NL, IQ4_XS and the
//    K-quants Q2_K..Q6_K repacked into the CPU's packed layout, kernels only
//    there: with PAGODA_CPU_PACKED=0 they are requantized to Q8_0, one
//    stderr line per model saying how many); F32/F16/BF16 become fp32 (or
//    the packed 16-bit layout). When Q, K and V (or gate and up) do not
//    share one block format, that fused group is stored fp32 instead (Q8_0
//    when one of them lacks row-layout CPU kernels, e.g. Q4_K with Q6_K). On the CUDA backend
//    kQuantized means BF16 weights (CudaBackend::prepare_weight dequantizes
//    every format directly), kExact fp32.
//
// Norm weights of norm_add_one architectures (Gemma) read from HF files are
// stored as 1 + w (the factor their norm multiplies by), so that the forward
// runs the plain rms_norm op; GGUF files already hold 1 + w.
//
// MoE layers (ModelConfig::num_experts > 0) hold a router and E experts
// instead of gate_up/down: each expert's gate|up fused and its down, split
// out of GGUF's 3-D ffn_{gate,up,down}_exps (a slice per expert, each in the
// tensor's own block format, packed like a dense weight) or read from HF's
// per-expert tensors (model/architecture.hpp names them).
//
// Tensor names (the architecture's, model/architecture.hpp): GGUF token_embd,
// blk.N.{attn_norm, attn_q, attn_k, attn_v (+ .bias), attn_q_norm,
// attn_k_norm, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down},
// output_norm, output; HF model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q,k,v,o}_proj (+ .bias), self_attn.{q,k}_norm,
// post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head. GGUF llama files carry
// llama.cpp's permuted Q/K rows: the forward pass uses interleaved RoPE for
// them (ModelConfig::rope_interleaved); nothing is un-permuted here.
//
// Errors (all name the tensor and the file): a missing tensor, a shape that
// differs from the config, an unsupported type (IQ2_XXS, I32, ...), a
// backend allocation or upload failure. An unsupported type's error also
// names the type and lists the supported ones.
//
// Ownership: LlamaWeights owns its DeviceBuffers (it must not outlive the
// Backend) and keeps the mapped model file alive, because weight views may
// alias it (on a host-accessible backend, GGUF weights already in a format
// the matmul takes are used in place, not copied: unfused ones such as O,
// down and a quantized tied lm_head). Move-only. Read-only after load.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/result.hpp"
#include "gpu/weight_format.hpp"
#include "model/dummy_format.hpp"
#include "model/model_config.hpp"

namespace pagoda::model {

enum class WeightPrecision { kExact, kQuantized };

const char* weight_precision_name(WeightPrecision p);  // "exact", "quantized"

// A linear layer's weight (and bias) as the backend's matmul takes it.
struct DeviceLinear {
  gpu::LinearWeight weight;    // [N, K]; views `storage`, or the mapped file
  gpu::DeviceBuffer storage;   // empty when `weight` aliases other memory
  gpu::DeviceBuffer bias;      // [N] fp32, or empty

  const float* bias_ptr() const { return bias.as<const float>(); }
};

// One expert of an MoE layer (model/moe_ffn.hpp).
struct MoeExpertWeights {
  DeviceLinear gate_up;  // [2 Ie, H], gate rows first
  DeviceLinear down;     // [H, Ie]
};

struct LlamaLayerWeights {
  gpu::DeviceBuffer attn_norm;  // [H] fp32
  DeviceLinear qkv;             // [(Hq + 2 Hk) D, H] (+ bias for qwen2); empty when qk_norm
                                // or when q, k, v differ in block type (CPU quantized)
  // qk_norm architectures (qwen3): Q [Hq D, H], K and V [Hk D, H] as three
  // weights (each head's q and k must be a contiguous row for the norm) and
  // the per-head norm weights [D] fp32; without the norms when qkv is kept
  // apart for its mixed block types. Empty otherwise.
  DeviceLinear q, k, v;
  gpu::DeviceBuffer q_norm, k_norm;
  DeviceLinear o;               // [H, Hq D]
  gpu::DeviceBuffer ffn_norm;   // [H] fp32
  // post_norms architectures (Gemma): the attention output's and the MLP
  // output's own norms, [H] fp32 each; empty otherwise.
  gpu::DeviceBuffer post_attn_norm, post_ffn_norm;
  DeviceLinear gate_up;         // [2 I, H]; empty for MoE
  DeviceLinear down;            // [H, I]; empty for MoE
  // MoE (ModelConfig::num_experts > 0): the router [E, H] and the E experts.
  DeviceLinear router;
  std::vector<MoeExpertWeights> experts;
};

struct LlamaWeights {
  ModelConfig config;
  WeightPrecision precision = WeightPrecision::kExact;
  gpu::DeviceBuffer embedding;  // [V, H] fp32; empty when embedding_rows is set
  // CPU backend, kQuantized, a block-quantized embedding: its rows as the
  // file stores them ([V, H] in .format's row layout, viewing the mapped file
  // kept alive by source_keepalive), dequantized row by row as tokens are
  // gathered, instead of a V x H fp32 copy (1.5 GB for Qwen3's 151936 x 2560).
  gpu::LinearWeight embedding_rows;
  std::vector<LlamaLayerWeights> layers;
  gpu::DeviceBuffer final_norm;  // [H] fp32
  DeviceLinear lm_head;          // [V, H]; may view `embedding` (tied, fp32)
  // GGUF rope_freqs.weight ([D/2] frequency divisors) when the config says
  // kFreqFactors; empty otherwise.
  std::vector<float> rope_freq_factors;
  uint64_t device_bytes = 0;               // backend memory held by the buffers
  // Linear weights converted to Q8_0 at load because the CPU kernels lack
  // their format (CPU backend, kQuantized; 0 otherwise).
  int32_t requantized_tensors = 0;
  std::shared_ptr<const void> source_keepalive;  // the mapped model file
};

// A linear weight in host memory, about to be placed: `weight.data` is host
// memory valid during the call. `may_alias`: the bytes outlive the returned
// DeviceLinear (e.g. a file mapping kept alive by LlamaWeights), so a
// host-accessible backend may use them in place when they are already in a
// format its matmul takes.
struct HostLinear {
  gpu::LinearWeight weight;
  const float* bias = nullptr;  // [weight.n] or nullptr
  bool may_alias = false;
};

// The one place that decides how a weight lives in backend memory: CPU: the
// format as given (F16/BF16 converted to fp32), aliased when allowed; CUDA:
// CudaBackend::prepare_weight to BF16 (kQuantized) or F32 (kExact).
Result<DeviceLinear> upload_linear_weight(gpu::Backend& backend, const HostLinear& host,
                                          WeightPrecision precision);

struct WeightLoadOptions {
  WeightPrecision precision = WeightPrecision::kQuantized;
  // Called after each loaded layer with (done, total); may be empty.
  std::function<void(int32_t done, int32_t total)> progress;
  // kDummy: random weights of the config's shape (model/dummy_weights.hpp);
  // only the config is read from model_path.
  LoadFormat load_format = LoadFormat::kAuto;
  DummyDtype dummy_dtype = DummyDtype::kAuto;
  uint64_t dummy_seed = 0x5eed;
};

// model_path: a .gguf file, or an HF directory (config.json + *.safetensors)
// or its config.json. Reads the config, validates it and loads every tensor.
// With options.load_format == kDummy, model_path is an HF directory or a
// config.json (or a .gguf, whose metadata gives the config) and no tensor is read.
Result<LlamaWeights> load_llama_weights(const std::string& model_path, gpu::Backend& backend,
                                        const WeightLoadOptions& options = {});

}  // namespace pagoda::model
