// ModelConfig: the hyper-parameters of a Llama-family model (llama, mistral,
// qwen2, qwen3; SmolLM2 is llama), read from GGUF metadata or a HuggingFace
// config.json. What distinguishes the families (biases, q/k norms, GGUF Q/K
// permutation, config defaults, tensor names) is their description in
// model/architecture.hpp.
//
// RoPE pairing (rope_interleaved) — which elements of a head are rotated together:
//  - HF checkpoints (safetensors) of every supported family use the NeoX /
//    rotate_half pairing: element i pairs with i + head_dim/2.
//  - llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) permutes
//    the rows of attn_q and attn_k of *llama*-architecture models (incl. Mistral
//    and SmolLM2, which it converts as "llama"): within each head it reorders
//    rows from [first half, second half] to interleaved pairs. llama.cpp then
//    runs those with LLAMA_ROPE_TYPE_NORM: element 2i pairs with 2i + 1.
//  - qwen2 and qwen3 GGUF files are not permuted; llama.cpp uses LLAMA_ROPE_TYPE_NEOX.
//  Rule: rope_interleaved = (source is GGUF && Architecture::gguf_qk_permuted).
//  Both pairings use frequency theta_i = rope_theta^(-2i/head_dim) for pair i.
//
// Rope scaling: kLinear divides positions by `factor`. kLlama3 is HF's
// "llama3" rope_type (factor, low/high_freq_factor, original_max_position_
// embeddings). llama.cpp does not store those parameters in GGUF: it stores the
// resulting per-pair frequency divisors as the F32 tensor `rope_freqs.weight`
// ([head_dim/2]); such files get kFreqFactors (divide theta_i by rope_freqs[i]).
//
// Longrope (HF rope_type "longrope", or its older name "su"; Phi-3, Phi-4-mini),
// as transformers 5 computes it (modeling_rope_utils._compute_longrope_
// parameters and dynamic_rope_update's longrope_frequency_update):
//  - inv_freq[i] = 1 / (ext[i] * theta^(2i / rotary_dim)), with ext =
//    long_factor when the forward call's sequence length, max(position) + 1,
//    exceeds original_max_position_embeddings, short_factor otherwise. The
//    choice is made per forward call for all its tokens (transformers: per
//    batch; here per engine step, over every sequence of the step), so a
//    prompt longer than the original context prefilled in one step uses
//    long_factor at every position, while a chunked prefill or a decode that
//    crosses the threshold keeps the short-factor keys already in the cache,
//    as transformers' generate does.
//  - cos and sin are multiplied by attention_factor: the config's
//    "attention_factor", else sqrt(1 + ln(factor) / ln(original_max)) with
//    factor = "factor", else max_position_embeddings / original_max (1 when
//    factor <= 1). GGUF (llama.cpp): rope_factors_long.weight /
//    rope_factors_short.weight [rotary_dim / 2] and
//    `<arch>.rope.scaling.attn_factor`.
// Partial rotary (partial_rotary_factor, GGUF rope.dimension_count <
// head_dim): only the first rotary_dim elements of a head are rotated (NeoX
// pairing i, i + rotary_dim / 2 within them); the rest pass unchanged.
//
// Gemma 2 / Gemma 3 (text): attention scores s = scale * q.k become
// cap * tanh(s / cap) (attn_logit_softcap, Gemma 2), the logits likewise
// (final_logit_softcap); scale = 1 / sqrt(query_pre_attn_scalar). Windowed
// layers (sliding_layers[l]) let the row at position p attend only keys at
// positions > p - sliding_window (transformers' sliding_window_overlay,
// llama.cpp's LLAMA_SWA_TYPE_STANDARD); the other families' windows (Mistral,
// Mixtral, Phi-3, Qwen) come from config.json as model/
// sliding_window_config.cpp says. Gemma 3's windowed layers rotate with
// rope_local_theta and no scaling; its global layers with rope_theta and the
// rope scaling. HF: query_pre_attn_scalar, sliding_window, layer_types (else
// the family's pattern, sliding_window_pattern), attn_logit_softcapping,
// final_logit_softcapping, rope_local_base_freq or rope_parameters
// {"full_attention": {...}, "sliding_attention": {...}} (transformers 5).
// GGUF (llama.cpp): <arch>.attn_logit_softcapping, .final_logit_softcapping,
// .attention.sliding_window, .attention.sliding_window_pattern (an integer
// or a bool per layer; else gemma2: 2, gemma3: 6, llama.cpp's defaults; a
// gemma2 file without a window key gets 4096, as in llama.cpp), and for
// gemma3 .rope.freq_base_swa (else the global base); the converter writes no query_pre_attn_scalar, so
// <arch>.attention.scale is honoured when present (1 / sqrt(scalar)) and
// otherwise llama.cpp's rule applies: hidden / heads for the 27B models (46
// layers gemma2, 62 layers gemma3), head_dim for every other size.
//
// Thread-safety: the functions are reentrant; a ModelConfig is a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/result.hpp"
#include "model/gguf_file.hpp"

namespace pagoda::model {

enum class RopeScalingType { kNone, kLinear, kLlama3, kFreqFactors, kLongRope };
// "none", "linear", "llama3", "freq_factors", "longrope"
const char* rope_scaling_name(RopeScalingType type);

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                           // kLinear, kLlama3
  double low_freq_factor = 1.0;                  // kLlama3
  double high_freq_factor = 1.0;                 // kLlama3
  int64_t original_max_position_embeddings = 0;  // kLlama3, kLongRope (0 when unknown)
  // kLongRope: per-pair divisors of theta^(-2i / rotary_dim), [rotary_dim / 2]
  // each, and the factor that multiplies cos/sin.
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
};

struct ModelConfig {
  std::string architecture;  // an Architecture's name: "llama", "mistral", "qwen2", "qwen3"
  int32_t num_layers = 0;
  int32_t hidden_size = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // may differ from hidden_size / num_heads (explicit head_dim)
  int32_t rotary_dim = 0;  // rotated elements of a head (even, <= head_dim); 0: head_dim
  int32_t intermediate_size = 0;
  int32_t vocab_size = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;    // lm_head shares token_embd
  int64_t max_context = 0;             // max_position_embeddings / GGUF context_length
  int32_t bos_token_id = -1;           // -1 when the model has none
  std::vector<int32_t> eos_token_ids;  // every token that ends generation
  bool attention_bias = false;         // q/k/v projections have biases (qwen2)
  bool qk_norm = false;                // RMSNorm of each head's q and k before RoPE (qwen3)
  bool rope_interleaved = false;       // see the RoPE pairing rule above
  // Gemma (see above; off for the other families).
  double attn_logit_softcap = 0.0;     // 0: off
  double final_logit_softcap = 0.0;    // 0: off
  double query_pre_attn_scalar = 0.0;  // attention scale 1 / sqrt(this); 0: head_dim
  int32_t sliding_window = 0;          // > 0 when some layer is windowed
  std::vector<bool> sliding_layers;    // [num_layers] windowed layers, or empty (none)
  double rope_local_theta = 0.0;       // windowed layers' RoPE base, unscaled; 0: the global rope
  // Values the loader clamped or ignored rather than refusing the model (each
  // also logged to stderr), e.g. a context length above validate_config's
  // bound, an eos id of generation_config.json outside the vocabulary.
  std::vector<std::string> notes;
  // Mixture of experts (Mixtral, Qwen3-MoE; 0 experts: a dense MLP). Every
  // layer's MLP is num_experts SiLU-gated experts of expert_intermediate_size,
  // of which a router (logits = x W_router^T, [E, H]) picks num_experts_used
  // per token: p = softmax over all E logits, the top k of p, divided by
  // their sum when moe_norm_topk_prob (Mixtral always; Qwen3-MoE when
  // norm_topk_prob; llama.cpp's llama and qwen3moe graphs always, unless the
  // GGUF's <arch>.expert_weights_norm says false). HF: num_local_experts /
  // num_experts, num_experts_per_tok, intermediate_size (Mixtral) /
  // moe_intermediate_size (Qwen3-MoE), norm_topk_prob; GGUF: <arch>.
  // expert_count, .expert_used_count, .expert_feed_forward_length (else
  // .feed_forward_length). See model/moe_ffn.hpp.
  int32_t num_experts = 0;
  int32_t num_experts_used = 0;
  int32_t expert_intermediate_size = 0;
  bool moe_norm_topk_prob = false;
};

// From GGUF metadata (keys `<arch>.block_count`, `.embedding_length`,
// `.attention.head_count[_kv]`, `.feed_forward_length`, `.rope.freq_base`,
// `.attention.layer_norm_rms_epsilon`, `.context_length`,
// `.rope.dimension_count`, `.rope.scaling.*`, `.vocab_size`; tokenizer.ggml.*
// for bos/eos/eot/eom). tie_word_embeddings = no `output.weight` tensor;
// attention_bias = Architecture::qkv_bias or a `blk.0.attn_q.bias` tensor.
Result<ModelConfig> config_from_gguf(const GgufFile& gguf);

// From a HuggingFace config.json (model_type llama / mistral / qwen2 / qwen3). Missing
// optional fields take the transformers defaults of that model type.
Result<ModelConfig> config_from_hf_json(const std::string& config_json_path);

// Adds the eos ids of a generation_config.json (when the file exists) to `c`:
// an integer or a list; an entry that is not a token id of the vocabulary is
// ignored with a note. A file that is not JSON is an Error.
Result<void> merge_generation_config(const std::string& path, ModelConfig& config);

// model_path: a .gguf file, an HF model directory (config.json; eos ids of
// generation_config.json, an integer or a list, are added when present), or a
// config.json path. JSON files may hold integers of any size (they read as
// floats beyond 64 bits, model/json_file.hpp); a context length above 2^21 is
// clamped to it with a note (ModelConfig::notes).
Result<ModelConfig> load_model_config(const std::string& model_path);

// Checks the invariants every loader relies on: positive sizes, num_heads
// divides hidden_size, num_kv_heads divides num_heads, even head_dim,
// positive rope_theta and rms_norm_eps, non-negative soft-caps and window,
// sliding_layers empty or one per layer (then a positive window), and upper
// bounds far above real
// models (1024 layers, hidden 65536, 1024 heads, head_dim 1024,
// intermediate 2^20, vocabulary 2^22, context 2^21; MoE: 1 <= experts used
// <= experts <= 1024, a positive expert size <= 2^20) so that absurd values
// are an Error, not an overflow or a huge allocation. `source` prefixes
// error messages.
Result<void> validate_config(const ModelConfig& config, const std::string& source);

}  // namespace pagoda::model
