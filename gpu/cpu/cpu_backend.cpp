#include "gpu/cpu/cpu_backend.hpp"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "gpu/cpu/cpu_isa.hpp"

namespace pagoda::gpu::cpu {

namespace {
constexpr std::align_val_t kAlignment{256};

Result<void> check_range(size_t buffer_bytes, size_t offset, size_t bytes, const char* what) {
  if (offset > buffer_bytes || bytes > buffer_bytes - offset) {
    return make_error(std::string(what) + ": range [" + std::to_string(offset) + ", +" +
                      std::to_string(bytes) + ") is outside a buffer of " +
                      std::to_string(buffer_bytes) + " bytes");
  }
  return {};
}
}  // namespace

CpuBackend::CpuBackend(const BackendOptions& options) : limit_(options.memory_limit_bytes) {
  if (options.cpu_threads > 0) {
    own_pool_ = std::make_unique<ThreadPool>(options.cpu_threads);
    pool_ = own_pool_.get();
  } else {
    pool_ = &ThreadPool::global();
  }
  static std::once_flag logged;
  std::call_once(logged, [this] {
    std::fprintf(stderr, "pagoda: cpu backend: %s; %zu threads (%zu physical cores)\n",
                 cpu_isa_summary().c_str(), pool_->size(), ThreadPool::physical_cores());
  });
}

CpuBackend::~CpuBackend() = default;

Result<DeviceBuffer> CpuBackend::allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  uint64_t before = allocated_.fetch_add(bytes);
  if (limit_ != 0 && before + bytes > limit_) {
    allocated_.fetch_sub(bytes);
    return make_error("cpu backend: allocating " + std::to_string(bytes) +
                      " bytes would exceed the memory limit of " + std::to_string(limit_) +
                      " (" + std::to_string(before) + " in use)");
  }
  void* ptr = ::operator new(bytes, kAlignment, std::nothrow);
  if (ptr == nullptr) {
    allocated_.fetch_sub(bytes);
    return make_error("cpu backend: out of memory allocating " + std::to_string(bytes) + " bytes");
  }
  return wrap_allocation(ptr, bytes);
}

void CpuBackend::release(void* ptr, size_t bytes) noexcept {
  ::operator delete(ptr, kAlignment);
  allocated_.fetch_sub(bytes);
}

Result<void> CpuBackend::upload(DeviceBuffer& dst, size_t dst_offset, const void* src,
                                size_t bytes) {
  if (auto ok = check_range(dst.size(), dst_offset, bytes, "upload"); !ok) return ok;
  if (bytes > 0) std::memcpy(static_cast<char*>(dst.data()) + dst_offset, src, bytes);
  return {};
}

Result<void> CpuBackend::download(const DeviceBuffer& src, size_t src_offset, void* dst,
                                  size_t bytes) {
  if (auto ok = check_range(src.size(), src_offset, bytes, "download"); !ok) return ok;
  if (bytes > 0) std::memcpy(dst, static_cast<const char*>(src.data()) + src_offset, bytes);
  return {};
}

Result<void> CpuBackend::matmul(const MatmulParams& p) {
  const LinearWeight& w = p.weight;
  if (w.n <= 0 || w.k <= 0 || p.m < 0 || p.x_stride < w.k) {
    return make_error("cpu matmul: bad shape M=" + std::to_string(p.m) + " N=" +
                      std::to_string(w.n) + " K=" + std::to_string(w.k) +
                      " x_stride=" + std::to_string(p.x_stride));
  }
  if (p.m == 0) return {};
  if (p.x == nullptr || p.y == nullptr || w.data == nullptr) {
    return make_error("cpu matmul: null x, y or weight data");
  }
  const float* x = p.x;
  if (p.x_stride != w.k) {  // pack the strided rows: the kernels read x[M, K] packed
    const size_t elems = size_t(p.m * w.k);
    if (matmul_packed_x_.size() < elems) matmul_packed_x_.resize(elems);
    float* packed = matmul_packed_x_.data();
    for (int64_t m = 0; m < p.m; ++m) {
      std::memcpy(packed + m * w.k, p.x + m * p.x_stride, size_t(w.k) * sizeof(float));
    }
    x = packed;
  }
  if (auto r = cpu::matmul(w, x, p.y, p.m, matmul_scratch_, *pool_); !r) return r;
  add_bias(p);
  return {};
}

void CpuBackend::add_bias(const MatmulParams& p) {
  if (p.bias == nullptr) return;
  const float* bias = p.bias;
  float* y = p.y;
  const int64_t n = p.weight.n;
  pool_->parallel_for(size_t(p.m), [=](size_t m0, size_t m1) {
    for (size_t m = m0; m < m1; ++m) {
      float* row = y + int64_t(m) * n;
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
  }, 16);
}

bool CpuBackend::fusable(const MatmulParams& mm, const float* out, int64_t rows,
                         int64_t width) const {
  const WeightFormat f = mm.weight.format;
  const bool quantized = f == WeightFormat::Q8_0 || f == WeightFormat::Q4_0 ||
                         f == WeightFormat::Q4_1;
  return quantized && mm.x == out && mm.m == rows && rows > 0 && mm.x_stride == width &&
         mm.weight.k == width && width % 32 == 0 && mm.y != nullptr && mm.weight.data != nullptr;
}

Result<void> CpuBackend::matmul_quantized(const MatmulParams& mm, const detail::ActBlock* act) {
  if (auto r = quant_matmul_quantized(mm.weight, act, mm.y, mm.m, best_quant_isa(), *pool_); !r) {
    return r;
  }
  add_bias(mm);
  return {};
}

Result<void> CpuBackend::rms_norm_matmul(const RmsNormParams& n, const MatmulParams& mm) {
  if (!fusable(mm, n.out, n.num_tokens, n.hidden)) return Backend::rms_norm_matmul(n, mm);
  detail::ActBlock* act = matmul_scratch_.activation_blocks(size_t(n.num_tokens) * size_t(n.hidden / 32));
  cpu::rms_norm(n, *pool_, activation_quantizer(best_quant_isa()), act);
  return matmul_quantized(mm, act);
}

Result<void> CpuBackend::silu_mul_matmul(const SiluMulParams& s, const MatmulParams& mm) {
  if (!fusable(mm, s.out, s.num_tokens, s.intermediate)) return Backend::silu_mul_matmul(s, mm);
  detail::ActBlock* act =
      matmul_scratch_.activation_blocks(size_t(s.num_tokens) * size_t(s.intermediate / 32));
  cpu::silu_mul(s, *pool_, activation_quantizer(best_quant_isa()), act);
  return matmul_quantized(mm, act);
}

}  // namespace pagoda::gpu::cpu
