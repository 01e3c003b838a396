#include "model/llama_weights.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "model/architecture.hpp"
#include "model/dequant.hpp"
#include "model/dummy_weights.hpp"
#include "model/gguf_file.hpp"
#include "model/safetensors_file.hpp"
#include "model/weight_check.hpp"
#include "model/weight_requant.hpp"
#include "gpu/cpu/half_matmul.hpp"
#include "gpu/cpu/quant_packed.hpp"

#ifdef PAGODA_HAVE_CUDA
#include "gpu/cuda/cuda_backend.hpp"
#endif

namespace pagoda::model {

using gpu::LinearWeight;
using gpu::WeightFormat;

const char* weight_precision_name(WeightPrecision p) {
  return p == WeightPrecision::kExact ? "exact" : "quantized";
}

namespace {

// ---- the model file: one GGUF or the safetensors of an HF directory ------------

struct TensorRef {
  std::string name;
  WeightFormat format = WeightFormat::F32;
  std::vector<int64_t> shape;  // row-major: shape.back() is the row length
  const uint8_t* data = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class WeightFile {
 public:
  static Result<std::shared_ptr<WeightFile>> open(const std::string& model_path) {
    namespace fs = std::filesystem;
    auto f = std::make_shared<WeightFile>();
    std::error_code ec;
    if (fs::is_directory(model_path, ec) || fs::path(model_path).extension() == ".json") {
      std::string dir = fs::is_directory(model_path, ec)
                            ? model_path
                            : fs::path(model_path).parent_path().string();
      auto st = SafetensorsModel::open(dir.empty() ? "." : dir);
      if (!st) return st.error();
      f->st_.emplace(std::move(st).value());
      f->path_ = dir;
      return f;
    }
    auto g = GgufFile::open(model_path);
    if (!g) return g.error();
    f->gguf_.emplace(std::move(g).value());
    f->path_ = model_path;
    return f;
  }

  const std::string& path() const { return path_; }
  const GgufFile* gguf() const { return gguf_ ? &*gguf_ : nullptr; }

  // nullopt when absent; an Error for a type the loader cannot convert.
  Result<std::optional<TensorRef>> find(const std::string& name) const {
    TensorRef t;
    t.name = name;
    if (gguf_) {
      const GgufTensorInfo* info = gguf_->find_tensor(name);
      if (info == nullptr) return std::optional<TensorRef>();
      auto fmt = gpu::weight_format_from_ggml(info->raw_type);
      if (!fmt) {
        return make_error(path_ + ": tensor " + name + " has type " +
                          ggml_type_name(info->raw_type) + " (ggml type id " +
                          std::to_string(info->raw_type) + "), which is not supported; "
                          "supported types: " + supported_type_names());
      }
      t.format = *fmt;
      for (auto it = info->dims.rbegin(); it != info->dims.rend(); ++it) {
        t.shape.push_back(int64_t(*it));
      }
      t.data = gguf_->tensor_data(*info);
      return std::optional<TensorRef>(std::move(t));
    }
    const StTensor* st = st_->find(name);
    if (st == nullptr) return std::optional<TensorRef>();
    t.format = st->dtype == StDtype::kF32   ? WeightFormat::F32
               : st->dtype == StDtype::kF16 ? WeightFormat::F16
                                            : WeightFormat::BF16;
    for (uint64_t d : st->shape) t.shape.push_back(int64_t(d));
    t.data = st->data;
    return std::optional<TensorRef>(std::move(t));
  }

 private:
  std::optional<GgufFile> gguf_;
  std::optional<SafetensorsModel> st_;
  std::string path_;
};

// ---- tensor names: the architecture's (model/architecture.hpp) -------------

using Role = TensorRole;

// ---- placing bytes in backend memory ------------------------------------------

Result<gpu::DeviceBuffer> upload_bytes(gpu::Backend& b, const void* data, size_t bytes,
                                       const std::string& what) {
  auto buf = b.allocate(bytes);
  if (!buf) return make_error(what + ": " + buf.error().message);
  if (auto up = b.upload(*buf, 0, data, bytes); !up) {
    return make_error(what + ": " + up.error().message);
  }
  return std::move(buf).value();
}

std::vector<float> to_f32(WeightFormat f, const void* data, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  // Cannot fail: every WeightFormat is dequantizable and n is a whole number of blocks.
  (void)dequantize(uint32_t(f), static_cast<const uint8_t*>(data), out.data(), uint64_t(n));
  return out;
}

// Stacks the rows of same-width tensors into one weight [n, k]: their blocks
// as they are (quantized mode, one block format for all); Q8_0 when
// `to_q8` (the CPU in quantized mode) and the formats differ but one of
// them lacks CPU row-layout kernels (cpu_runs_format_in_rows); else fp32.
// The result views `bytes` or `floats`.
LinearWeight stack_rows(const std::vector<TensorRef>& parts, int64_t n, int64_t k,
                        WeightPrecision precision, bool to_q8, std::vector<uint8_t>& bytes,
                        std::vector<float>& floats) {
  bool same = true, blocks = true, lacking = false;
  for (const TensorRef& t : parts) {
    same = same && t.format == parts[0].format;
    blocks = blocks && gpu::is_block_quantized(t.format);
    lacking = lacking || !cpu_runs_format_in_rows(t.format);
  }
  if (!same && blocks && lacking && to_q8 && precision == WeightPrecision::kQuantized) {
    for (const TensorRef& t : parts) {
      append_q8_0(LinearWeight{t.format, t.shape[0], k, t.data}, bytes);
    }
    return LinearWeight{WeightFormat::Q8_0, n, k, bytes.data()};
  }
  if (same && gpu::is_block_quantized(parts[0].format) && precision == WeightPrecision::kQuantized) {
    for (const TensorRef& t : parts) {
      bytes.insert(bytes.end(), t.data, t.data + gpu::storage_bytes(t.format, t.numel()));
    }
    return LinearWeight{parts[0].format, n, k, bytes.data()};
  }
  floats.resize(size_t(n * k));  // exact mode, plain formats, or mixed block formats
  int64_t row = 0;
  for (const TensorRef& t : parts) {
    (void)dequantize(uint32_t(t.format), t.data, floats.data() + row * k, uint64_t(t.numel()));
    row += t.shape[0];
  }
  return LinearWeight{WeightFormat::F32, n, k, floats.data()};
}

// ---- the loader ----------------------------------------------------------------

class Loader {
 public:
  Loader(const WeightFile& file, gpu::Backend& backend, LlamaWeights& out,
         const Architecture& arch)
      : file_(file), backend_(backend), out_(out), arch_(arch), gguf_(file.gguf() != nullptr) {}

  std::string tensor_name(Role role, int32_t layer) const {
    return model::tensor_name(arch_, gguf_, role, layer);
  }

  // The tensor of `role`, required to have `shape`.
  Result<TensorRef> need(Role role, int32_t layer, std::vector<int64_t> shape) {
    return need_named(tensor_name(role, layer), std::move(shape));
  }

  Result<TensorRef> need_named(const std::string& name, const std::vector<int64_t>& shape) {
    auto t = file_.find(name);
    if (!t) return t.error();
    if (!t->has_value()) return make_error(file_.path() + ": tensor " + name + " is missing");
    if ((*t)->shape != shape) {
      return make_error(file_.path() + ": tensor " + name + " has shape " +
                        shape_string((*t)->shape) + ", expected " + shape_string(shape) +
                        " from the model config");
    }
    if ((*t)->numel() % gpu::block_elems((*t)->format) != 0) {
      return make_error(file_.path() + ": tensor " + name + " is not a whole number of blocks");
    }
    if (int64_t bad = first_non_finite((*t)->format, (*t)->data, (*t)->numel()); bad >= 0) {
      return make_error(file_.path() + ": tensor " + name + " holds a non-finite value (NaN or Inf)" +
                        " at element " + std::to_string(bad));
    }
    return std::move(**t);
  }

  Result<bool> has(Role role, int32_t layer) {
    auto t = file_.find(tensor_name(role, layer));
    if (!t) return t.error();
    return t->has_value();
  }

  // A 1-D fp32 vector (norm weights, biases) in backend memory.
  Result<gpu::DeviceBuffer> vector(Role role, int32_t layer, int64_t n) {
    auto t = need(role, layer, {n});
    if (!t) return t.error();
    std::vector<float> v = to_f32(t->format, t->data, n);
    return place_floats(v, t->name);
  }

  // A norm weight [n]: (Architecture::norm_add_one, HF) 1 + w, the factor the
  // norm multiplies by; GGUF files hold that already (llama.cpp's converter).
  Result<gpu::DeviceBuffer> norm(Role role, int32_t layer, int64_t n) {
    auto t = need(role, layer, {n});
    if (!t) return t.error();
    std::vector<float> v = to_f32(t->format, t->data, n);
    if (arch_.norm_add_one && !gguf_) {
      for (float& x : v) x = 1.0f + x;
    }
    return place_floats(v, t->name);
  }

  Result<gpu::DeviceBuffer> place_floats(const std::vector<float>& v, const std::string& what) {
    auto buf = upload_bytes(backend_, v.data(), v.size() * sizeof(float), file_.path() + ": " + what);
    if (buf) out_.device_bytes += buf->size();
    return buf;
  }

  // The [rows, k] part of every expert e < E of an MoE role: GGUF: slices of
  // the one 3-D tensor [E, rows, k] (experts outermost: each expert's rows
  // are contiguous whole blocks; the tensor is checked once); HF: each
  // expert's own tensor.
  Result<std::vector<TensorRef>> expert_parts(Role role, int32_t layer, int64_t E, int64_t rows,
                                              int64_t k) {
    std::vector<TensorRef> parts;
    if (!gguf_) {
      for (int32_t e = 0; e < E; ++e) {
        auto t = need_named(expert_tensor_name(arch_, false, role, layer, e), {rows, k});
        if (!t) return t.error();
        parts.push_back(std::move(t).value());
      }
      return parts;
    }
    auto all = need(role, layer, {E, rows, k});
    if (!all) return all.error();
    const int64_t bytes = gpu::storage_bytes(all->format, rows * k);
    if ((rows * k) % gpu::block_elems(all->format) != 0) {
      return make_error(file_.path() + ": tensor " + all->name + ": an expert is not a whole number of blocks");
    }
    for (int64_t e = 0; e < E; ++e) {
      TensorRef t = *all;
      t.name = all->name + " (expert " + std::to_string(e) + ")";
      t.shape = {rows, k};
      t.data = all->data + e * bytes;
      parts.push_back(std::move(t));
    }
    return parts;
  }

  // Rows of several [n_i, k] tensors stacked into one [sum n_i, k] weight, with
  // the biases (if `bias_roles` is non-empty) stacked the same way.
  Result<DeviceLinear> fused(int32_t layer, const std::vector<Role>& roles,
                             const std::vector<int64_t>& rows, int64_t k,
                             const std::vector<Role>& bias_roles) {
    std::vector<TensorRef> parts;
    for (size_t i = 0; i < roles.size(); ++i) {
      auto t = need(roles[i], layer, {rows[i], k});
      if (!t) return t.error();
      parts.push_back(std::move(t).value());
    }
    std::vector<float> bias;
    for (size_t i = 0; i < bias_roles.size(); ++i) {
      auto t = need(bias_roles[i], layer, {rows[i]});
      if (!t) return t.error();
      std::vector<float> b = to_f32(t->format, t->data, rows[i]);
      bias.insert(bias.end(), b.begin(), b.end());
    }
    return stack(parts, k, bias, tensor_name(roles[0], layer));
  }

  // The rows of `parts` ([n_i, k] each) as one [sum n_i, k] weight (+ bias).
  Result<DeviceLinear> stack(const std::vector<TensorRef>& parts, int64_t k,
                             const std::vector<float>& bias, const std::string& what) {
    int64_t n = 0;
    for (const TensorRef& t : parts) n += t.shape[0];
    bool mixed = false;
    for (const TensorRef& t : parts) mixed = mixed || t.format != parts[0].format;
    for (const TensorRef& t : parts) note_format(t, mixed);
    std::vector<uint8_t> bytes;
    std::vector<float> floats;
    const bool to_q8 = backend_.kind() == gpu::BackendKind::kCpu;
    const LinearWeight w = stack_rows(parts, n, k, out_.precision, to_q8, bytes, floats);
    return place(HostLinear{w, bias.empty() ? nullptr : bias.data(), false}, what);
  }

  // One [n, k] weight (no bias) from its tensor; used in place when allowed.
  Result<DeviceLinear> single_ref(const TensorRef& t) {
    note_format(t);
    const bool aligned = reinterpret_cast<uintptr_t>(t.data) % 4 == 0;
    return place(HostLinear{LinearWeight{t.format, t.shape[0], t.shape[1], t.data}, nullptr, aligned},
                 t.name);
  }

  // One [n, k] weight; used in place when the backend and format allow it.
  Result<DeviceLinear> single(Role role, int32_t layer, int64_t n, int64_t k,
                              std::optional<Role> bias_role = std::nullopt) {
    auto t = need(role, layer, {n, k});
    if (!t) return t.error();
    note_format(*t);
    std::vector<float> bias;
    if (bias_role) {
      auto b = need(*bias_role, layer, {n});
      if (!b) return b.error();
      bias = to_f32(b->format, b->data, n);
    }
    const bool aligned = reinterpret_cast<uintptr_t>(t->data) % 4 == 0;
    HostLinear h{LinearWeight{t->format, n, k, t->data}, bias.empty() ? nullptr : bias.data(),
                 aligned};
    return place(h, t->name);
  }

  // Counts a linear weight the CPU kernels cannot run as stored (the load
  // summary's requantized tensors). `mixed`: a part of a stack of several
  // formats, which stack_rows judges by the row-layout kernels.
  void note_format(const TensorRef& t, bool mixed = false) {
    const bool quantized = out_.precision == WeightPrecision::kQuantized;
    const bool mixed_q8 = mixed && backend_.kind() == gpu::BackendKind::kCpu && quantized &&
                          gpu::is_block_quantized(t.format) && !cpu_runs_format_in_rows(t.format);
    if (mixed_q8 || cpu_requantizes(backend_.kind(), quantized, t.format)) {
      ++out_.requantized_tensors;
      requantized_types_[std::string(gpu::format_name(t.format))] += 1;
    }
  }

  // "Q4_K/Q6_K": the formats note_format counted, by name.
  std::string requantized_types() const {
    std::string s;
    for (const auto& [name, count] : requantized_types_) s += (s.empty() ? "" : "/") + name;
    return s;
  }

  Result<DeviceLinear> place(const HostLinear& h, const std::string& what) {
    auto d = upload_linear_weight(backend_, h, out_.precision);
    if (!d) return make_error(file_.path() + ": " + what + ": " + d.error().message);
    out_.device_bytes += d->storage.size() + d->bias.size();
    return d;
  }

 private:
  const WeightFile& file_;
  gpu::Backend& backend_;
  LlamaWeights& out_;
  const Architecture& arch_;
  bool gguf_;
  std::map<std::string, int> requantized_types_;
};

// Q, K, V: one fused weight, or (qk_norm) three weights and the two per-head norms.
Result<void> load_attention_in(Loader& ld, const Architecture& arch, const ModelConfig& c,
                               int32_t l, LlamaLayerWeights& w) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  const int64_t q_rows = int64_t(c.num_heads) * D, kv_rows = int64_t(c.num_kv_heads) * D;
  const std::vector<Role> roles = {Role::kQ, Role::kK, Role::kV};
  const std::vector<Role> biases = {Role::kQBias, Role::kKBias, Role::kVBias};
  if (arch.fused_qkv) {  // one [(Hq + 2 Hk) D, H] tensor, already in the fused order
    auto qkv = ld.fused(l, {Role::kQkv}, {q_rows + 2 * kv_rows}, H, {});
    if (!qkv) return qkv.error();
    w.qkv = std::move(qkv).value();
    return {};
  }
  if (!c.qk_norm) {
    std::vector<Role> qkv_bias;
    if (c.attention_bias) qkv_bias = biases;
    auto qkv = ld.fused(l, roles, {q_rows, kv_rows, kv_rows}, H, qkv_bias);
    if (!qkv) return qkv.error();
    w.qkv = std::move(qkv).value();
    return {};
  }
  DeviceLinear* outs[] = {&w.q, &w.k, &w.v};
  const int64_t rows[] = {q_rows, kv_rows, kv_rows};
  for (size_t i = 0; i < 3; ++i) {
    auto lin = ld.single(roles[i], l, rows[i], H,
                         c.attention_bias ? std::optional<Role>(biases[i]) : std::nullopt);
    if (!lin) return lin.error();
    *outs[i] = std::move(lin).value();
  }
  auto qn = ld.norm(Role::kQNorm, l, D);
  if (!qn) return qn.error();
  w.q_norm = std::move(qn).value();
  auto kn = ld.norm(Role::kKNorm, l, D);
  if (!kn) return kn.error();
  w.k_norm = std::move(kn).value();
  return {};
}

// MoE: the router [E, H] and per expert e gate|up [2 Ie, H] (gate rows
// first, as the dense gate_up) and down [H, Ie].
Result<void> load_moe(Loader& ld, const ModelConfig& c, int32_t l, LlamaLayerWeights& w) {
  const int64_t H = c.hidden_size, E = c.num_experts, Ie = c.expert_intermediate_size;
  auto router = ld.single(Role::kRouter, l, E, H);
  if (!router) return router.error();
  w.router = std::move(router).value();
  auto gates = ld.expert_parts(Role::kExpGate, l, E, Ie, H);
  if (!gates) return gates.error();
  auto ups = ld.expert_parts(Role::kExpUp, l, E, Ie, H);
  if (!ups) return ups.error();
  auto downs = ld.expert_parts(Role::kExpDown, l, E, H, Ie);
  if (!downs) return downs.error();
  for (int64_t e = 0; e < E; ++e) {
    MoeExpertWeights x;
    auto gate_up = ld.stack({(*gates)[size_t(e)], (*ups)[size_t(e)]}, H, {}, (*gates)[size_t(e)].name);
    if (!gate_up) return gate_up.error();
    x.gate_up = std::move(gate_up).value();
    auto down = ld.single_ref((*downs)[size_t(e)]);
    if (!down) return down.error();
    x.down = std::move(down).value();
    w.experts.push_back(std::move(x));
  }
  return {};
}

Result<LlamaLayerWeights> load_layer(Loader& ld, const Architecture& arch, const ModelConfig& c,
                                     int32_t l) {
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_rows = int64_t(c.num_heads) * D;
  LlamaLayerWeights w;
  auto attn_norm = ld.norm(Role::kAttnNorm, l, H);
  if (!attn_norm) return attn_norm.error();
  w.attn_norm = std::move(attn_norm).value();
  if (auto ok = load_attention_in(ld, arch, c, l, w); !ok) return ok.error();
  // HF Llama/Mistral put a bias on o_proj too when attention_bias is set; Qwen2 does not.
  std::optional<Role> o_bias;
  if (c.attention_bias && arch.o_bias_with_attention_bias) o_bias = Role::kOBias;
  auto o = ld.single(Role::kO, l, H, q_rows, o_bias);
  if (!o) return o.error();
  w.o = std::move(o).value();
  auto ffn_norm = ld.norm(Role::kFfnNorm, l, H);
  if (!ffn_norm) return ffn_norm.error();
  w.ffn_norm = std::move(ffn_norm).value();
  if (arch.post_norms) {
    auto post_attn = ld.norm(Role::kPostAttnNorm, l, H);
    if (!post_attn) return post_attn.error();
    w.post_attn_norm = std::move(post_attn).value();
    auto post_ffn = ld.norm(Role::kPostFfnNorm, l, H);
    if (!post_ffn) return post_ffn.error();
    w.post_ffn_norm = std::move(post_ffn).value();
  }
  if (c.num_experts > 0) {
    if (auto ok = load_moe(ld, c, l, w); !ok) return ok.error();
    return w;
  }
  auto gate_up = arch.fused_gate_up ? ld.fused(l, {Role::kGateUp}, {2 * I}, H, {})
                                    : ld.fused(l, {Role::kGate, Role::kUp}, {I, I}, H, {});
  if (!gate_up) return gate_up.error();
  w.gate_up = std::move(gate_up).value();
  auto down = ld.single(Role::kDown, l, H, I);
  if (!down) return down.error();
  w.down = std::move(down).value();
  return w;
}

// Token embedding (always fp32) and lm_head (the output tensor, or tied).
Result<void> load_embedding_and_head(Loader& ld, gpu::Backend& backend, LlamaWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t V = c.vocab_size, H = c.hidden_size;
  auto embed = ld.need(Role::kEmbed, 0, {V, H});
  if (!embed) return embed.error();
  std::vector<float> table = to_f32(embed->format, embed->data, V * H);  // [V, H]
  auto buf = ld.place_floats(table, embed->name);
  if (!buf) return buf.error();
  w.embedding = std::move(buf).value();
  auto has_output = ld.has(Role::kOutput, 0);
  if (!has_output) return has_output.error();
  const bool tied = c.tie_word_embeddings || !*has_output;
  Result<DeviceLinear> head = make_error("unset");
  if (!tied) {
    head = ld.single(Role::kOutput, 0, V, H);
  } else if (w.precision == WeightPrecision::kQuantized &&
             gpu::is_block_quantized(embed->format)) {
    ld.note_format(*embed);
    head = ld.place(HostLinear{LinearWeight{embed->format, V, H, embed->data}, nullptr, true},
                    embed->name + " (tied lm_head)");
  } else if (backend.host_accessible()) {  // the fp32 table itself, no second copy
    DeviceLinear view;
    view.weight = LinearWeight{WeightFormat::F32, V, H, w.embedding.data()};
    head = std::move(view);
  } else {
    head = ld.place(HostLinear{LinearWeight{WeightFormat::F32, V, H, table.data()}, nullptr, false},
                    embed->name + " (tied lm_head)");
  }
  if (!head) return head.error();
  w.lm_head = std::move(head).value();
  return {};
}

}  // namespace

Result<DeviceLinear> upload_linear_weight(gpu::Backend& backend, const HostLinear& host,
                                          WeightPrecision precision) {
  LinearWeight hw = host.weight;
  // A block format without CPU kernels becomes Q8_0 rows here (freed on
  // return: only the packed or uploaded copy stays).
  std::vector<uint8_t> q8;
  if (cpu_requantizes(backend.kind(), precision == WeightPrecision::kQuantized, hw.format)) {
    append_q8_0(hw, q8);
    hw = LinearWeight{WeightFormat::Q8_0, hw.n, hw.k, q8.data()};
  }
  DeviceLinear out;
  if (host.bias != nullptr) {
    auto bias = upload_bytes(backend, host.bias, size_t(hw.n) * sizeof(float), "bias");
    if (!bias) return bias.error();
    out.bias = std::move(bias).value();
  }
#ifdef PAGODA_HAVE_CUDA
  if (backend.kind() == gpu::BackendKind::kCuda) {
    auto& cuda = static_cast<gpu::cuda::CudaBackend&>(backend);
    auto dw = cuda.prepare_weight(hw, precision == WeightPrecision::kExact ? WeightFormat::F32
                                                                           : WeightFormat::BF16);
    if (!dw) return dw.error();
    out.weight = dw->weight;
    out.storage = std::move(dw->storage);
    return out;
  }
#endif
  // The CPU's quantized matmul reads block formats, and 16-bit weights kept in
  // 16 bits, fastest in its packed layouts (gpu/cpu/quant_packed.hpp, half_matmul.hpp).
  if (backend.kind() == gpu::BackendKind::kCpu && precision == WeightPrecision::kQuantized &&
      hw.layout == gpu::WeightLayout::kRows && gpu::cpu::packed_layout_enabled()) {
    const bool half = (hw.format == WeightFormat::F16 || hw.format == WeightFormat::BF16) &&
                      hw.k % 32 == 0;
    if (half || gpu::cpu::packed_tile_bytes(hw.format) > 0) {
      std::vector<uint8_t> packed;
      auto pw = half ? gpu::cpu::pack_half_weight(hw, packed) : gpu::cpu::pack_weight(hw, packed);
      if (!pw) return pw.error();
      std::vector<uint8_t>().swap(q8);  // packed now: drop the rows before the upload copy
      auto storage = upload_bytes(backend, packed.data(), packed.size(), "weight");
      if (!storage) return storage.error();
      out.storage = std::move(storage).value();
      out.weight = *pw;
      out.weight.data = out.storage.data();
      return out;
    }
  }
  // The CPU matmul takes F32 and the block formats; exact mode takes F32 only.
  const bool convert = hw.format == WeightFormat::F16 || hw.format == WeightFormat::BF16 ||
                       (precision == WeightPrecision::kExact && hw.format != WeightFormat::F32);
  if (!convert && host.may_alias && q8.empty() && backend.host_accessible()) {
    out.weight = hw;
    return out;
  }
  std::vector<float> converted;
  LinearWeight w = hw;
  if (convert) {
    converted = to_f32(hw.format, hw.data, hw.n * hw.k);
    w = LinearWeight{WeightFormat::F32, hw.n, hw.k, converted.data()};
  }
  auto storage = upload_bytes(backend, w.data, size_t(w.n * w.row_bytes()), "weight");
  if (!storage) return storage.error();
  out.storage = std::move(storage).value();
  out.weight = LinearWeight{w.format, w.n, w.k, out.storage.data()};
  return out;
}

Result<LlamaWeights> load_llama_weights(const std::string& model_path, gpu::Backend& backend,
                                        const WeightLoadOptions& options) {
  if (options.load_format == LoadFormat::kDummy) {
    auto config = load_model_config(model_path);
    if (!config) return config.error();
    if (config->num_experts > 0) {
      return make_error(model_path + ": --load-format dummy does not make mixture-of-experts weights yet");
    }
    return make_dummy_llama_weights(*config, backend, options);
  }
  auto file = WeightFile::open(model_path);
  if (!file) return file.error();
  const WeightFile& f = **file;
  LlamaWeights w;
  w.precision = options.precision;
  auto config = f.gguf() != nullptr ? config_from_gguf(*f.gguf()) : load_model_config(model_path);
  if (!config) return config.error();
  w.config = std::move(config).value();
  if (auto ok = validate_config(w.config, f.path()); !ok) return ok.error();
  const ModelConfig& c = w.config;
  const Architecture* arch = find_architecture(c.architecture);
  if (arch == nullptr) return make_error(f.path() + ": unknown architecture " + c.architecture);
  Loader ld(f, backend, w, *arch);
  if (auto ok = load_embedding_and_head(ld, backend, w); !ok) return ok.error();
  for (int32_t l = 0; l < c.num_layers; ++l) {
    auto layer = load_layer(ld, *arch, c, l);
    if (!layer) return layer.error();
    w.layers.push_back(std::move(layer).value());
    if (options.progress) options.progress(l + 1, c.num_layers);
  }
  if (w.requantized_tensors > 0) {
    std::fprintf(stderr,
                 "pagoda: %d tensors of type %s requantized to Q8_0 for the CPU kernels "
                 "(fused Q|K|V or gate|up groups of mixed block formats, or all the "
                 "packed-only types with PAGODA_CPU_PACKED=0)\n",
                 w.requantized_tensors, ld.requantized_types().c_str());
  }
  auto norm = ld.norm(Role::kFinalNorm, 0, c.hidden_size);
  if (!norm) return norm.error();
  w.final_norm = std::move(norm).value();
  if (c.rope_scaling.type == RopeScalingType::kFreqFactors && f.gguf() != nullptr) {
    const GgufTensorInfo* info = f.gguf()->find_tensor("rope_freqs.weight");
    auto fmt = info ? gpu::weight_format_from_ggml(info->raw_type) : std::nullopt;
    if (!fmt) return make_error(f.path() + ": rope_freqs.weight is missing or of a bad type");
    w.rope_freq_factors = to_f32(*fmt, f.gguf()->tensor_data(*info), c.head_dim / 2);
    for (float x : w.rope_freq_factors) {
      if (!(std::isfinite(x) && x > 0)) {
        return make_error(f.path() + ": rope_freqs.weight holds a value that is not a positive finite number");
      }
    }
  }
  w.source_keepalive = *file;
  return w;
}

}  // namespace pagoda::model
