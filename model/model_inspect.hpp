// model_inspect: a JSON summary of a model file or directory, for the CLI's
// `pagoda inspect`.
//
// Output (pretty-printed object, 2-space indent):
//   format ("gguf" | "safetensors"), path, file_size (bytes; sum of shards),
//   architecture, num_layers, hidden_size, num_heads, num_kv_heads, head_dim,
//   intermediate_size, vocab_size, rope_theta, rope_scaling {type, factor,
//   low_freq_factor, high_freq_factor, original_max_position_embeddings},
//   rms_norm_eps, tie_word_embeddings, max_context, bos_token_id (null when
//   none), eos_token_ids, attention_bias, rope_interleaved, tensor_count,
//   tensors_by_dtype {"Q4_1": 210, ...}, quant_mix (the types by tensor
//   group, a group being the tensor name without its layer prefix and
//   ".weight": {"token_embd": "Q8_0 x1", "attn_q": "Q4_K x30",
//   "ffn_down": "Q6_K x15, Q4_K x15", ...}, groups in file order, the most
//   frequent type first; HF's per-expert tensors "mlp.experts.N.x" form one
//   group "mlp.experts.x"); for GGUF also gguf_version and general_name (null
//   when absent); for mixture-of-experts models "moe": {num_experts,
//   num_experts_used, expert_intermediate_size, norm_topk_prob,
//   expert_layout (text), expert_bytes, other_bytes (file bytes of the
//   expert tensors and of the rest), decode_bytes_per_token (the weight
//   bytes a one-token decode step reads: every non-expert tensor, the token
//   embedding only when it is the tied lm_head, and k of E experts per
//   layer)}.
// Strings are escaped (quotes, control characters; invalid UTF-8 becomes
// U+FFFD), so the output is valid JSON whatever the file contains.
//
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <string_view>

#include "gpu/result.hpp"

namespace pagoda::model {

// model_path: a .gguf file, an HF model directory, or a .safetensors file
// (its config.json is read from the same directory).
Result<std::string> inspect_model_json(const std::string& model_path);

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace pagoda::model
