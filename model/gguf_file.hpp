// GgufFile: a read-only, memory-mapped GGUF model file (versions 2 and 3).
//
// Contract:
//  - open() validates the whole header up front: magic, version, every
//    metadata key/value (all 13 value types, nested arrays), every tensor info
//    (name, dims, ggml type, offset), the alignment (general.alignment, default
//    32) and that each tensor's bytes lie inside the file. Any problem is an
//    Error whose message names the file and the problem; open() never crashes
//    on hostile input.
//  - The file stays mapped for the GgufFile's lifetime; tensor_data() pointers
//    are valid until the GgufFile is destroyed. Move-only.
//  - Thread-safety: const methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/result.hpp"

namespace pagoda::model {

enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
  kFloat64 = 12,
};

// ggml tensor types (values as in ggml.h). Only those listed are dequantised.
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kBF16 = 30,
};

// One metadata value. Scalars are stored widened; arrays keep their elements.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType array_type = GgufValueType::kUint8;  // element type when type == kArray
  uint64_t u = 0;       // unsigned integers and bool
  int64_t i = 0;        // signed integers (also set for unsigned values that fit)
  double f = 0.0;       // floats (also set for every integer type)
  std::string s;        // kString
  std::vector<GgufValue> array;  // kArray
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the fastest-varying (row length)
  uint32_t raw_type = 0;       // the ggml type id as stored in the file
  uint64_t offset = 0;         // absolute byte offset in the file
  uint64_t nbytes = 0;         // size of the data in bytes
  uint64_t num_elements() const;
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const;
  uint32_t version() const;
  uint64_t file_size() const;
  // The mapping's resident pages dropped (MappedFile::release_resident).
  void release_resident() const;
  uint64_t alignment() const;
  // Absolute file offset of the data section (tensor offsets are absolute already).
  uint64_t data_offset() const;

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const;
  const GgufValue* find(std::string_view key) const;  // nullptr when absent

  // Typed getters: an Error names the key when it is absent or of another type.
  Result<std::string> get_string(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;       // any integer type
  Result<double> get_float(std::string_view key) const;      // any numeric type
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  // Points into the mapping: tensor.nbytes bytes.
  const uint8_t* tensor_data(const GgufTensorInfo& tensor) const;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::model
