// Which layers attend through a sliding window (ModelConfig::sliding_window,
// sliding_layers): the pattern rule, config.json's layer_types, and the
// windows of the families other than Gemma (gemma_config.cpp reads Gemma's),
// as transformers 5 applies them:
//  - mistral: "sliding_window" (absent: MistralConfig's default 4096; null:
//    none) on every layer (MistralConfig ignores layer_types);
//  - mixtral, phi3: "sliding_window" (absent or null: none) on every layer;
//  - qwen2, qwen3: a window only with "use_sliding_window": true, on the
//    layers layer_types marks sliding_attention, else on layers
//    >= "max_window_layers" (default 28);
//  - qwen3_moe: with "use_sliding_window": true, on every layer;
//  - llama: none.
// GGUF files follow llama.cpp, which applies no window for these families
// (its llama graph has none; phi3's is switched off in llama-model.cpp), so
// the GGUF reader sets none: a file gives what llama.cpp computes from it.
#include <algorithm>
#include <string>
#include <string_view>

#include "model/architecture.hpp"
#include "model/config_limits.hpp"
#include "model/json_fields.hpp"

namespace pagoda::model {

void set_sliding_pattern(ModelConfig& c, int32_t pattern) {
  c.sliding_layers.assign(size_t(std::max(c.num_layers, 0)), false);
  if (pattern <= 0) return;
  for (int32_t l = 0; l < c.num_layers; ++l) c.sliding_layers[size_t(l)] = (l + 1) % pattern != 0;
}

Result<bool> read_hf_layer_types(const JsonFields& f, ModelConfig& c) {
  simdjson::dom::element el;
  if (!f.lookup("layer_types", el)) return false;
  simdjson::dom::array types;
  if (el.get(types) != simdjson::SUCCESS || types.size() != size_t(c.num_layers)) {
    return make_error(f.path() + ": \"layer_types\" must list every layer");
  }
  c.sliding_layers.clear();
  for (simdjson::dom::element t : types) {
    std::string_view v;
    if (t.get(v) != simdjson::SUCCESS || (v != "sliding_attention" && v != "full_attention")) {
      return make_error(f.path() + ": \"layer_types\" entries must be sliding_attention or full_attention");
    }
    c.sliding_layers.push_back(v == "sliding_attention");
  }
  return true;
}

namespace {

// "sliding_window": absent gives `fallback`, null gives 0 (none).
Result<int32_t> hf_window_value(const JsonFields& f, simdjson::dom::object obj, int32_t fallback) {
  simdjson::dom::element el;
  if (obj.at_key("sliding_window").get(el) == simdjson::SUCCESS && el.is_null()) return 0;
  auto w = f.int32_or("sliding_window", fallback);
  if (!w) return w.error();
  if (*w < 0) return make_error(f.path() + ": \"sliding_window\" must be >= 0");
  return *w;
}

}  // namespace

Result<void> read_hf_window(const JsonFields& f, simdjson::dom::object obj, const Architecture& arch,
                            ModelConfig& c) {
  if (arch.post_norms) return {};  // Gemma: gemma_config.cpp
  const std::string_view type = arch.name;
  if (type == "llama") return {};
  const bool qwen = type == "qwen2" || type == "qwen3" || type == "qwen3_moe";
  if (qwen) {
    auto use = f.boolean_or("use_sliding_window", false);
    if (!use) return use.error();
    if (!*use) return {};
  }
  auto window = hf_window_value(f, obj, type == "mistral" || qwen ? 4096 : 0);
  if (!window) return window.error();
  c.sliding_window = *window;
  if (c.sliding_window == 0) return {};
  if (type == "qwen2" || type == "qwen3") {
    auto listed = read_hf_layer_types(f, c);
    if (!listed) return listed.error();
    if (*listed) return {};
    auto first = f.int32_or("max_window_layers", 28);
    if (!first) return first.error();
    c.sliding_layers.assign(size_t(std::max(c.num_layers, 0)), false);
    for (int32_t l = std::max(*first, 0); l < c.num_layers; ++l) c.sliding_layers[size_t(l)] = true;
    return {};
  }
  c.sliding_layers.assign(size_t(std::max(c.num_layers, 0)), true);  // every layer
  return {};
}

}  // namespace pagoda::model
