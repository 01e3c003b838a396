// Architecture: the small description of one decoder-only model family that
// drives the single forward pass (model/llama_model.hpp), the config readers
// (model/model_config.hpp) and the weight loader (model/llama_weights.hpp).
// Adding a family adds a row to the table in architecture.cpp (and its
// tests), not a second copy of the forward.
//
// Every supported family is a pre-norm decoder: per layer
//   x += attn(norm_attn(x));  x += mlp(norm_ffn(x))
// with RMSNorm (weight only, no offset), a gated SiLU MLP (down(silu(gate) *
// up)), RoPE on every head dimension, full attention in every layer and no
// logit soft-cap. What differs, and is described here:
//  - the attention projections' biases (qkv_bias, o_bias_with_attention_bias);
//  - per-head RMSNorm of q and k before RoPE (qk_norm, Qwen3);
//  - whether llama.cpp's converter permuted the GGUF Q/K rows (then RoPE pairs
//    (2i, 2i + 1); see ModelConfig's RoPE pairing rule);
//  - transformers' config-class defaults for absent config.json fields;
//  - the tensor names, in GGUF and in HF safetensors (one shared table: the
//    families name their tensors alike), and whether q/k/v and gate/up come
//    fused in one tensor each (Phi-3: self_attn.qkv_proj / attn_qkv and
//    mlp.gate_up_proj / ffn_up, loaded as they are).
// Gemma 2 and Gemma 3 (text) add a few switches (gemma-style rows):
//  - post_norms: "sandwich" norms: the attention output and the MLP output
//    each go through their own RMSNorm before the residual add
//    (post_attention_layernorm / post_attention_norm, post_feedforward_
//    layernorm / post_ffw_norm), and the MLP's input norm is named
//    pre_feedforward_layernorm (HF; GGUF: ffn_norm as usual);
//  - norm_add_one: the HF norm weights w are offsets, the norm multiplies by
//    (1 + w). The loader adds 1 to every HF norm weight (also q/k norms) at
//    load, so the forward's rms_norm is the usual one; llama.cpp's converter
//    already added 1 when writing the GGUF (its norms are used as stored);
//  - gelu_tanh: the gated MLP is GeGLU, down(gelu_tanh(gate) * up);
//  - embed_scale: the token embedding is multiplied by sqrt(hidden) (fp32);
//  - gguf_swa_pattern: llama.cpp's default sliding-window layer pattern for
//    the GGUF architecture (layer l is windowed when (l + 1) % pattern != 0:
//    2 for gemma2, 6 for gemma3), used when the file has no
//    attention.sliding_window_pattern key.
// Soft-caps, the window, query_pre_attn_scalar and Gemma 3's local RoPE base
// are config values (ModelConfig), read with these families' defaults.
// Mixture-of-experts families (moe_names, model/moe_ffn.hpp): the MLP is a
// router and E experts. GGUF names (llama.cpp, every family alike):
// blk.N.ffn_gate_inp [E, H] (the router) and the 3-D blk.N.ffn_gate_exps /
// ffn_up_exps [E, Ie, H], ffn_down_exps [E, H, Ie] (row-major, experts
// outermost); Mixtral converts as GGUF "llama" with expert_count > 0. HF
// names, one tensor per expert e: Mixtral block_sparse_moe.gate and
// block_sparse_moe.experts.e.{w1 (gate), w3 (up), w2 (down)}; Qwen3-MoE
// mlp.gate and mlp.experts.e.{gate_proj, up_proj, down_proj}.
//
// Thread-safety: the table is immutable; every function is reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::model {

// The role of one tensor in the forward pass.
enum class TensorRole {
  kEmbed, kAttnNorm, kQ, kK, kV, kQBias, kKBias, kVBias, kO, kOBias,
  kQNorm, kKNorm,  // per-head q/k norms [head_dim] (qk_norm)
  kFfnNorm, kGate, kUp, kDown, kFinalNorm, kOutput,
  kQkv,     // fused q|k|v rows [(Hq + 2 Hk) D, H] (fused_qkv)
  kGateUp,  // fused gate|up rows [2 I, H], gate first (fused_gate_up)
  kPostAttnNorm, kPostFfnNorm,  // [H] each (post_norms)
  kRouter,  // [E, H] (MoE)
  kExpGate, kExpUp, kExpDown  // GGUF [E, Ie, H], [E, Ie, H], [E, H, Ie]; HF per expert
};

// How an MoE family names its HF tensors (kNone: a dense family).
enum class MoeNames : uint8_t { kNone, kMixtral, kQwen };

struct Architecture {
  const char* name;       // ModelConfig::architecture and HF model_type
  const char* gguf_name;  // general.architecture, or nullptr (HF only, e.g. mistral)
  bool qkv_bias;          // q/k/v projections always carry biases (qwen2)
  // config.json's attention_bias also puts a bias on o_proj (Llama, Mistral).
  bool o_bias_with_attention_bias;
  bool qk_norm;           // RMSNorm of each head's q and k (weights [head_dim]) before RoPE
  bool gguf_qk_permuted;  // llama.cpp's converter permuted attn_q / attn_k rows
  // transformers' defaults of the config class for absent fields.
  int32_t hf_default_context;  // max_position_embeddings
  int32_t hf_default_bos;      // bos_token_id (-1: none)
  int32_t hf_default_eos;      // eos_token_id (-1: none)
  int32_t hf_default_head_dim;  // head_dim (0: hidden_size / num_attention_heads)
  // The checkpoint stores q|k|v as one tensor (kQkv) and gate|up as one
  // (kGateUp), in the row order the forward's fused weights use (Phi-3).
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // Gemma (see above).
  bool post_norms = false;
  bool norm_add_one = false;
  bool gelu_tanh = false;
  bool embed_scale = false;
  int32_t gguf_swa_pattern = 0;  // 0: no windowed layers by default
  // transformers' Gemma defaults for absent config.json fields (0: none).
  double hf_default_attn_softcap = 0, hf_default_final_softcap = 0;
  int32_t hf_default_sliding_window = 0;
  int32_t hf_default_swa_pattern = 0;  // layer l windowed when (l + 1) % pattern != 0
  MoeNames moe_names = MoeNames::kNone;  // mixture of experts in every layer
};

// The description of an HF model_type / a GGUF general.architecture; nullptr
// when unsupported.
const Architecture* find_hf_architecture(std::string_view model_type);
const Architecture* find_gguf_architecture(std::string_view gguf_name);
// The description of ModelConfig::architecture (an HF name); nullptr when unknown.
const Architecture* find_architecture(std::string_view name);

// "llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, mixtral, qwen3_moe" (HF) /
// "llama, qwen2, qwen3, phi3, gemma2, gemma3, qwen3moe" (GGUF), for errors.
std::string supported_hf_architectures();
std::string supported_gguf_architectures();

// The tensor's name in a GGUF file (gguf) or in HF safetensors; `layer` is
// ignored for the model-level roles (embedding, final norm, output).
std::string tensor_name(const Architecture& arch, bool gguf, TensorRole role, int32_t layer);

// HF: the tensor of expert `expert` of an MoE role (kExpGate, kExpUp,
// kExpDown) in layer `layer`; the GGUF name (expert ignored) for gguf.
std::string expert_tensor_name(const Architecture& arch, bool gguf, TensorRole role, int32_t layer,
                               int32_t expert);

}  // namespace pagoda::model
