// CPU twin of the KV cache write by slot mapping (KvCacheWriteParams). The
// cache holds fp32 (copied) or bf16 (rounded to nearest even, as the CUDA
// write rounds: gpu::fp32_to_bf16).
#include <algorithm>
#include <cassert>
#include <cstring>

#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::cpu {

namespace detail {

namespace {

// dst[i] = bf16(src[i]) for i < n.
void store_bf16(uint16_t* dst, const float* src, int32_t n) {
  for (int32_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

}  // namespace

void kv_write_token(const KvCacheWriteParams& p, size_t t) {
  const KvCacheLayout& L = p.layout;
  const size_t row_bytes = size_t(L.head_dim) * sizeof(float);
  const int64_t num_slots = L.num_blocks * L.block_size;
  const int64_t slot = p.slot_mapping[t];
  if (slot < 0) return;  // padding row
  assert(slot < num_slots);
  if (slot >= num_slots) return;
  const float* k = p.k + int64_t(t) * p.k_stride;
  const float* v = p.v + int64_t(t) * p.v_stride;
  if (p.dtype == KvDtype::kBF16) {
    auto* k_cache = static_cast<uint16_t*>(p.k_cache);
    auto* v_cache = static_cast<uint16_t*>(p.v_cache);
    for (int32_t h = 0; h < L.num_kv_heads; ++h) {
      const int64_t dst = L.slot_offset(slot, h);
      store_bf16(k_cache + dst, k + int64_t{h} * L.head_dim, L.head_dim);
      store_bf16(v_cache + dst, v + int64_t{h} * L.head_dim, L.head_dim);
    }
    return;
  }
  assert(p.dtype == KvDtype::kF32);
  float* k_cache = static_cast<float*>(p.k_cache);
  float* v_cache = static_cast<float*>(p.v_cache);
  for (int32_t h = 0; h < L.num_kv_heads; ++h) {
    const int64_t dst = L.slot_offset(slot, h);
    std::memcpy(k_cache + dst, k + int64_t{h} * L.head_dim, row_bytes);
    std::memcpy(v_cache + dst, v + int64_t{h} * L.head_dim, row_bytes);
  }
}

}  // namespace detail

void kv_cache_write(const KvCacheWriteParams& p, ThreadPool& pool) {
  const size_t per_token = size_t(p.layout.num_kv_heads) * size_t(p.layout.head_dim) * 2;
  const size_t min_rows = std::max<size_t>(1, 32768 / std::max<size_t>(per_token, 1));
  pool.parallel_for(size_t(std::max(p.num_tokens, 0)), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) detail::kv_write_token(p, t);
  }, min_rows);
}

}  // namespace pagoda::gpu::cpu
