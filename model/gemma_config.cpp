// Gemma 2 / Gemma 3 settings of a ModelConfig from GGUF metadata and from
// config.json (see the Gemma notes in model_config.hpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "model/architecture.hpp"
#include "model/config_limits.hpp"
#include "model/json_fields.hpp"

namespace pagoda::model {

namespace {

Result<double> float_or(const GgufFile& g, const std::string& key, double fallback) {
  if (!g.find(key)) return fallback;
  return g.get_float(key);
}

// attention.sliding_window_pattern: a bool per layer, or an integer pattern;
// absent: llama.cpp's default for the architecture.
Result<void> read_swa_layers(const GgufFile& g, const std::string& p, const Architecture& arch,
                             ModelConfig& c) {
  const std::string key = p + "attention.sliding_window_pattern";
  const GgufValue* v = g.find(key);
  if (v == nullptr) {
    set_sliding_pattern(c, arch.gguf_swa_pattern);
    return {};
  }
  if (v->type != GgufValueType::kArray) {
    auto n = g.get_int(key);
    if (!n) return n.error();
    if (*n < 0 || *n > c.num_layers + 1) return make_error(g.path() + ": " + key + " is out of range");
    set_sliding_pattern(c, int32_t(*n));
    return {};
  }
  if (v->array.size() != size_t(c.num_layers)) {
    return make_error(g.path() + ": " + key + " must hold one entry per layer");
  }
  c.sliding_layers.clear();
  for (const GgufValue& e : v->array) c.sliding_layers.push_back(e.u != 0);
  return {};
}

// A soft-cap: absent gives the family's default, null gives off (HF's None).
Result<double> hf_softcap(const JsonFields& f, simdjson::dom::object obj, std::string_view key,
                          double fallback) {
  simdjson::dom::element el;
  if (obj.at_key(key).get(el) == simdjson::SUCCESS && el.is_null()) return 0.0;
  return f.number_or(key, fallback);
}

}  // namespace

Result<void> read_hf_gemma(const JsonFields& f, simdjson::dom::object obj, const Architecture& arch,
                           ModelConfig& c) {
  if (!arch.post_norms) return {};
  simdjson::dom::element el;
  const char* act_key = f.lookup("hidden_activation", el) ? "hidden_activation" : "hidden_act";
  if (f.lookup(act_key, el)) {
    auto act = f.string(act_key);
    if (!act) return act.error();
    if (*act != "gelu_pytorch_tanh" && *act != "gelu_tanh") {
      return make_error(f.path() + ": " + act_key + " '" + *act + "' is not supported (gelu_pytorch_tanh)");
    }
  }
  auto bidir = f.boolean_or("use_bidirectional_attention", false);
  if (!bidir) return bidir.error();
  if (*bidir) return make_error(f.path() + ": use_bidirectional_attention (an embedding model) is not supported");
  auto attn_cap = hf_softcap(f, obj, "attn_logit_softcapping", arch.hf_default_attn_softcap);
  auto final_cap = hf_softcap(f, obj, "final_logit_softcapping", arch.hf_default_final_softcap);
  auto qpas = f.number_or("query_pre_attn_scalar", 256.0);  // both config classes
  auto window = f.int32_or("sliding_window", arch.hf_default_sliding_window);
  auto pattern = f.int32_or("sliding_window_pattern", arch.hf_default_swa_pattern);
  for (const Result<double>* r : {&attn_cap, &final_cap, &qpas}) {
    if (!*r) return r->error();
  }
  if (!window) return window.error();
  if (!pattern) return pattern.error();
  c.attn_logit_softcap = *attn_cap;
  c.final_logit_softcap = *final_cap;
  c.query_pre_attn_scalar = *qpas;
  c.sliding_window = std::max(*window, 0);
  auto listed = read_hf_layer_types(f, c);
  if (!listed) return listed.error();
  if (!*listed) set_sliding_pattern(c, c.sliding_window > 0 ? *pattern : 0);
  // Gemma 3 (transformers 4 configs): rope_local_base_freq, default 1e4.
  if (c.rope_local_theta == 0.0 && arch.qk_norm) {
    auto local = f.number_or("rope_local_base_freq", 10000.0);
    if (!local) return local.error();
    c.rope_local_theta = *local;
  }
  return {};
}

Result<void> read_gguf_gemma(const GgufFile& g, const std::string& p, const Architecture& arch,
                             ModelConfig& c) {
  if (arch.gguf_swa_pattern == 0) return {};  // not a Gemma
  const bool gemma2 = std::string(arch.name) == "gemma2";
  auto attn_cap = float_or(g, p + "attn_logit_softcapping", 0.0);
  if (!attn_cap) return attn_cap.error();
  auto final_cap = float_or(g, p + "final_logit_softcapping", 0.0);
  if (!final_cap) return final_cap.error();
  c.attn_logit_softcap = *attn_cap;
  c.final_logit_softcap = *final_cap;
  // llama.cpp: gemma2 always windows (4096 unless the key says otherwise);
  // gemma3 only when the key is present and positive.
  auto window = float_or(g, p + "attention.sliding_window", gemma2 ? 4096.0 : 0.0);
  if (!window) return window.error();
  if (!(*window >= 0 && *window <= double(kMaxContext))) {
    return make_error(g.path() + ": " + p + "attention.sliding_window is out of range");
  }
  c.sliding_window = int32_t(*window);
  if (c.sliding_window > 0) {
    if (auto ok = read_swa_layers(g, p, arch, c); !ok) return ok;
  }
  // Gemma 3's windowed layers: rope.freq_base_swa (else the global base), unscaled.
  if (!gemma2 && c.sliding_window > 0) {
    auto local = float_or(g, p + "rope.freq_base_swa", c.rope_theta);
    if (!local) return local.error();
    c.rope_local_theta = *local;
  }
  // The converter writes no query_pre_attn_scalar: attention.scale when a
  // writer added it, else llama.cpp's rule (hidden / heads for the 27B sizes).
  if (g.find(p + "attention.scale")) {
    auto s = g.get_float(p + "attention.scale");
    if (!s) return s.error();
    if (!(*s > 0) || !std::isfinite(*s)) return make_error(g.path() + ": attention.scale must be positive");
    c.query_pre_attn_scalar = 1.0 / (*s * *s);
  } else if (c.num_layers == (gemma2 ? 46 : 62)) {
    c.query_pre_attn_scalar = double(c.hidden_size / c.num_heads);
  } else {
    c.query_pre_attn_scalar = double(c.head_dim);
  }
  return {};
}

}  // namespace pagoda::model
