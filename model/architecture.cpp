// The per-architecture descriptions (see architecture.hpp).
#include "model/architecture.hpp"

namespace pagoda::model {

namespace {

// transformers' defaults: LlamaConfig (context 2048, bos 1, eos 2),
// MistralConfig (4096 * 32, bos 1, eos 2), Qwen2Config (32768, no bos/eos
// ids), Qwen3Config (32768, no bos/eos ids, head_dim 128), Phi3Config (its row).
constexpr Architecture kArchitectures[] = {
    // name      gguf      qkv_b  o_b   qk_n   perm   ctx     bos eos head_dim
    {"llama",   "llama",  false, true,  false, true,  2048,   1,  2,  0},
    {"mistral", nullptr,  false, true,  false, true,  131072, 1,  2,  0},
    {"qwen2",   "qwen2",  true,  false, false, false, 32768,  -1, -1, 0},
    {"qwen3",   "qwen3",  false, true,  true,  false, 32768,  -1, -1, 128},
    // Phi3Config: context 4096, bos 1, eos 32000; fused qkv and gate_up.
    {"phi3",    "phi3",   false, false, false, false, 4096,   1, 32000, 0, true, true},
    // Gemma2Config: context 8192, bos 2, eos 1, head_dim 256, soft-caps 50 / 30,
    // window 4096 on every other layer (0, 2, ...).
    {"gemma2",  "gemma2", false, false, false, false, 8192,   2,  1,  256, false, false,
     true, true, true, true, 2, 50.0, 30.0, 4096, 2},
    // Gemma3TextConfig (model_type gemma3_text): context 131072, bos 2, eos 1,
    // head_dim 256, q/k norms, no soft-caps, window 4096 on five of every six layers.
    {"gemma3_text", "gemma3", false, false, true, false, 131072, 2, 1, 256, false, false,
     true, true, true, true, 6, 0.0, 0.0, 4096, 6},
    // MixtralConfig: context 4096 * 32, bos 1, eos 2 (GGUF: "llama" + experts).
    {"mixtral", nullptr, false, true, false, true, 131072, 1, 2, 0, false, false,
     false, false, false, false, 0, 0.0, 0.0, 0, 0, MoeNames::kMixtral},
    // Qwen3MoeConfig: context 32768, no bos/eos ids, q/k norms.
    {"qwen3_moe", "qwen3moe", false, true, true, false, 32768, -1, -1, 0, false, false,
     false, false, false, false, 0, 0.0, 0.0, 0, 0, MoeNames::kQwen},
};

struct RoleNames {
  const char* gguf;  // after "blk.N." for layer roles
  const char* hf;    // after "model.layers.N." for layer roles
  bool layer;
};

// The names every supported family uses, indexed by TensorRole.
constexpr RoleNames kNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight", false},           // kEmbed
    {"attn_norm.weight", "input_layernorm.weight", true},                // kAttnNorm
    {"attn_q.weight", "self_attn.q_proj.weight", true},                  // kQ
    {"attn_k.weight", "self_attn.k_proj.weight", true},                  // kK
    {"attn_v.weight", "self_attn.v_proj.weight", true},                  // kV
    {"attn_q.bias", "self_attn.q_proj.bias", true},                      // kQBias
    {"attn_k.bias", "self_attn.k_proj.bias", true},                      // kKBias
    {"attn_v.bias", "self_attn.v_proj.bias", true},                      // kVBias
    {"attn_output.weight", "self_attn.o_proj.weight", true},             // kO
    {"attn_output.bias", "self_attn.o_proj.bias", true},                 // kOBias
    {"attn_q_norm.weight", "self_attn.q_norm.weight", true},             // kQNorm
    {"attn_k_norm.weight", "self_attn.k_norm.weight", true},             // kKNorm
    {"ffn_norm.weight", "post_attention_layernorm.weight", true},        // kFfnNorm
    {"ffn_gate.weight", "mlp.gate_proj.weight", true},                   // kGate
    {"ffn_up.weight", "mlp.up_proj.weight", true},                       // kUp
    {"ffn_down.weight", "mlp.down_proj.weight", true},                   // kDown
    {"output_norm.weight", "model.norm.weight", false},                  // kFinalNorm
    {"output.weight", "lm_head.weight", false},                          // kOutput
    {"attn_qkv.weight", "self_attn.qkv_proj.weight", true},              // kQkv
    {"ffn_up.weight", "mlp.gate_up_proj.weight", true},                  // kGateUp
    {"post_attention_norm.weight", "post_attention_layernorm.weight", true},  // kPostAttnNorm
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", true},      // kPostFfnNorm
    {"ffn_gate_inp.weight", "mlp.gate.weight", true},                    // kRouter (Qwen)
    {"ffn_gate_exps.weight", "gate_proj.weight", true},                  // kExpGate (Qwen)
    {"ffn_up_exps.weight", "up_proj.weight", true},                      // kExpUp (Qwen)
    {"ffn_down_exps.weight", "down_proj.weight", true},                  // kExpDown (Qwen)
};
static_assert(std::size(kNames) == size_t(TensorRole::kExpDown) + 1);

bool expert_role(TensorRole role) {
  return role == TensorRole::kExpGate || role == TensorRole::kExpUp || role == TensorRole::kExpDown;
}

}  // namespace

const Architecture* find_hf_architecture(std::string_view model_type) {
  for (const Architecture& a : kArchitectures) {
    if (model_type == a.name) return &a;
  }
  return nullptr;
}

const Architecture* find_gguf_architecture(std::string_view gguf_name) {
  for (const Architecture& a : kArchitectures) {
    if (a.gguf_name != nullptr && gguf_name == a.gguf_name) return &a;
  }
  return nullptr;
}

const Architecture* find_architecture(std::string_view name) { return find_hf_architecture(name); }

std::string supported_hf_architectures() {
  std::string out;
  for (const Architecture& a : kArchitectures) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

std::string supported_gguf_architectures() {
  std::string out;
  for (const Architecture& a : kArchitectures) {
    if (a.gguf_name != nullptr) out += (out.empty() ? "" : ", ") + std::string(a.gguf_name);
  }
  return out;
}

std::string tensor_name(const Architecture& arch, bool gguf, TensorRole role, int32_t layer) {
  const RoleNames& n = kNames[size_t(role)];
  // Gemma's HF names: the MLP's input norm is pre_feedforward_layernorm
  // (post_attention_layernorm is the attention output's own norm there).
  const bool pre_ffn = arch.post_norms && !gguf && role == TensorRole::kFfnNorm;
  std::string base = pre_ffn ? "pre_feedforward_layernorm.weight" : gguf ? n.gguf : n.hf;
  if (!gguf && role == TensorRole::kRouter && arch.moe_names == MoeNames::kMixtral) {
    base = "block_sparse_moe.gate.weight";
  }
  if (!n.layer) return base;
  const std::string l = std::to_string(layer);
  return (gguf ? "blk." + l + "." : "model.layers." + l + ".") + base;
}

std::string expert_tensor_name(const Architecture& arch, bool gguf, TensorRole role, int32_t layer,
                               int32_t expert) {
  if (gguf || !expert_role(role)) return tensor_name(arch, gguf, role, layer);
  const std::string l = "model.layers." + std::to_string(layer) + ".";
  const std::string e = std::to_string(expert);
  if (arch.moe_names == MoeNames::kMixtral) {
    const char* w = role == TensorRole::kExpGate ? "w1" : role == TensorRole::kExpUp ? "w3" : "w2";
    return l + "block_sparse_moe.experts." + e + "." + w + ".weight";
  }
  return l + "mlp.experts." + e + "." + kNames[size_t(role)].hf;
}

}  // namespace pagoda::model
