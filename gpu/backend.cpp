#include "gpu/backend.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cpu/cpu_backend.hpp"
#include "gpu/device.hpp"

#ifdef PAGODA_HAVE_CUDA
#include "gpu/cuda/cuda_backend.hpp"
#endif

namespace pagoda::gpu {

void DeviceBuffer::reset() noexcept {
  if (ptr_ != nullptr && owner_ != nullptr) owner_->release(ptr_, bytes_);
  owner_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

Result<PinnedBuffer> Backend::allocate_pinned(size_t bytes) {
  if (bytes == 0) return PinnedBuffer();
  void* p = ::operator new(bytes, std::align_val_t(256), std::nothrow);
  if (p == nullptr) return make_error("allocate_pinned: out of host memory (" + std::to_string(bytes) + " bytes)");
  return PinnedBuffer(p, bytes, [](void* q) noexcept { ::operator delete(q, std::align_val_t(256)); });
}

Result<void> Backend::upload_async(DeviceBuffer& dst, size_t dst_offset, const void* src,
                                   size_t bytes) {
  return upload(dst, dst_offset, src, bytes);
}

Result<std::unique_ptr<OpGraph>> Backend::capture(const std::function<Result<void>()>&) {
  return make_error(std::string(name()) + " backend: op graphs are not supported");
}

Result<void> Backend::replay(const OpGraph&) {
  return make_error(std::string(name()) + " backend: op graphs are not supported");
}

void Backend::gelu_tanh_mul(const GeluMulParams&) {
  std::fprintf(stderr, "pagoda: the %s backend has no gelu_tanh_mul op\n", std::string(name()).c_str());
  std::abort();
}

void Backend::scale_cap(const ScaleCapParams&) {
  std::fprintf(stderr, "pagoda: the %s backend has no scale_cap op\n", std::string(name()).c_str());
  std::abort();
}

namespace {

Result<void> validate_kv_spec(const KvCacheSpec& s) {
  if (s.num_layers <= 0 || s.num_kv_heads <= 0 || s.head_dim <= 0) {
    return make_error("kv cache: num_layers, num_kv_heads and head_dim must be > 0");
  }
  if (s.block_size != 8 && s.block_size != 16 && s.block_size != 32) {
    return make_error("kv cache: block_size must be 8, 16 or 32, got " +
                      std::to_string(s.block_size));
  }
  return {};
}

}  // namespace

Result<KvCache> Backend::create_kv_cache(const KvCacheSpec& spec, int64_t num_blocks) {
  if (auto ok = validate_kv_spec(spec); !ok) return ok.error();
  if (num_blocks <= 0) return make_error("kv cache: num_blocks must be > 0");
  const KvCacheLayout layout = spec.layout(num_blocks);
  const size_t layer_bytes = size_t(layout.layer_elements() * kv_dtype_bytes(spec.dtype));
  std::vector<DeviceBuffer> k, v;
  std::vector<void*> ptrs(size_t(2 * spec.num_layers));
  for (int32_t l = 0; l < spec.num_layers; ++l) {
    for (auto* list : {&k, &v}) {
      auto buf = allocate(layer_bytes);
      if (!buf) {
        return make_error("kv cache: allocating layer " + std::to_string(l) + " (" +
                          std::to_string(layer_bytes) + " bytes) failed: " + buf.error().message);
      }
      list->push_back(std::move(buf).value());
    }
    ptrs[size_t(l)] = k.back().data();
    ptrs[size_t(spec.num_layers + l)] = v.back().data();
  }
  auto table = allocate(ptrs.size() * sizeof(void*));
  if (!table) return make_error("kv cache: layer pointer table: " + table.error().message);
  if (auto up = upload(*table, 0, ptrs.data(), ptrs.size() * sizeof(void*)); !up) {
    return up.error();
  }
  return KvCache(spec, num_blocks, std::move(k), std::move(v), std::move(table).value());
}

Result<KvCache> Backend::create_kv_cache_for_budget(const KvCacheSpec& spec,
                                                    uint64_t budget_bytes) {
  if (auto ok = validate_kv_spec(spec); !ok) return ok.error();
  int64_t blocks = spec.blocks_for_budget(budget_bytes);
  if (blocks <= 0) {
    return make_error("kv cache: budget of " + std::to_string(budget_bytes) +
                      " bytes is below one block (" +
                      std::to_string(spec.bytes_per_block_all_layers()) + " bytes)");
  }
  return create_kv_cache(spec, blocks);
}

Result<RopeTable> Backend::create_rope_table(const RopeConfig& config) {
  if (auto ok = validate_rope_config(config); !ok) return ok.error();
  std::vector<float> inv_freq = rope_inv_freq(config);
  const size_t bytes = inv_freq.size() * sizeof(float);
  auto buf = allocate(bytes);
  if (!buf) return make_error("rope table: " + buf.error().message);
  if (auto up = upload(*buf, 0, inv_freq.data(), bytes); !up) return up.error();
  return RopeTable(config, std::move(buf).value());
}

StepFeatureEnv step_feature_env() {
  auto is = [](const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, value) == 0;
  };
  StepFeatureEnv e;
  e.graphs_off = is("PAGODA_CUDA_GRAPHS", "off");
  e.rowwise_prefill = is("PAGODA_CUDA_PREFILL_KERNEL", "rowwise");
  e.sync_uploads = is("PAGODA_CUDA_ASYNC_UPLOADS", "off");
  e.decode_kernels_off = is("PAGODA_CUDA_DECODE_KERNELS", "off");
  if (const char* v = std::getenv("PAGODA_CUDA_SPLIT_K"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 0 && n <= (1 << 20)) e.split_k = int32_t(n);
  }
  return e;
}

BackendOptions with_feature_env(BackendOptions o) {
  const StepFeatureEnv e = step_feature_env();
  if (e.rowwise_prefill) o.tiled_prefill = false;
  if (e.sync_uploads) o.async_uploads = false;
  if (e.decode_kernels_off) o.decode_kernels = false;
  return o;
}

Result<std::unique_ptr<Backend>> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::kCuda || kind == BackendKind::kAuto) {
    DeviceInfo info = probe_devices();
#ifdef PAGODA_HAVE_CUDA
    if (info.device_count > 0) {
      Result<std::unique_ptr<Backend>> cuda = cuda::make_cuda_backend(with_feature_env(options));
      // kAuto falls back to the CPU when the device cannot be used.
      if (cuda || kind == BackendKind::kCuda) return cuda;
    }
#endif
    if (kind == BackendKind::kCuda) {
      std::string why = info.device_count > 0 ? "the build has no CUDA support" : info.reason;
      return make_error("CUDA backend unavailable: " + why);
    }
  }
  std::unique_ptr<Backend> cpu = std::make_unique<cpu::CpuBackend>(options);
  return cpu;
}

}  // namespace pagoda::gpu
