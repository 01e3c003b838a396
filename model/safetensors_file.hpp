// Safetensors: HuggingFace's tensor file format, and model directories made
// of one file or of shards listed by an index.
//
// File layout: u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [r, c], "data_offsets": [begin, end]},
//    ..., "__metadata__": {...}}
// then the data section; offsets are relative to its start (byte 8 + N).
//
// Contract:
//  - open() parses the header with simdjson's validating DOM parser and checks
//    every tensor: dtype in {F32, F16, BF16} (any other dtype is an Error naming
//    the tensor), shape of non-negative integers, data_offsets inside the file
//    and end - begin == product(shape) * dtype size. "__metadata__" is ignored.
//    Every Error message names the file.
//  - The file stays mapped while the SafetensorsFile (or the SafetensorsModel
//    holding it) lives; StTensor::data points into the mapping and is valid
//    until then, including across moves. Data is not necessarily aligned.
//  - Move-only. Thread-safety: const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/result.hpp"
#include "model/mapped_file.hpp"

namespace pagoda::model {

enum class StDtype : uint8_t { kF32, kF16, kBF16 };

const char* st_dtype_name(StDtype dtype);  // "F32", "F16", "BF16"
uint32_t st_dtype_size(StDtype dtype);     // bytes per element

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::kF32;
  // Row-major (PyTorch order): shape.back() is the fastest-varying dimension.
  std::vector<uint64_t> shape;
  const uint8_t* data = nullptr;  // nbytes bytes in the owning file's mapping
  uint64_t nbytes = 0;
  uint64_t num_elements() const;
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint64_t file_size() const { return file_.size(); }
  const std::vector<StTensor>& tensors() const { return tensors_; }  // header order
  const StTensor* find(std::string_view name) const;                 // nullptr when absent
  void release_resident() const { file_.release_resident(); }

 private:
  MappedFile file_;
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A HuggingFace model's weights: `model.safetensors`, or the shards named by
// `model.safetensors.index.json` (its weight_map: tensor name -> shard file in
// the same directory). Also accepts the path of a single .safetensors file.
// Errors: no weights found, a malformed index, a shard name with a path
// separator, a weight_map entry absent from its shard, a tensor in two shards.
class SafetensorsModel {
 public:
  static Result<SafetensorsModel> open(const std::string& path);

  const std::vector<SafetensorsFile>& shards() const { return shards_; }
  // Every shard's mapping's resident pages dropped (MappedFile::release_resident).
  void release_resident() const;
  uint64_t total_file_size() const;  // sum over shards
  size_t tensor_count() const { return index_.size(); }
  std::vector<const StTensor*> tensors() const;       // sorted by name
  const StTensor* find(std::string_view name) const;  // nullptr when absent

 private:
  Result<void> add_shard(SafetensorsFile shard);

  std::vector<SafetensorsFile> shards_;
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> index_;  // shard, tensor
};

// Converts a tensor's elements to float. dst: [t.num_elements()].
void to_float(const StTensor& t, float* dst);
std::vector<float> to_float(const StTensor& t);

}  // namespace pagoda::model
