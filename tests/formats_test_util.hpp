// Test helpers for the model-format tests: a byte builder, a small GGUF writer
// (v2/v3 layout, every value type, tensors with aligned data) that can also
// produce deliberately broken files, and per-process temporary files.
// Header-only; used by gguf_file_test, dequant_test, safetensors_file_test and
// model_config_test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace pagoda::test {

// Little-endian byte builder.
struct Bytes {
  std::vector<uint8_t> b;

  Bytes& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Bytes& u16(uint16_t v) { return le(v, 2); }
  Bytes& u32(uint32_t v) { return le(v, 4); }
  Bytes& u64(uint64_t v) { return le(v, 8); }
  Bytes& f32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u32(u);
  }
  Bytes& f64(double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return u64(u);
  }
  Bytes& str(const std::string& s) {  // GGUF string: u64 length + bytes
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b.insert(b.end(), v.begin(), v.end());
    return *this;
  }
  Bytes& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }

 private:
  Bytes& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
};

// GGUF value type ids (as in the spec), spelled out independently of the code under test.
enum : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kStr = 8,
  kArr = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type = 0;
  std::vector<uint8_t> data;
  std::optional<uint64_t> offset;  // relative offset override
  std::optional<uint32_t> n_dims;  // n_dims override (dims still written as given)
};

inline GgufTensorSpec spec(std::string name, std::vector<uint64_t> dims, uint32_t type,
                           std::vector<uint8_t> data, std::optional<uint64_t> offset = {},
                           std::optional<uint32_t> n_dims = {}) {
  GgufTensorSpec t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.type = type;
  t.data = std::move(data);
  t.offset = offset;
  t.n_dims = n_dims;
  return t;
}

class GgufWriter {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;  // layout only; add general.alignment yourself when not 32
  std::optional<uint64_t> kv_count_override;
  std::optional<uint64_t> tensor_count_override;
  std::string magic = "GGUF";

  // One metadata entry with a raw payload (the encoded value).
  GgufWriter& kv(const std::string& key, uint32_t type, const Bytes& payload) {
    kvs_.str(key).u32(type).raw(payload.b);
    ++kv_count_;
    return *this;
  }
  GgufWriter& kv_u32(const std::string& key, uint32_t v) { return kv(key, kU32, Bytes().u32(v)); }
  GgufWriter& kv_u64(const std::string& key, uint64_t v) { return kv(key, kU64, Bytes().u64(v)); }
  GgufWriter& kv_f32(const std::string& key, float v) { return kv(key, kF32, Bytes().f32(v)); }
  GgufWriter& kv_bool(const std::string& key, bool v) { return kv(key, kBool, Bytes().u8(v)); }
  GgufWriter& kv_str(const std::string& key, const std::string& v) {
    return kv(key, kStr, Bytes().str(v));
  }
  GgufWriter& kv_str_array(const std::string& key, const std::vector<std::string>& v) {
    Bytes p;
    p.u32(kStr).u64(v.size());
    for (const auto& s : v) p.str(s);
    return kv(key, kArr, p);
  }

  GgufWriter& tensor(GgufTensorSpec t) {
    tensors_.push_back(std::move(t));
    return *this;
  }

  std::vector<uint8_t> build() const {
    Bytes out;
    out.raw(magic).u32(version);
    out.u64(tensor_count_override.value_or(tensors_.size()));
    out.u64(kv_count_override.value_or(kv_count_));
    out.raw(kvs_.b);
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : tensors_) {
      offsets.push_back(t.offset.value_or(next));
      next = pad(next + t.data.size());
      out.str(t.name).u32(t.n_dims.value_or(static_cast<uint32_t>(t.dims.size())));
      for (uint64_t d : t.dims) out.u64(d);
      out.u32(t.type).u64(offsets.back());
    }
    if (tensors_.empty()) return out.b;
    out.b.resize(pad(out.b.size()), 0);
    const size_t data_start = out.b.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].offset) continue;  // overridden offsets get no data
      out.b.resize(data_start + offsets[i], 0);
      out.raw(tensors_[i].data);
    }
    return out.b;
  }

 private:
  uint64_t pad(uint64_t n) const { return (n + alignment - 1) / alignment * alignment; }

  Bytes kvs_;
  uint64_t kv_count_ = 0;
  std::vector<GgufTensorSpec> tensors_;
};

// A per-process scratch directory under the gtest temp dir.
inline std::string temp_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::path(testing::TempDir()) /
             ("pagoda_formats_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

inline std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = (std::filesystem::path(temp_dir()) / name).string();
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  // Unlink first: truncating and rewriting a file makes ext4 flush it (auto_da_alloc).
  std::filesystem::remove(path);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

inline std::string write_file(const std::string& name, const std::string& text) {
  return write_file(name, std::vector<uint8_t>(text.begin(), text.end()));
}

// The real model: $PAGODA_MODEL or the default download path ("" when absent).
inline std::string real_model_path() {
  const char* env = std::getenv("PAGODA_MODEL");
  std::string p = env && *env ? env : "";
  if (p.empty()) {
    const char* home = std::getenv("HOME");
    p = std::string(home ? home : "") + "/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  }
  return std::filesystem::exists(p) ? p : "";
}

#define PAGODA_REQUIRE_REAL_MODEL(var)                                              \
  const std::string var = ::pagoda::test::real_model_path();                        \
  if (var.empty()) {                                                                \
    GTEST_SKIP() << "real model absent: set PAGODA_MODEL or run tools/fetch-model"; \
  }

}  // namespace pagoda::test
