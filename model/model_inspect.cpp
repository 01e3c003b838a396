#include "model/model_inspect.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "model/dequant.hpp"
#include "model/gguf_file.hpp"
#include "model/json_value.hpp"
#include "model/model_config.hpp"
#include "model/safetensors_file.hpp"

namespace pagoda::model {

namespace {

namespace fs = std::filesystem;

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {  // 100000.0, not 1e+05
    return std::to_string(static_cast<int64_t>(v)) + ".0";
  }
  char buf[64];
  return std::string(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}

std::string boolean(bool v) { return v ? "true" : "false"; }

// A JSON object under construction: keys in insertion order, raw JSON values.
class JsonObject {
 public:
  JsonObject& add(std::string key, std::string raw) {
    fields_.emplace_back(std::move(key), std::move(raw));
    return *this;
  }
  JsonObject& add(std::string key, int64_t v) { return add(std::move(key), std::to_string(v)); }
  std::string render(int indent) const {
    if (fields_.empty()) return "{}";
    const std::string pad(indent + 2, ' ');
    std::string out = "{\n";
    for (size_t i = 0; i < fields_.size(); ++i) {
      out += pad + json_quote(fields_[i].first) + ": " + fields_[i].second;
      out += i + 1 < fields_.size() ? ",\n" : "\n";
    }
    return out + std::string(indent, ' ') + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

void add_config(JsonObject& out, const ModelConfig& c) {
  const RopeScaling& rs = c.rope_scaling;
  JsonObject scaling;
  scaling.add("type", json_quote(rope_scaling_name(rs.type)))
      .add("factor", number(rs.factor))
      .add("low_freq_factor", number(rs.low_freq_factor))
      .add("high_freq_factor", number(rs.high_freq_factor))
      .add("original_max_position_embeddings", rs.original_max_position_embeddings);
  std::string eos = "[";
  for (size_t i = 0; i < c.eos_token_ids.size(); ++i) {
    eos += (i ? ", " : "") + std::to_string(c.eos_token_ids[i]);
  }
  eos += "]";
  out.add("architecture", json_quote(c.architecture))
      .add("num_layers", c.num_layers)
      .add("hidden_size", c.hidden_size)
      .add("num_heads", c.num_heads)
      .add("num_kv_heads", c.num_kv_heads)
      .add("head_dim", c.head_dim)
      .add("intermediate_size", c.intermediate_size)
      .add("vocab_size", c.vocab_size)
      .add("rope_theta", number(c.rope_theta))
      .add("rope_scaling", scaling.render(2))
      .add("rms_norm_eps", number(c.rms_norm_eps))
      .add("tie_word_embeddings", boolean(c.tie_word_embeddings))
      .add("max_context", c.max_context)
      .add("bos_token_id", c.bos_token_id >= 0 ? std::to_string(c.bos_token_id) : "null")
      .add("eos_token_ids", eos)
      .add("attention_bias", boolean(c.attention_bias))
      .add("rope_interleaved", boolean(c.rope_interleaved))
      .add("sliding_window", c.sliding_window)  // 0: none
      .add("windowed_layers", int64_t(std::count(c.sliding_layers.begin(), c.sliding_layers.end(), true)));
}

std::string dtype_counts(const std::map<std::string, int64_t>& counts) {
  JsonObject o;
  for (const auto& [name, n] : counts) o.add(name, n);
  return o.render(2);
}

// The group of a tensor: its name without the layer prefix ("blk.N." in
// GGUF, "model.layers.N." in HF) and without a trailing ".weight"
// ("blk.3.attn_q.weight" -> "attn_q", "blk.3.attn_q.bias" -> "attn_q.bias").
std::string tensor_group(std::string_view name) {
  for (std::string_view prefix : {std::string_view("blk."), std::string_view("model.layers.")}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    const size_t dot = name.find('.', prefix.size());
    if (dot != std::string_view::npos) name.remove_prefix(dot + 1);
    break;
  }
  constexpr std::string_view kWeight = ".weight";
  if (name.size() > kWeight.size() && name.substr(name.size() - kWeight.size()) == kWeight) {
    name.remove_suffix(kWeight.size());
  }
  // HF experts: "mlp.experts.5.gate_proj" -> "mlp.experts.gate_proj" (one group for all E).
  std::string out(name);
  if (const size_t at = out.find("experts."); at != std::string::npos) {
    size_t end = at + 8;
    while (end < out.size() && out[end] >= '0' && out[end] <= '9') ++end;
    if (end > at + 8 && end < out.size() && out[end] == '.') out.erase(at + 8, end + 1 - (at + 8));
  }
  return out;
}

// MoE models: where the bytes are. A tensor is an expert's when its name has
// "_exps." (GGUF's 3-D tensors) or ".experts." (HF's per-expert tensors).
struct ExpertBytes {
  uint64_t experts = 0, other = 0, token_embd = 0;
  bool has_output = false;
  void add(std::string_view name, uint64_t bytes) {
    const bool expert = name.find("_exps.") != std::string_view::npos ||
                        name.find(".experts.") != std::string_view::npos;
    (expert ? experts : other) += bytes;
    if (name == "token_embd.weight" || name == "model.embed_tokens.weight") token_embd += bytes;
    if (name == "output.weight" || name == "lm_head.weight") has_output = true;
  }
  // {"num_experts": E, ..., "expert_bytes", "other_bytes",
  //  "decode_bytes_per_token"}: a one-token decode step reads every non-expert
  // weight (the token embedding only as the tied lm_head: else one row) and
  // k of the E experts of each layer.
  std::string render(const ModelConfig& c, bool gguf) const {
    const uint64_t dense = other - (has_output ? token_embd : 0);
    const uint64_t per_token = dense + experts / uint64_t(c.num_experts) * uint64_t(c.num_experts_used);
    JsonObject o;
    o.add("num_experts", c.num_experts)
        .add("num_experts_used", c.num_experts_used)
        .add("expert_intermediate_size", c.expert_intermediate_size)
        .add("norm_topk_prob", boolean(c.moe_norm_topk_prob))
        .add("expert_layout",
             json_quote(gguf ? "per layer ffn_gate_exps, ffn_up_exps [E, Ie, H] and ffn_down_exps [E, H, Ie] "
                               "(split per expert at load), router ffn_gate_inp [E, H]"
                             : "per layer one tensor per expert and projection, router [E, H]"))
        .add("expert_bytes", int64_t(experts))
        .add("other_bytes", int64_t(other))
        .add("decode_bytes_per_token", int64_t(per_token));
    return o.render(2);
  }
};

// Tensor types per group, groups in the file's order:
// {"attn_q": "Q4_K x30", "ffn_down": "Q6_K x15, Q4_K x15", "output": "Q6_K x1"}
// (within a group the most frequent type first, ties by name).
class QuantMix {
 public:
  void add(std::string_view tensor, const std::string& type) {
    const std::string g = tensor_group(tensor);
    auto it = index_.find(g);
    if (it == index_.end()) {
      it = index_.emplace(g, groups_.size()).first;
      groups_.push_back({g, {}});
    }
    ++groups_[it->second].second[type];
  }
  std::string render() const {
    JsonObject o;
    for (const auto& [group, counts] : groups_) {
      std::vector<std::pair<std::string, int64_t>> v(counts.begin(), counts.end());
      std::stable_sort(v.begin(), v.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
      std::string text;
      for (const auto& [type, n] : v) text += (text.empty() ? "" : ", ") + type + " x" + std::to_string(n);
      o.add(group, json_quote(text));
    }
    return o.render(2);
  }

 private:
  std::map<std::string, size_t> index_;
  std::vector<std::pair<std::string, std::map<std::string, int64_t>>> groups_;
};

Result<std::string> inspect_gguf(const std::string& path) {
  auto g = GgufFile::open(path);
  if (!g) return g.error();
  auto config = config_from_gguf(*g);
  if (!config) return config.error();
  std::map<std::string, int64_t> counts;
  QuantMix mix;
  ExpertBytes bytes;
  for (const GgufTensorInfo& t : g->tensors()) {
    ++counts[ggml_type_name(t.raw_type)];
    mix.add(t.name, ggml_type_name(t.raw_type));
    bytes.add(t.name, t.nbytes);
  }
  const GgufValue* name = g->find("general.name");
  JsonObject out;
  out.add("format", json_quote("gguf"))
      .add("path", json_quote(path))
      .add("file_size", static_cast<int64_t>(g->file_size()))
      .add("gguf_version", static_cast<int64_t>(g->version()))
      .add("general_name",
           name && name->type == GgufValueType::kString ? json_quote(name->s) : "null");
  add_config(out, *config);
  out.add("tensor_count", static_cast<int64_t>(g->tensors().size()))
      .add("tensors_by_dtype", dtype_counts(counts))
      .add("quant_mix", mix.render());
  if (config->num_experts > 0) out.add("moe", bytes.render(*config, true));
  return out.render(0) + "\n";
}

Result<std::string> inspect_safetensors(const std::string& path) {
  auto model = SafetensorsModel::open(path);
  if (!model) return model.error();
  std::error_code ec;
  const std::string config_path =
      fs::is_directory(path, ec) ? path : (fs::path(path).parent_path() / "config.json").string();
  auto config = load_model_config(config_path);
  if (!config) return config.error();
  std::map<std::string, int64_t> counts;
  QuantMix mix;
  ExpertBytes bytes;
  for (const StTensor* t : model->tensors()) {
    ++counts[st_dtype_name(t->dtype)];
    mix.add(t->name, st_dtype_name(t->dtype));
    bytes.add(t->name, t->nbytes);
  }
  JsonObject out;
  out.add("format", json_quote("safetensors"))
      .add("path", json_quote(path))
      .add("file_size", static_cast<int64_t>(model->total_file_size()));
  add_config(out, *config);
  out.add("tensor_count", static_cast<int64_t>(model->tensor_count()))
      .add("tensors_by_dtype", dtype_counts(counts))
      .add("quant_mix", mix.render());
  if (config->num_experts > 0) out.add("moe", bytes.render(*config, false));
  return out.render(0) + "\n";
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  append_json_string(out, s, "\\ufffd");
  return out;
}

Result<std::string> inspect_model_json(const std::string& model_path) {
  std::error_code ec;
  const fs::path p(model_path);
  if (fs::is_directory(p, ec) || p.extension() == ".safetensors") {
    return inspect_safetensors(model_path);
  }
  return inspect_gguf(model_path);
}

}  // namespace pagoda::model
