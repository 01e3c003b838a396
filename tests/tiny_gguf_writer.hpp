// Converts the tiny HF test models (tests/data/logits/tiny-*) to GGUF the way
// llama.cpp's convert_hf_to_gguf.py does, written independently here:
//  - names: model.embed_tokens -> token_embd, model.layers.N.input_layernorm
//    -> blk.N.attn_norm, self_attn.{q,k,v,o}_proj -> attn_{q,k,v,output},
//    post_attention_layernorm -> ffn_norm, mlp.{gate,up,down}_proj ->
//    ffn_{gate,up,down}, model.norm -> output_norm, lm_head -> output;
//  - arch "llama": the rows of attn_q / attn_k are permuted within each head
//    from [first half, second half] to interleaved pairs (new row 2j + h =
//    old row h * D/2 + j), and llama3 rope scaling becomes the F32 tensor
//    rope_freqs.weight (per-pair frequency divisors);
//  - arch "phi3": fused qkv_proj / gate_up_proj stay fused (attn_qkv, ffn_up),
//    and longrope's factor lists become rope_factors_long/short.weight (F32);
//  - arch "gemma2" / "gemma3" (HF gemma3_text): post_attention_layernorm ->
//    post_attention_norm, pre_feedforward_layernorm -> ffn_norm,
//    post_feedforward_layernorm -> post_ffw_norm, and every norm weight
//    stored as 1 + w (llama.cpp's Gemma converters add the 1);
//  - optional Q8_0 quantization of the 2-D weights whose row length is a
//    multiple of 32, and hooks to break the file for the loader's error tests.
// Header-only; used by llama_model_test and paging_proof_test.
#pragma once

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "formats_test_util.hpp"
#include "gpu/quant_format.hpp"
#include "model/safetensors_file.hpp"
#include "test_quantizers.hpp"

namespace pagoda::test {

struct TinyGgufOptions {
  bool q8_0 = false;                      // quantize eligible 2-D weights to Q8_0
  uint32_t quant_type = 0;                // else to this type: 6 Q5_0, 7 Q5_1, 20 IQ4_NL
  std::set<std::string> keep_f32;         // GGUF names never quantized
  std::string drop;                       // a GGUF tensor name to leave out
  std::string bad_shape;                  // a GGUF tensor written with one row less
  std::string bad_type;                   // a GGUF 2-D tensor written as I32 (unsupported)
  bool f16 = false;                       // 2-D weights as F16 (llama.cpp's --outtype f16)
  // When set: the metadata to write instead of this writer's own (a listing of
  // what llama.cpp's converter wrote, tools/gen-arch-goldens.py: integers as
  // u32, floats as f32, strings), so that the file is the converter's.
  const simdjson::dom::object* metadata = nullptr;
  // F32 metadata written in addition (e.g. gemma2.attention.scale, a key the
  // converter does not write).
  std::vector<std::pair<std::string, float>> extra_f32;
};

inline std::string gguf_name_of(const std::string& hf, bool gemma = false) {
  const std::pair<const char*, const char*> fixed[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  for (auto [from, to] : fixed) {
    if (hf == from) return to;
  }
  const std::pair<const char*, const char*> parts[] = {
      {"input_layernorm.", "attn_norm."}, {"self_attn.q_proj.", "attn_q."},
      {"self_attn.k_proj.", "attn_k."},   {"self_attn.v_proj.", "attn_v."},
      {"self_attn.o_proj.", "attn_output."}, {"post_attention_layernorm.", "ffn_norm."},
      {"self_attn.q_norm.", "attn_q_norm."}, {"self_attn.k_norm.", "attn_k_norm."},
      {"mlp.gate_proj.", "ffn_gate."},    {"mlp.up_proj.", "ffn_up."},
      {"mlp.down_proj.", "ffn_down."},    {"self_attn.qkv_proj.", "attn_qkv."},
      {"mlp.gate_up_proj.", "ffn_up."}};  // phi3: fused, kept fused
  const std::string prefix = "model.layers.";
  const size_t dot = hf.find('.', prefix.size());
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  const std::pair<const char*, const char*> gemma_parts[] = {
      {"post_attention_layernorm.", "post_attention_norm."},
      {"pre_feedforward_layernorm.", "ffn_norm."},
      {"post_feedforward_layernorm.", "post_ffw_norm."}};
  for (auto [from, to] : gemma_parts) {
    if (gemma && rest.rfind(from, 0) == 0) return "blk." + layer + "." + to + rest.substr(std::strlen(from));
  }
  for (auto [from, to] : parts) {
    if (rest.rfind(from, 0) == 0) return "blk." + layer + "." + to + rest.substr(std::strlen(from));
  }
  return "?" + hf;
}

// Q8_0 blocks of a row-major [n] float array (n % 32 == 0).
inline std::vector<uint8_t> quantize_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f;
    const uint16_t h = gpu::fp32_to_fp16(d);
    out.push_back(uint8_t(h & 0xFF));
    out.push_back(uint8_t(h >> 8));
    for (size_t j = 0; j < 32; ++j) {
      out.push_back(uint8_t(int8_t(d == 0 ? 0 : std::lround(x[b + j] / d))));
    }
  }
  return out;
}

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Permutes the rows of W [heads * D, K] within each head for llama's interleaved rope.
inline std::vector<float> permute_rows(const std::vector<float>& w, int64_t heads, int64_t K) {
  const int64_t D = int64_t(w.size()) / K / heads;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < D / 2; ++j) {
      for (int64_t half = 0; half < 2; ++half) {
        const float* src = &w[size_t((h * D + half * D / 2 + j) * K)];
        std::copy(src, src + K, &out[size_t((h * D + 2 * j + half) * K)]);
      }
    }
  }
  return out;
}

// llama.cpp's rope_freqs for llama3 scaling: the divisor of each pair's frequency.
inline std::vector<float> llama3_freq_factors(double theta, int64_t dim, double factor, double low,
                                              double high, double orig) {
  std::vector<float> out;
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, double(i) / dim);
    const double wavelen = 2 * pi / freq;
    if (wavelen < orig / high) {
      out.push_back(1.0f);
    } else if (wavelen > orig / low) {
      out.push_back(float(factor));
    } else {
      const double smooth = (orig / wavelen - low) / (high - low);
      out.push_back(float(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// This writer's own metadata (what the loader reads) for the HF config `cfg`.
inline void write_own_metadata(GgufWriter& w, simdjson::dom::element cfg, const std::string& arch,
                               int64_t D, double theta, int64_t rotary_dim) {
  const int64_t H = int64_t(cfg["hidden_size"]), heads = int64_t(cfg["num_attention_heads"]);
  const int64_t kv_heads = int64_t(cfg["num_key_value_heads"]);
  w.kv_str("general.architecture", arch);
  const std::string p = arch + ".";
  w.kv_u32(p + "block_count", uint32_t(int64_t(cfg["num_hidden_layers"])));
  w.kv_u32(p + "embedding_length", uint32_t(H));
  w.kv_u32(p + "attention.head_count", uint32_t(heads));
  w.kv_u32(p + "attention.head_count_kv", uint32_t(kv_heads));
  w.kv_u32(p + "feed_forward_length", uint32_t(int64_t(cfg["intermediate_size"])));
  w.kv_u32(p + "context_length", uint32_t(int64_t(cfg["max_position_embeddings"])));
  w.kv_u32(p + "vocab_size", uint32_t(int64_t(cfg["vocab_size"])));
  w.kv_u32(p + "rope.dimension_count", uint32_t(rotary_dim));
  w.kv_f32(p + "rope.freq_base", float(theta));
  w.kv_f32(p + "attention.layer_norm_rms_epsilon", float(double(cfg["rms_norm_eps"])));
  if (D != H / heads) {
    w.kv_u32(p + "attention.key_length", uint32_t(D));
    w.kv_u32(p + "attention.value_length", uint32_t(D));
  }
}

// Writes <name>.gguf into the test temp dir from the HF dir `src`; returns its path.
inline std::string write_tiny_gguf(const std::string& src, const std::string& name,
                                   const TinyGgufOptions& opt = {}) {
  simdjson::dom::parser parser;
  simdjson::dom::element cfg = parser.load(src + "/config.json");
  const std::string model_type = std::string(std::string_view(cfg["model_type"]));
  const std::string arch = model_type == "mistral"       ? "llama"  // as llama.cpp converts
                           : model_type == "gemma3_text" ? "gemma3"
                                                         : model_type;
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  const int64_t H = int64_t(cfg["hidden_size"]), heads = int64_t(cfg["num_attention_heads"]);
  const int64_t kv_heads = int64_t(cfg["num_key_value_heads"]);
  int64_t D = H / heads;
  if (int64_t hd = 0; cfg["head_dim"].get(hd) == simdjson::SUCCESS) D = hd;
  simdjson::dom::element rope = cfg["rope_parameters"];
  if (simdjson::dom::element full; rope["full_attention"].get(full) == simdjson::SUCCESS) rope = full;
  const double theta = double(rope["rope_theta"]);
  GgufWriter w;
  if (opt.metadata != nullptr) {
    for (auto [key, value] : *opt.metadata) {
      const std::string k(key);
      if (value.is_string()) w.kv_str(k, std::string(std::string_view(value)));
      else if (value.is_int64()) w.kv_u32(k, uint32_t(int64_t(value)));
      else w.kv_f32(k, float(double(value)));
    }
    for (const auto& [k, v] : opt.extra_f32) w.kv_f32(k, v);
  } else {
    double partial = 1.0;
    if (double f = 0; rope["partial_rotary_factor"].get(f) == simdjson::SUCCESS) partial = f;
    write_own_metadata(w, cfg, arch, D, theta, int64_t(double(D) * partial));
    if (std::string_view(rope["rope_type"]) == "longrope") {  // llama.cpp's phi3 keys
      const double orig = double(int64_t(rope["original_max_position_embeddings"]));
      const double scale = double(int64_t(cfg["max_position_embeddings"])) / orig;
      w.kv_u32(arch + ".rope.scaling.original_context_length", uint32_t(orig));
      w.kv_f32(arch + ".rope.scaling.attn_factor",
               float(scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(orig)) : 1.0));
    }
  }
  if (std::string_view(rope["rope_type"]) == "longrope") {
    for (const char* which : {"long", "short"}) {
      std::vector<float> f;
      for (simdjson::dom::element x : simdjson::dom::array(rope[std::string(which) + "_factor"])) {
        f.push_back(float(double(x)));
      }
      w.tensor(spec(std::string("rope_factors_") + which + ".weight", {uint64_t(f.size())}, 0,
                    f32_bytes(f)));
    }
  }
  if (std::string_view(rope["rope_type"]) == "llama3") {
    w.tensor(spec("rope_freqs.weight", {uint64_t(D / 2)}, 0,
                  f32_bytes(llama3_freq_factors(
                      theta, D, double(rope["factor"]), double(rope["low_freq_factor"]),
                      double(rope["high_freq_factor"]),
                      double(int64_t(rope["original_max_position_embeddings"]))))));
  }
  auto st = model::SafetensorsModel::open(src);
  for (const model::StTensor* t : st->tensors()) {
    const std::string g = gguf_name_of(t->name, gemma);
    if (g == opt.drop) continue;
    std::vector<float> v = model::to_float(*t);
    if (gemma && g.size() > 11 && g.compare(g.size() - 11, 11, "norm.weight") == 0) {
      for (float& x : v) x = 1.0f + x;
    }
    std::vector<uint64_t> dims(t->shape.rbegin(), t->shape.rend());  // ggml order
    const bool matrix = dims.size() == 2;
    if (arch == "llama" && (g.find(".attn_q.") != std::string::npos ||
                            g.find(".attn_k.") != std::string::npos)) {
      const int64_t nh = g.find(".attn_q.") != std::string::npos ? heads : kv_heads;
      v = permute_rows(v, nh, matrix ? int64_t(dims[0]) : 1);
    }
    if (g == opt.bad_shape) {
      dims.back() -= 1;
      v.resize(v.size() - size_t(matrix ? dims[0] : 1));
    }
    if (g == opt.bad_type) {  // I32 (ggml type 26): a type the loader rejects
      w.tensor(spec(g, dims, 26, std::vector<uint8_t>(v.size() * 4, 0)));
      continue;
    }
    const bool eligible = matrix && dims[0] % 32 == 0 && !opt.keep_f32.count(g);
    if (opt.q8_0 && eligible) {
      w.tensor(spec(g, dims, 8, quantize_q8_0(v)));
    } else if (opt.quant_type != 0 && eligible) {
      w.tensor(spec(g, dims, opt.quant_type,
                    opt.quant_type == 6   ? quantize_q5_0(v)
                    : opt.quant_type == 7 ? quantize_q5_1(v)
                                          : quantize_iq4_nl(v)));
    } else if (opt.f16 && matrix) {
      std::vector<uint8_t> half(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = gpu::fp32_to_fp16(v[i]);
        half[2 * i] = uint8_t(h & 0xFF);
        half[2 * i + 1] = uint8_t(h >> 8);
      }
      w.tensor(spec(g, dims, 1, std::move(half)));
    } else {
      w.tensor(spec(g, dims, 0, f32_bytes(v)));
    }
  }
  return write_file(name + ".gguf", w.build());
}

}  // namespace pagoda::test
