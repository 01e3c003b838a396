// KvCache: the paged KV cache of all layers, owned by the Backend's memory.
// Per layer one K and one V array, laid out as gpu/kv_cache_layout.hpp says.
// Made by Backend::create_kv_cache*; move-only; must not outlive its Backend.
//
// The cache's contents start undefined (never zeroed): attention never reads
// a slot that was not written (see AttentionMetadata). Not thread-safe; ops on
// it are issued by one thread (the executor).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/device_buffer.hpp"
#include "gpu/kv_cache_layout.hpp"
#include "gpu/ops.hpp"

namespace pagoda::gpu {

struct KvLayerView {
  void* k = nullptr;  // [num_blocks, Hk, block_size, D] of spec().dtype
  void* v = nullptr;
};

class KvCache {
 public:
  KvCache() = default;
  KvCache(KvCacheSpec spec, int64_t num_blocks, std::vector<DeviceBuffer> k,
          std::vector<DeviceBuffer> v, DeviceBuffer layer_ptrs)
      : spec_(spec), num_blocks_(num_blocks), k_(std::move(k)), v_(std::move(v)),
        layer_ptrs_(std::move(layer_ptrs)) {}

  const KvCacheSpec& spec() const { return spec_; }
  int64_t num_blocks() const { return num_blocks_; }
  int32_t num_layers() const { return spec_.num_layers; }
  KvCacheLayout layout() const { return spec_.layout(num_blocks_); }

  // Requires 0 <= layer < num_layers().
  KvLayerView layer(int32_t layer) const {
    return KvLayerView{k_[size_t(layer)].data(), v_[size_t(layer)].data()};
  }

  // Parameters for Backend::copy_blocks over every layer. block_pairs is
  // [num_pairs, 2] (src, dst) in the backend's memory.
  CopyBlocksParams copy_blocks_params(const int32_t* block_pairs, int32_t num_pairs) const {
    CopyBlocksParams p;
    void* const* ptrs = layer_ptrs_.as<void* const>();
    p.k_layers = ptrs;
    p.v_layers = ptrs == nullptr ? nullptr : ptrs + spec_.num_layers;
    p.num_layers = spec_.num_layers;
    p.block_pairs = block_pairs;
    p.num_pairs = num_pairs;
    p.layout = layout();
    p.dtype = spec_.dtype;
    return p;
  }

 private:
  KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  std::vector<DeviceBuffer> k_, v_;  // [num_layers] each
  DeviceBuffer layer_ptrs_;          // backend memory: void*[2 * num_layers], K then V
};

}  // namespace pagoda::gpu
