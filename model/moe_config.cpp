// Mixture-of-experts settings of a ModelConfig (Mixtral, Qwen3-MoE) from
// GGUF metadata and from config.json (see the MoE notes in model_config.hpp).
#include <string>

#include "model/architecture.hpp"
#include "model/config_limits.hpp"
#include "model/json_fields.hpp"

namespace pagoda::model {

namespace {

// An integer key in [0, 2^31) or `fallback` when absent.
Result<int32_t> int_or(const GgufFile& g, const std::string& key, int32_t fallback) {
  if (!g.find(key)) return fallback;
  auto v = g.get_int(key);
  if (!v) return v.error();
  if (*v < 0 || *v > kInt32Max)
    return make_error(g.path() + ": metadata key '" + key + "' is out of range");
  return int32_t(*v);
}

}  // namespace

// The MoE fields (see model_config.hpp); the message only.
Result<void> validate_moe_fields(const ModelConfig& c) {
  if (c.num_experts == 0 && c.num_experts_used == 0) return {};
  if (c.num_experts < 1 || c.num_experts > 1024)
    return make_error("num_experts must be in [1, 1024]");
  if (c.num_experts_used < 1 || c.num_experts_used > c.num_experts) {
    return make_error("num_experts_used " + std::to_string(c.num_experts_used) +
                      " must be in [1, num_experts " + std::to_string(c.num_experts) + "]");
  }
  if (c.expert_intermediate_size <= 0 || c.expert_intermediate_size > kMaxIntermediate) {
    return make_error("expert_intermediate_size must be in [1, 2^20]");
  }
  return {};
}

// <arch>.expert_count, .expert_used_count, .expert_feed_forward_length (else
// feed_forward_length: llama's Mixtral files), .expert_weights_norm (else
// true: llama.cpp's llama and qwen3moe graphs renormalise the top k).
Result<void> read_gguf_moe(const GgufFile& g, const std::string& p, const Architecture& arch,
                           ModelConfig& c) {
  auto experts = int_or(g, p + "expert_count", 0);
  if (!experts) return experts.error();
  if (*experts == 0) {
    if (arch.moe_names != MoeNames::kNone) {
      return make_error(g.path() + ": " + p + "expert_count is missing or 0 (" +
                        std::string(arch.name) + " is a mixture of experts)");
    }
    return {};
  }
  if (!g.find(p + "expert_used_count")) {
    return make_error(g.path() + ": metadata key '" + p + "expert_used_count' is missing");
  }
  auto used = int_or(g, p + "expert_used_count", 0);
  if (!used) return used.error();
  auto ff = int_or(g, p + "expert_feed_forward_length", c.intermediate_size);
  if (!ff) return ff.error();
  c.num_experts = *experts;
  c.num_experts_used = *used;
  c.expert_intermediate_size = *ff;
  c.moe_norm_topk_prob = true;
  if (const GgufValue* v = g.find(p + "expert_weights_norm"); v != nullptr) {
    if (v->type != GgufValueType::kBool)
      return make_error(g.path() + ": " + p + "expert_weights_norm is not a bool");
    c.moe_norm_topk_prob = v->u != 0;
  }
  return {};
}

// Mixtral: num_local_experts, num_experts_per_tok, intermediate_size (each
// expert's), always renormalised. Qwen3-MoE: num_experts (transformers 5
// saves it as num_local_experts), num_experts_per_tok, moe_intermediate_size,
// norm_topk_prob (default false); every layer sparse (decoder_sparse_step 1,
// no mlp_only_layers: dense layers among MoE ones are not supported).
Result<void> read_hf_moe(const JsonFields& f, const Architecture& arch, ModelConfig& c) {
  if (arch.moe_names == MoeNames::kNone) return {};
  const bool mixtral = arch.moe_names == MoeNames::kMixtral;
  simdjson::dom::element el;
  const char* count_key =
      !mixtral && f.lookup("num_experts", el) ? "num_experts" : "num_local_experts";
  auto experts = f.int32_or(count_key, mixtral ? 8 : 128);
  auto used = f.int32_or("num_experts_per_tok", mixtral ? 2 : 8);
  auto size =
      mixtral ? Result<int32_t>(c.intermediate_size) : f.int32_or("moe_intermediate_size", 768);
  auto norm = f.boolean_or("norm_topk_prob", mixtral);
  auto step = f.int32_or("decoder_sparse_step", 1);
  if (!experts) return experts.error();
  if (!used) return used.error();
  if (!size) return size.error();
  if (!norm) return norm.error();
  if (!step) return step.error();
  if (*step != 1)
    return make_error(
        f.path() + ": decoder_sparse_step != 1 (dense layers between MoE ones) is not supported");
  if (f.lookup("mlp_only_layers", el)) {
    simdjson::dom::array arr;
    if (el.get(arr) == simdjson::SUCCESS && arr.size() > 0) {
      return make_error(f.path() +
                        ": mlp_only_layers (dense layers between MoE ones) is not supported");
    }
  }
  c.num_experts = *experts;
  c.num_experts_used = *used;
  c.expert_intermediate_size = *size;
  c.moe_norm_topk_prob = mixtral || *norm;
  return {};
}

}  // namespace pagoda::model
