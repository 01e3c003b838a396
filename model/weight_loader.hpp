// The weight loader's parts (internal to model/; used by llama_weights.cpp
// and moe_weights.cpp): the model file (one GGUF, or an HF directory's
// safetensors) and Loader, which finds a tensor of a role, checks its shape,
// type and values, and places it in backend memory as the forward pass
// takes it (see model/llama_weights.hpp for the layouts and precisions).
//
// Ownership: a Loader borrows the file, the backend and the LlamaWeights it
// fills; TensorRef::data points into the file's mapping. Not thread-safe
// (one load at a time).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/architecture.hpp"
#include "model/dequant.hpp"
#include "model/gguf_file.hpp"
#include "model/llama_weights.hpp"
#include "model/safetensors_file.hpp"
#include "model/weight_check.hpp"
#include "model/weight_requant.hpp"

namespace pagoda::model::loader {

using gpu::LinearWeight;
using gpu::WeightFormat;

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

inline std::string shape_string(const std::vector<int64_t>& shape) {
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
  // The mappings' resident pages dropped (MappedFile::release_resident): the
  // loader calls it once every weight is placed, so a weight the CPU packed
  // (or a backend copied) is not resident twice; weights used in place fault
  // back in as they are read.
  void release_resident() const {
    if (gguf_) gguf_->release_resident();
    if (st_) st_->release_resident();
  }

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

inline Result<gpu::DeviceBuffer> upload_bytes(gpu::Backend& b, const void* data, size_t bytes,
                                       const std::string& what) {
  auto buf = b.allocate(bytes);
  if (!buf) return make_error(what + ": " + buf.error().message);
  if (auto up = b.upload(*buf, 0, data, bytes); !up) {
    return make_error(what + ": " + up.error().message);
  }
  return std::move(buf).value();
}

inline std::vector<float> to_f32(WeightFormat f, const void* data, int64_t n) {
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
inline LinearWeight stack_rows(const std::vector<TensorRef>& parts, int64_t n, int64_t k,
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
      return make_error(file_.path() + ": tensor " + all->name +
                        ": an expert is not a whole number of blocks");
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

  // Whether the tensors of `roles` are loaded as separate weights rather than
  // stacked: the CPU in quantized precision and block types that differ
  // (stack_rows would turn the group into Q8_0 or fp32). Missing tensors say
  // false here; loading them reports the error.
  Result<bool> keeps_apart(int32_t layer, const std::vector<Role>& roles) {
    if (backend_.kind() != gpu::BackendKind::kCpu || out_.precision != WeightPrecision::kQuantized) {
      return false;
    }
    std::vector<WeightFormat> formats;
    for (Role role : roles) {
      auto t = file_.find(tensor_name(role, layer));
      if (!t) return t.error();
      if (!t->has_value()) return false;
      formats.push_back((*t)->format);
    }
    for (WeightFormat f : formats) {
      const bool blocks = gpu::is_block_quantized(f) || gpu::is_block_quantized(formats[0]);
      if (f != formats[0] && blocks) return true;
    }
    return false;
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

// MoE layers (moe_weights.cpp): the router and every expert's gate|up and down.
Result<void> load_moe(Loader& ld, const ModelConfig& c, int32_t layer, LlamaLayerWeights& w);

}  // namespace pagoda::model::loader
