// CpuBackend: the Backend that runs every op on host threads (gpu/cpu/*.cpp).
// Its "device memory" is host memory (host_accessible() is true), allocated
// 256-byte aligned and capped by BackendOptions::memory_limit_bytes when set.
//
// Thread-safety: as for every Backend, one issuing thread at a time; allocate
// and release are additionally safe from any thread (the byte counter is
// atomic), so buffers may be destroyed elsewhere.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/cpu/thread_pool.hpp"

namespace pagoda::gpu::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options = {});
  ~CpuBackend() override;

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string_view name() const override { return "cpu"; }
  bool host_accessible() const override { return true; }
  ThreadPool& pool() { return *pool_; }
  uint64_t allocated_bytes() const { return allocated_.load(); }

  Result<DeviceBuffer> allocate(size_t bytes) override;
  Result<void> upload(DeviceBuffer& dst, size_t dst_offset, const void* src,
                      size_t bytes) override;
  Result<void> download(const DeviceBuffer& src, size_t src_offset, void* dst,
                        size_t bytes) override;
  void synchronize() override {}

  void embedding(const EmbeddingParams& p) override { cpu::embedding(p, *pool_); }
  void rms_norm(const RmsNormParams& p) override { cpu::rms_norm(p, *pool_); }
  void rope(const RopeParams& p) override { cpu::rope(p, *pool_); }
  void silu_mul(const SiluMulParams& p) override { cpu::silu_mul(p, *pool_); }
  void gelu_tanh_mul(const GeluMulParams& p) override { cpu::gelu_tanh_mul(p, *pool_); }
  void scale_cap(const ScaleCapParams& p) override { cpu::scale_cap(p, *pool_); }
  void kv_cache_write(const KvCacheWriteParams& p) override { cpu::kv_cache_write(p, *pool_); }
  void paged_attention(const PagedAttentionParams& p) override {
    cpu::paged_attention(p, *pool_, attention_scratch_);
  }
  void copy_blocks(const CopyBlocksParams& p) override { cpu::copy_blocks(p, *pool_); }
  void sample(const SamplingParams& p) override { cpu::sample(p, *pool_, sampling_scratch_); }
  // cpu::matmul (gpu/cpu/quant_matmul.hpp): F32 -> OpenBLAS, Q8_0/Q4_0/Q4_1 ->
  // int8 kernels; F16/BF16 are an Error (convert them at load). Rows of x that
  // are x_stride != K apart are first packed into a grow-only scratch; the
  // bias, when given, is added afterwards. Errors: x_stride < K, bad shapes.
  Result<void> matmul(const MatmulParams& p) override;
  // Fused pairs (Backend's contract): rope + KV write token by token; the
  // norm / SiLU rows quantized in the same pass when mm's weight is
  // block-quantized, mm.x is the op's output with x_stride == K == its width
  // and mm.m its rows (else the two ops in turn). Bit-identical to the pairs.
  void rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w) override {
    cpu::rope_kv_write(r, w, *pool_);
  }
  Result<void> rms_norm_matmul(const RmsNormParams& n, const MatmulParams& mm) override;
  Result<void> silu_mul_matmul(const SiluMulParams& s, const MatmulParams& mm) override;

 protected:
  void release(void* ptr, size_t bytes) noexcept override;

 private:
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_ = nullptr;
  uint64_t limit_ = 0;
  std::atomic<uint64_t> allocated_{0};
  AttentionScratch attention_scratch_;
  SamplingScratch sampling_scratch_;
  MatmulScratch matmul_scratch_;
  // Whether mm can take activations quantized by the op writing `out`.
  bool fusable(const MatmulParams& mm, const float* out, int64_t rows, int64_t width) const;
  Result<void> matmul_quantized(const MatmulParams& mm, const detail::ActBlock* act);
  void add_bias(const MatmulParams& p);
  std::vector<float> matmul_packed_x_;  // [M, K] when x rows are strided
};

}  // namespace pagoda::gpu::cpu
