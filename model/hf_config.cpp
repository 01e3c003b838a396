// ModelConfig from a HuggingFace directory's config.json and
// generation_config.json (see model_config.hpp).
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "model/architecture.hpp"
#include "model/config_limits.hpp"
#include "model/json_fields.hpp"
#include "model/json_file.hpp"
#include "model/model_config.hpp"

namespace pagoda::model {

namespace {

namespace fs = std::filesystem;

// ---- HF config.json ---------------------------------------------------------

// Loads and parses a JSON object file (integers beyond 64 bits read as floats,
// model/json_file.hpp). The object lives as long as `parser`.
Result<simdjson::dom::object> load_json_object(const std::string& path,
                                               simdjson::dom::parser& parser) {
  auto doc = load_json_file(path, parser);
  if (!doc) return doc.error();
  simdjson::dom::object obj;
  if (doc->get(obj) != simdjson::SUCCESS) return make_error(path + ": not a JSON object");
  return obj;
}

Result<void> read_hf_sizes(const JsonFields& f, const Architecture& arch, ModelConfig& c) {
  const std::pair<const char*, int32_t*> required[] = {{"num_hidden_layers", &c.num_layers},
                                                       {"hidden_size", &c.hidden_size},
                                                       {"num_attention_heads", &c.num_heads},
                                                       {"intermediate_size", &c.intermediate_size},
                                                       {"vocab_size", &c.vocab_size}};
  for (const auto& [key, out] : required) {
    auto v = f.int32(key);
    if (!v) return v.error();
    *out = *v;
  }
  auto kv = f.int32_or("num_key_value_heads", c.num_heads);
  if (!kv) return kv.error();
  c.num_kv_heads = *kv;
  const int32_t default_head_dim = arch.hf_default_head_dim > 0 ? arch.hf_default_head_dim
                                   : c.num_heads > 0             ? c.hidden_size / c.num_heads
                                                                 : 0;
  auto head_dim = f.int32_or("head_dim", default_head_dim);
  if (!head_dim) return head_dim.error();
  c.head_dim = *head_dim;
  auto ctx = f.int64_or("max_position_embeddings", arch.hf_default_context);
  if (!ctx) return ctx.error();
  c.max_context = clamp_context(*ctx, f.path(), c);
  auto eps = f.number_or("rms_norm_eps", 1e-6);
  if (!eps) return eps.error();
  c.rms_norm_eps = *eps;
  return {};
}

// Longrope (see model_config.hpp): the factor lists, the original context (the
// top-level field wins, as in transformers' standardize_rope_params) and the
// attention factor (explicit, or from factor / the context ratio).
Result<void> read_hf_longrope(const JsonFields& f, const JsonFields& rs, ModelConfig& c) {
  RopeScaling& out = c.rope_scaling;
  auto sf = rs.number_list("short_factor");
  if (!sf) return sf.error();
  auto lf = rs.number_list("long_factor");
  if (!lf) return lf.error();
  auto inner = rs.int64_or("original_max_position_embeddings", c.max_context);
  if (!inner) return inner.error();
  auto orig = f.int64_or("original_max_position_embeddings", *inner);
  if (!orig) return orig.error();
  if (*orig <= 1) return make_error(f.path() + ": longrope needs original_max_position_embeddings > 1");
  auto factor = rs.number_or("factor", double(c.max_context) / double(*orig));
  if (!factor) return factor.error();
  const double fallback =
      *factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(*factor) / std::log(double(*orig)));
  auto attn = rs.number_or("attention_factor", fallback);
  if (!attn) return attn.error();
  out.type = RopeScalingType::kLongRope;
  out.short_factor = *sf;
  out.long_factor = *lf;
  out.original_max_position_embeddings = *orig;
  out.factor = *factor;
  out.attention_factor = *attn;
  return {};
}

// partial_rotary_factor (top level, or in rope_parameters): rotary_dim =
// int(head_dim * factor), as transformers computes it.
Result<void> read_hf_partial_rotary(const JsonFields& f, const JsonFields* rs, ModelConfig& c) {
  auto top = f.number_or("partial_rotary_factor", 1.0);
  if (!top) return top.error();
  auto prf = rs != nullptr ? rs->number_or("partial_rotary_factor", *top) : top;
  if (!prf) return prf.error();
  if (!(*prf > 0.0 && *prf <= 1.0)) {
    return make_error(f.path() + ": partial_rotary_factor must be in (0, 1]");
  }
  const int32_t rot = int32_t(double(c.head_dim) * *prf);
  c.rotary_dim = rot == c.head_dim ? 0 : rot;
  return {};
}

// Gemma 3's windowed layers' RoPE, {"rope_type": "default", "rope_theta": x}
// in rope_parameters["sliding_attention"] (transformers 5).
Result<void> read_hf_local_rope(const JsonFields& by_type, ModelConfig& c) {
  simdjson::dom::element el;
  simdjson::dom::object obj;
  if (!by_type.lookup("sliding_attention", el)) return {};
  if (el.get(obj) != simdjson::SUCCESS) return by_type.wrong_type("sliding_attention", "an object", el);
  const JsonFields local(obj, by_type.path());
  if (local.lookup("rope_type", el)) {
    auto type = local.string("rope_type");
    if (!type) return type.error();
    if (*type != "default") {
      return make_error(by_type.path() + ": sliding_attention rope_type '" + *type +
                        "' is not supported (only default)");
    }
  }
  auto theta = local.number_or("rope_theta", 10000.0);
  if (!theta) return theta.error();
  c.rope_local_theta = *theta;
  return {};
}

// RoPE settings: transformers < 5 writes top-level "rope_theta" and an optional
// "rope_scaling" object; transformers >= 5 writes one "rope_parameters" object
// holding rope_theta, rope_type and the scaling fields.
Result<void> read_hf_rope(const JsonFields& f, ModelConfig& c) {
  auto theta = f.number_or("rope_theta", 10000.0);
  if (!theta) return theta.error();
  c.rope_theta = *theta;
  simdjson::dom::element el;
  const char* key = f.lookup("rope_parameters", el) ? "rope_parameters" : "rope_scaling";
  if (!f.lookup(key, el)) return read_hf_partial_rotary(f, nullptr, c);
  simdjson::dom::object obj;
  if (el.get(obj) != simdjson::SUCCESS) return f.wrong_type(key, "an object", el);
  // Per layer type (transformers 5 Gemma 3): the global layers' parameters in
  // "full_attention"; the windowed layers' base in "sliding_attention".
  if (const JsonFields by_type(obj, f.path()); by_type.lookup("full_attention", el)) {
    if (auto ok = read_hf_local_rope(by_type, c); !ok) return ok;
    if (el.get(obj) != simdjson::SUCCESS) return f.wrong_type("full_attention", "an object", el);
  }
  const JsonFields rs(obj, f.path());
  if (auto ok = read_hf_partial_rotary(f, &rs, c); !ok) return ok.error();
  auto params_theta = rs.number_or("rope_theta", c.rope_theta);
  if (!params_theta) return params_theta.error();
  c.rope_theta = *params_theta;
  auto type = rs.lookup("rope_type", el) ? rs.string("rope_type") : rs.string("type");
  if (!type) return type.error();
  RopeScaling& out = c.rope_scaling;
  if (*type == "default") return {};
  if (*type == "longrope" || *type == "su") return read_hf_longrope(f, rs, c);
  if (*type != "linear" && *type != "llama3") {
    return make_error(f.path() + ": unsupported rope_scaling type '" + *type +
                      "' (supported: default, linear, llama3, longrope, su)");
  }
  auto factor = rs.number("factor");
  if (!factor) return factor.error();
  out.factor = *factor;
  out.type = RopeScalingType::kLinear;
  if (*type == "linear") return {};
  out.type = RopeScalingType::kLlama3;
  auto low = rs.number("low_freq_factor");
  auto high = rs.number("high_freq_factor");
  auto orig = rs.int32("original_max_position_embeddings");
  if (!low) return low.error();
  if (!high) return high.error();
  if (!orig) return orig.error();
  out.low_freq_factor = *low;
  out.high_freq_factor = *high;
  out.original_max_position_embeddings = *orig;
  return {};
}

Result<void> read_hf_flags(const JsonFields& f, const Architecture& arch, ModelConfig& c) {
  auto bos = f.int32_or("bos_token_id", arch.hf_default_bos);
  if (!bos) return bos.error();
  c.bos_token_id = *bos;
  simdjson::dom::element el;
  const std::vector<int32_t> default_eos =
      arch.hf_default_eos >= 0 ? std::vector<int32_t>{arch.hf_default_eos} : std::vector<int32_t>{};
  auto eos = f.lookup("eos_token_id", el) ? f.int32_list("eos_token_id")
                                          : Result<std::vector<int32_t>>(default_eos);
  if (!eos) return eos.error();
  c.eos_token_ids = *eos;
  auto tie = f.boolean_or("tie_word_embeddings", false);
  if (!tie) return tie.error();
  c.tie_word_embeddings = *tie;
  auto bias = f.boolean_or("attention_bias", false);
  if (!bias) return bias.error();
  c.attention_bias = arch.qkv_bias || *bias;  // Qwen2 always has q/k/v biases
  c.qk_norm = arch.qk_norm;
  c.rope_interleaved = false;  // HF checkpoints use rotate_half pairing
  return {};
}

}  // namespace

Result<ModelConfig> config_from_hf_json(const std::string& path) {
  simdjson::dom::parser parser;
  auto obj = load_json_object(path, parser);
  if (!obj) return obj.error();
  const JsonFields f(*obj, path);
  auto type = f.string("model_type");
  if (!type) return type.error();
  const Architecture* arch = find_hf_architecture(*type);
  if (arch == nullptr) {
    return make_error(path + ": unsupported model_type '" + *type +
                      "' (supported: " + supported_hf_architectures() + ")");
  }
  ModelConfig c;
  c.architecture = arch->name;
  if (auto ok = read_hf_sizes(f, *arch, c); !ok) return ok.error();
  if (auto ok = read_hf_rope(f, c); !ok) return ok.error();
  if (auto ok = read_hf_flags(f, *arch, c); !ok) return ok.error();
  if (auto ok = read_hf_gemma(f, *obj, *arch, c); !ok) return ok.error();
  if (auto ok = read_hf_window(f, *obj, *arch, c); !ok) return ok.error();
  if (auto ok = read_hf_moe(f, *arch, c); !ok) return ok.error();
  if (auto ok = validate_config(c, path); !ok) return ok.error();
  return c;
}

// Adds the eos ids of generation_config.json (when present) to c: an integer
// or a list of them. An entry that is not an integer of the vocabulary is
// ignored with a note (the file only refines generation defaults); a file that
// is not JSON is an Error.
Result<void> merge_generation_config(const std::string& path, ModelConfig& c) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  simdjson::dom::parser parser;
  auto obj = load_json_object(path, parser);
  if (!obj) return obj.error();
  simdjson::dom::element el;
  if (!JsonFields(*obj, path).lookup("eos_token_id", el)) return {};
  std::vector<simdjson::dom::element> entries;
  if (simdjson::dom::array arr; el.get(arr) == simdjson::SUCCESS) {
    for (simdjson::dom::element e : arr) entries.push_back(e);
  } else {
    entries.push_back(el);
  }
  for (simdjson::dom::element e : entries) {
    int64_t id = -1;
    if (e.get(id) != simdjson::SUCCESS || id < 0 || id >= c.vocab_size) {
      add_config_note(c, path + ": eos_token_id entry " + simdjson::to_string(e) +
                      " ignored (not a token id of the vocabulary)");
      continue;
    }
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(int32_t(id));
    }
  }
  return validate_config(c, path);
}

}  // namespace pagoda::model
