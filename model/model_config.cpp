#include "model/model_config.hpp"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <limits>

#include "model/architecture.hpp"
#include "model/json_file.hpp"

namespace pagoda::model {

namespace {

namespace fs = std::filesystem;

// ---- GGUF ------------------------------------------------------------------

// The shortest decimal that round-trips a float32, read back as a double: the
// value the converter meant (1e-05, not 9.99999974737875e-06).
double float32_as_decimal(float f) {
  char buf[64];
  auto end = std::to_chars(buf, buf + sizeof(buf), f).ptr;
  double d = f;
  std::from_chars(buf, end, d);
  return d;
}

Result<double> gguf_float_or(const GgufFile& g, const std::string& key, double fallback) {
  const GgufValue* v = g.find(key);
  if (!v) return fallback;
  auto f = g.get_float(key);
  if (!f) return f.error();
  return v->type == GgufValueType::kFloat32 ? float32_as_decimal(static_cast<float>(*f)) : *f;
}

Result<double> gguf_float(const GgufFile& g, const std::string& key) {
  if (!g.find(key)) return make_error(g.path() + ": metadata key '" + key + "' is missing");
  return gguf_float_or(g, key, 0.0);
}

Result<int64_t> gguf_int(const GgufFile& g, const std::string& key, int64_t max) {
  auto v = g.get_int(key);
  if (!v) return v.error();
  if (*v < 0 || *v > max) {
    return make_error(g.path() + ": metadata key '" + key + "' value " + std::to_string(*v) +
                      " is out of range [0, " + std::to_string(max) + "]");
  }
  return *v;
}

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// validate_config's bounds (see there).
constexpr int64_t kMaxLayers = 1024, kMaxHidden = 65536, kMaxHeads = 1024, kMaxHeadDim = 1024;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20, kMaxVocab = int64_t{1} << 22;
constexpr int64_t kMaxContext = int64_t{1} << 21;  // 2 M tokens (the longest models: ~1 M)

// Records a note about a value the loader adjusted or ignored, and logs it.
void add_note(ModelConfig& c, std::string note) {
  std::fprintf(stderr, "pagoda: note: %s\n", note.c_str());
  c.notes.push_back(std::move(note));
}

// A context length above kMaxContext (e.g. 10 M tokens, or transformers'
// "very large integer") is clamped with a note: the model stays usable up to
// the bound.
int64_t clamp_context(int64_t ctx, const std::string& source, ModelConfig& c) {
  if (ctx <= kMaxContext) return ctx;
  add_note(c, source + ": context length " + std::to_string(ctx) + " clamped to " +
                  std::to_string(kMaxContext) + " tokens");
  return kMaxContext;
}

Result<int32_t> gguf_int32_or(const GgufFile& g, const std::string& key, int32_t fallback) {
  if (!g.find(key)) return fallback;
  auto v = gguf_int(g, key, kInt32Max);
  if (!v) return v.error();
  return static_cast<int32_t>(*v);
}

Result<int32_t> gguf_int32(const GgufFile& g, const std::string& key) {
  if (!g.find(key)) return make_error(g.path() + ": metadata key '" + key + "' is missing");
  return gguf_int32_or(g, key, 0);
}

Result<int32_t> gguf_vocab_size(const GgufFile& g, const std::string& p) {
  if (g.find(p + "vocab_size")) return gguf_int32(g, p + "vocab_size");
  if (const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
      tokens && tokens->type == GgufValueType::kArray) {
    return static_cast<int32_t>(std::min<size_t>(tokens->array.size(), kInt32Max));
  }
  const GgufTensorInfo* embd = g.find_tensor("token_embd.weight");
  if (embd && embd->dims.size() == 2 && embd->dims[1] <= static_cast<uint64_t>(kInt32Max)) {
    return static_cast<int32_t>(embd->dims[1]);
  }
  return make_error(g.path() + ": cannot determine the vocabulary size (no " + p +
                    "vocab_size, tokenizer.ggml.tokens or token_embd.weight)");
}

Result<void> read_gguf_sizes(const GgufFile& g, const std::string& p, ModelConfig& c) {
  const std::pair<const char*, int32_t*> required[] = {
      {"block_count", &c.num_layers},
      {"embedding_length", &c.hidden_size},
      {"attention.head_count", &c.num_heads},
      {"feed_forward_length", &c.intermediate_size}};
  for (const auto& [suffix, out] : required) {
    auto v = gguf_int32(g, p + suffix);
    if (!v) return v.error();
    *out = *v;
  }
  auto kv = gguf_int32_or(g, p + "attention.head_count_kv", c.num_heads);
  if (!kv) return kv.error();
  c.num_kv_heads = *kv;
  auto head_dim = gguf_int32_or(g, p + "attention.key_length",
                                c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  if (!head_dim) return head_dim.error();
  c.head_dim = *head_dim;
  if (!g.find(p + "context_length")) {
    return make_error(g.path() + ": metadata key '" + p + "context_length' is missing");
  }
  auto ctx = gguf_int(g, p + "context_length", INT64_MAX);
  if (!ctx) return ctx.error();
  c.max_context = clamp_context(*ctx, g.path(), c);
  auto vocab = gguf_vocab_size(g, p);
  if (!vocab) return vocab.error();
  c.vocab_size = *vocab;
  auto eps = gguf_float(g, p + "attention.layer_norm_rms_epsilon");
  if (!eps) return eps.error();
  c.rms_norm_eps = *eps;
  auto rope_dim = gguf_int32_or(g, p + "rope.dimension_count", c.head_dim);
  if (!rope_dim) return rope_dim.error();
  if (*rope_dim != c.head_dim) {
    return make_error(g.path() + ": " + p + "rope.dimension_count " + std::to_string(*rope_dim) +
                      " differs from head_dim " + std::to_string(c.head_dim) +
                      " (partial rotary embeddings are not supported)");
  }
  return {};
}

Result<void> read_gguf_rope(const GgufFile& g, const std::string& p, ModelConfig& c) {
  auto theta = gguf_float_or(g, p + "rope.freq_base", 10000.0);
  if (!theta) return theta.error();
  c.rope_theta = *theta;
  std::string type = "none";
  if (g.find(p + "rope.scaling.type")) {
    auto t = g.get_string(p + "rope.scaling.type");
    if (!t) return t.error();
    type = *t;
  }
  auto legacy = gguf_float_or(g, p + "rope.scale_linear", 1.0);  // older converters
  if (!legacy) return legacy.error();
  if (type == "none" && *legacy != 1.0) type = "linear";
  RopeScaling& rs = c.rope_scaling;
  if (type == "linear") {
    auto f = gguf_float_or(g, p + "rope.scaling.factor", *legacy);
    if (!f) return f.error();
    rs.type = RopeScalingType::kLinear;
    rs.factor = *f;
  } else if (type != "none") {
    return make_error(g.path() + ": unsupported rope scaling type '" + type +
                      "' (supported: none, linear)");
  }
  if (const GgufTensorInfo* freqs = g.find_tensor("rope_freqs.weight")) {
    if (rs.type != RopeScalingType::kNone) {
      return make_error(g.path() + ": both rope_freqs.weight and " + type + " rope scaling");
    }
    if (freqs->num_elements() != static_cast<uint64_t>(std::max(c.head_dim, 0)) / 2) {
      return make_error(g.path() + ": rope_freqs.weight has " +
                        std::to_string(freqs->num_elements()) + " elements, expected head_dim/2");
    }
    rs.type = RopeScalingType::kFreqFactors;
  }
  auto orig = g.find(p + "rope.scaling.original_context_length")
                  ? gguf_int(g, p + "rope.scaling.original_context_length", INT64_MAX)
                  : Result<int64_t>(int64_t{0});
  if (!orig) return orig.error();
  rs.original_max_position_embeddings = *orig;
  return {};
}

Result<void> read_gguf_tokens(const GgufFile& g, ModelConfig& c) {
  auto bos = gguf_int32_or(g, "tokenizer.ggml.bos_token_id", -1);
  if (!bos) return bos.error();
  c.bos_token_id = *bos;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    auto id = gguf_int32_or(g, key, -1);
    if (!id) return id.error();
    if (*id >= 0 &&
        std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(*id);
    }
  }
  return {};
}

// ---- HF config.json ---------------------------------------------------------

const char* json_type_name(simdjson::dom::element el) {
  switch (el.type()) {
    case simdjson::dom::element_type::ARRAY:
      return "array";
    case simdjson::dom::element_type::OBJECT:
      return "object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
      return "integer";
    case simdjson::dom::element_type::DOUBLE:
      return "number";
    case simdjson::dom::element_type::STRING:
      return "string";
    case simdjson::dom::element_type::BOOL:
      return "bool";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
  }
  return "?";
}

// Typed access to the fields of one JSON object; errors name the file and key.
// A null field counts as absent (HF writes e.g. "head_dim": null).
class JsonFields {
 public:
  JsonFields(simdjson::dom::object obj, const std::string& path) : obj_(obj), path_(path) {}

  bool lookup(std::string_view key, simdjson::dom::element& el) const {
    return obj_.at_key(key).get(el) == simdjson::SUCCESS && !el.is_null();
  }
  Error missing(std::string_view key) const {
    return make_error(path_ + ": \"" + std::string(key) + "\" is missing");
  }
  Error wrong_type(std::string_view key, const char* expected, simdjson::dom::element el) const {
    return make_error(path_ + ": \"" + std::string(key) + "\" must be " + expected + " (got " +
                      json_type_name(el) + ")");
  }
  Result<int32_t> int32_or(std::string_view key, int32_t fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    int64_t v = 0;
    if (el.get(v) != simdjson::SUCCESS) return wrong_type(key, "an integer", el);
    if (v < std::numeric_limits<int32_t>::min() || v > kInt32Max) {
      return make_error(path_ + ": \"" + std::string(key) + "\" value " + std::to_string(v) +
                        " is out of range");
    }
    return static_cast<int32_t>(v);
  }
  // A non-negative count that may be huge: an integer, or an integral float
  // (integers beyond 64 bits read as floats); values above INT64_MAX saturate.
  Result<int64_t> int64_or(std::string_view key, int64_t fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    if (el.get(i) == simdjson::SUCCESS && i >= 0) return i;
    if (el.get(u) == simdjson::SUCCESS) return int64_t(std::numeric_limits<int64_t>::max());
    if (el.get(d) == simdjson::SUCCESS && d >= 0 && std::floor(d) == d) {
      return d >= 9.2e18 ? std::numeric_limits<int64_t>::max() : int64_t(d);
    }
    return wrong_type(key, "a non-negative integer", el);
  }
  Result<int32_t> int32(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return missing(key);
    return int32_or(key, 0);
  }
  Result<double> number_or(std::string_view key, double fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    double v = 0;
    if (!el.is_number() || el.get(v) != simdjson::SUCCESS) return wrong_type(key, "a number", el);
    return v;
  }
  Result<double> number(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return missing(key);
    return number_or(key, 0.0);
  }
  Result<bool> boolean_or(std::string_view key, bool fallback) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return fallback;
    bool v = false;
    if (el.get(v) != simdjson::SUCCESS) return wrong_type(key, "a bool", el);
    return v;
  }
  Result<std::string> string(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return missing(key);
    std::string_view v;
    if (el.get(v) != simdjson::SUCCESS) return wrong_type(key, "a string", el);
    return std::string(v);
  }
  // An integer or an array of integers (eos_token_id); absent gives {}.
  Result<std::vector<int32_t>> int32_list(std::string_view key) const {
    simdjson::dom::element el;
    if (!lookup(key, el)) return std::vector<int32_t>{};
    simdjson::dom::array arr;
    if (el.get(arr) != simdjson::SUCCESS) {
      auto one = int32_or(key, 0);
      if (!one) return one.error();
      return std::vector<int32_t>{*one};
    }
    std::vector<int32_t> out;
    for (simdjson::dom::element e : arr) {
      int64_t v = 0;
      if (e.get(v) != simdjson::SUCCESS || v < 0 || v > kInt32Max) {
        return wrong_type(key, "an integer or a list of non-negative integers", e);
      }
      out.push_back(static_cast<int32_t>(v));
    }
    return out;
  }
  const std::string& path() const { return path_; }

 private:
  simdjson::dom::object obj_;
  const std::string& path_;
};

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

// RoPE settings: transformers < 5 writes top-level "rope_theta" and an optional
// "rope_scaling" object; transformers >= 5 writes one "rope_parameters" object
// holding rope_theta, rope_type and the scaling fields.
Result<void> read_hf_rope(const JsonFields& f, ModelConfig& c) {
  auto theta = f.number_or("rope_theta", 10000.0);
  if (!theta) return theta.error();
  c.rope_theta = *theta;
  simdjson::dom::element el;
  const char* key = f.lookup("rope_parameters", el) ? "rope_parameters" : "rope_scaling";
  if (!f.lookup(key, el)) return {};
  simdjson::dom::object obj;
  if (el.get(obj) != simdjson::SUCCESS) return f.wrong_type(key, "an object", el);
  const JsonFields rs(obj, f.path());
  auto params_theta = rs.number_or("rope_theta", c.rope_theta);
  if (!params_theta) return params_theta.error();
  c.rope_theta = *params_theta;
  auto type = rs.lookup("rope_type", el) ? rs.string("rope_type") : rs.string("type");
  if (!type) return type.error();
  RopeScaling& out = c.rope_scaling;
  if (*type == "default") return {};
  if (*type != "linear" && *type != "llama3") {
    return make_error(f.path() + ": unsupported rope_scaling type '" + *type +
                      "' (supported: default, linear, llama3)");
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

const char* rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kLlama3:
      return "llama3";
    case RopeScalingType::kFreqFactors:
      return "freq_factors";
  }
  return "?";
}

Result<ModelConfig> config_from_gguf(const GgufFile& g) {
  auto name = g.get_string("general.architecture");
  if (!name) return name.error();
  const Architecture* arch = find_gguf_architecture(*name);
  if (arch == nullptr) {
    return make_error(g.path() + ": unsupported architecture '" + *name +
                      "' (supported: " + supported_gguf_architectures() + ")");
  }
  ModelConfig c;
  c.architecture = arch->name;
  const std::string p = *name + ".";
  if (auto ok = read_gguf_sizes(g, p, c); !ok) return ok.error();
  if (auto ok = read_gguf_rope(g, p, c); !ok) return ok.error();
  if (auto ok = read_gguf_tokens(g, c); !ok) return ok.error();
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.attention_bias = arch->qkv_bias ||
                     g.find_tensor(tensor_name(*arch, true, TensorRole::kQBias, 0)) != nullptr;
  c.qk_norm = arch->qk_norm;
  c.rope_interleaved = arch->gguf_qk_permuted;  // llama.cpp permuted Q/K (see header)
  if (auto ok = validate_config(c, g.path()); !ok) return ok.error();
  return c;
}

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
      add_note(c, path + ": eos_token_id entry " + simdjson::to_string(e) +
                      " ignored (not a token id of the vocabulary)");
      continue;
    }
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(int32_t(id));
    }
  }
  return validate_config(c, path);
}

Result<ModelConfig> load_model_config(const std::string& model_path) {
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {
    const fs::path dir(model_path);
    auto c = config_from_hf_json((dir / "config.json").string());
    if (!c) return c;
    if (auto ok = merge_generation_config((dir / "generation_config.json").string(), *c); !ok) {
      return ok.error();
    }
    return c;
  }
  if (fs::path(model_path).filename() == "config.json") return config_from_hf_json(model_path);
  auto gguf = GgufFile::open(model_path);
  if (!gguf) return gguf.error();
  return config_from_gguf(*gguf);
}

Result<void> validate_config(const ModelConfig& c, const std::string& source) {
  const auto fail = [&](const std::string& what) { return make_error(source + ": " + what); };
  const std::pair<const char*, int64_t> sizes[] = {
      {"num_layers", c.num_layers}, {"hidden_size", c.hidden_size},
      {"num_heads", c.num_heads},   {"num_kv_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},     {"intermediate_size", c.intermediate_size},
      {"vocab_size", c.vocab_size}, {"max_context", c.max_context}};
  // Upper bounds far above every real Llama-family model, low enough that
  // the sizes derived from them (weights, KV blocks per sequence, rope
  // tables) stay far from int32/int64 overflow and from absurd allocations.
  const int64_t maxima[] = {kMaxLayers, kMaxHidden, kMaxHeads, kMaxHeads, kMaxHeadDim,
                            kMaxIntermediate, kMaxVocab, kMaxContext};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const auto& [name, value] = sizes[i];
    if (value <= 0)
      return fail(std::string(name) + " must be positive (got " + std::to_string(value) + ")");
    if (value > maxima[i]) {
      return fail(std::string(name) + " " + std::to_string(value) + " is implausibly large (at most " +
                  std::to_string(maxima[i]) + ")");
    }
  }
  if (int64_t(c.num_heads) * c.head_dim > kMaxHidden * 4) {
    return fail("num_heads * head_dim " + std::to_string(int64_t(c.num_heads) * c.head_dim) +
                " is implausibly large");
  }
  if (c.hidden_size % c.num_heads != 0) {
    return fail("num_heads " + std::to_string(c.num_heads) + " does not divide hidden_size " +
                std::to_string(c.hidden_size));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return fail("num_kv_heads " + std::to_string(c.num_kv_heads) + " does not divide num_heads " +
                std::to_string(c.num_heads));
  }
  if (c.head_dim % 2 != 0) return fail("head_dim " + std::to_string(c.head_dim) + " is odd");
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    return fail("rope_theta must be positive");
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    return fail("rms_norm_eps must be positive");
  const RopeScaling& rs = c.rope_scaling;
  if ((rs.type == RopeScalingType::kLinear || rs.type == RopeScalingType::kLlama3) &&
      (!(rs.factor > 0) || !std::isfinite(rs.factor))) {
    return fail("rope scaling factor must be positive");
  }
  if (c.bos_token_id < -1 || c.bos_token_id >= c.vocab_size) {
    return fail("bos_token_id " + std::to_string(c.bos_token_id) + " is outside the vocabulary");
  }
  for (int32_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size)
      return fail("eos token id " + std::to_string(id) + " is outside the vocabulary");
  }
  return {};
}

}  // namespace pagoda::model
