#include "model/model_config.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <limits>

#include "model/architecture.hpp"
#include "model/config_limits.hpp"

namespace pagoda::model {

// ---- shared by the GGUF and HF readers (model/config_limits.hpp) -------------

void add_config_note(ModelConfig& c, std::string note) {
  std::fprintf(stderr, "pagoda: note: %s\n", note.c_str());
  c.notes.push_back(std::move(note));
}

int64_t clamp_context(int64_t ctx, const std::string& source, ModelConfig& c) {
  if (ctx <= kMaxContext) return ctx;
  add_config_note(c, source + ": context length " + std::to_string(ctx) + " clamped to " +
                         std::to_string(kMaxContext) + " tokens");
  return kMaxContext;
}

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
  if (*rope_dim > c.head_dim || *rope_dim <= 0 || *rope_dim % 2 != 0) {
    return make_error(g.path() + ": " + p + "rope.dimension_count " + std::to_string(*rope_dim) +
                      " must be even and in (0, head_dim " + std::to_string(c.head_dim) + "]");
  }
  c.rotary_dim = *rope_dim == c.head_dim ? 0 : *rope_dim;
  return {};
}

// llama.cpp's longrope (phi3): rope_factors_long.weight and
// rope_factors_short.weight, F32 [rotary_dim / 2] each, and rope.scaling.attn_factor.
Result<void> read_gguf_longrope(const GgufFile& g, const std::string& p, ModelConfig& c) {
  const GgufTensorInfo* lf = g.find_tensor("rope_factors_long.weight");
  const GgufTensorInfo* sf = g.find_tensor("rope_factors_short.weight");
  if (lf == nullptr && sf == nullptr) return {};
  RopeScaling& rs = c.rope_scaling;
  if (lf == nullptr || sf == nullptr || rs.type != RopeScalingType::kNone) {
    return make_error(g.path() + ": rope_factors_long/short.weight need each other and no other "
                      "rope scaling");
  }
  const uint64_t pairs = uint64_t(c.rotary_dim == 0 ? c.head_dim : c.rotary_dim) / 2;
  for (const GgufTensorInfo* t : {lf, sf}) {
    if (t->raw_type != 0 || t->num_elements() != pairs) {
      return make_error(g.path() + ": " + t->name + " must be F32 with rotary_dim / 2 = " +
                        std::to_string(pairs) + " elements");
    }
    const float* v = reinterpret_cast<const float*>(g.tensor_data(*t));
    std::vector<double>& out = t == lf ? rs.long_factor : rs.short_factor;
    for (uint64_t i = 0; i < pairs; ++i) {
      if (!(std::isfinite(v[i]) && v[i] > 0)) {
        return make_error(g.path() + ": " + t->name + " holds a value that is not positive");
      }
      out.push_back(v[i]);
    }
  }
  auto attn = gguf_float_or(g, p + "rope.scaling.attn_factor", 1.0);
  if (!attn) return attn.error();
  rs.type = RopeScalingType::kLongRope;
  rs.attention_factor = *attn;
  if (rs.original_max_position_embeddings <= 0) {
    return make_error(g.path() + ": longrope needs " + p + "rope.scaling.original_context_length");
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

// The Gemma fields (see model_config.hpp); the message only.
Result<void> validate_gemma_fields(const ModelConfig& c) {
  for (double v : {c.attn_logit_softcap, c.final_logit_softcap, c.query_pre_attn_scalar,
                   c.rope_local_theta}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return make_error("soft-caps, query_pre_attn_scalar and the local rope base must be >= 0");
    }
  }
  if (c.sliding_window < 0) return make_error("sliding_window must be >= 0");
  if (!c.sliding_layers.empty() && c.sliding_layers.size() != size_t(c.num_layers)) {
    return make_error("sliding_layers must name every layer");
  }
  for (bool s : c.sliding_layers) {
    if (s && c.sliding_window <= 0) return make_error("a windowed layer needs sliding_window > 0");
  }
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
    case RopeScalingType::kLongRope:
      return "longrope";
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
  if (auto ok = read_gguf_longrope(g, p, c); !ok) return ok.error();
  if (auto ok = read_gguf_tokens(g, c); !ok) return ok.error();
  if (auto ok = read_gguf_gemma(g, p, *arch, c); !ok) return ok.error();
  if (auto ok = read_gguf_moe(g, p, *arch, c); !ok) return ok.error();
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.attention_bias = arch->qkv_bias ||
                     g.find_tensor(tensor_name(*arch, true, TensorRole::kQBias, 0)) != nullptr;
  c.qk_norm = arch->qk_norm;
  c.rope_interleaved = arch->gguf_qk_permuted;  // llama.cpp permuted Q/K (see header)
  if (auto ok = validate_config(c, g.path()); !ok) return ok.error();
  return c;
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
  if (c.rotary_dim < 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0) {
    return fail("rotary_dim " + std::to_string(c.rotary_dim) + " must be even and <= head_dim");
  }
  if (rs.type == RopeScalingType::kLongRope) {
    const size_t pairs = size_t(c.rotary_dim == 0 ? c.head_dim : c.rotary_dim) / 2;
    const auto positive = [](const std::vector<double>& v) {
      return std::all_of(v.begin(), v.end(), [](double x) { return x > 0 && std::isfinite(x); });
    };
    if (rs.short_factor.size() != pairs || rs.long_factor.size() != pairs ||
        !positive(rs.short_factor) || !positive(rs.long_factor)) {
      return fail("longrope short_factor and long_factor must be " + std::to_string(pairs) +
                  " positive numbers each (rotary_dim / 2)");
    }
    if (rs.original_max_position_embeddings <= 0 || !(rs.attention_factor > 0) ||
        !std::isfinite(rs.attention_factor)) {
      return fail("longrope needs original_max_position_embeddings > 0 and a positive attention factor");
    }
  }
  if (auto ok = validate_gemma_fields(c); !ok) return fail(ok.error().message);
  if (auto ok = validate_moe_fields(c); !ok) return fail(ok.error().message);
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
