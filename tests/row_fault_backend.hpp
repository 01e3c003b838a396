// RowFaultBackend: a Backend that forwards everything to an inner backend
// (the CPU backend: host-accessible memory) and, on request, damages one
// row of a sample call, as a broken kernel or a corrupt row would: NaN into
// that row's logits before sampling (the whole row), or an id outside the vocabulary into
// that row's sampled token after it. Test-only; one issuing thread; the
// buffers belong to the inner backend. Used by executor_faults_test and
// engine_supervision_test.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <utility>

#include "gpu/backend.hpp"

namespace pagoda::gpu::test {

// What to damage in a sample call: the row (-1: none) and how.
struct RowFault {
  int32_t row = -1;
  bool nan_logits = false;      // else: the sampled id becomes vocab_size + 7
};

class RowFaultBackend final : public Backend {
 public:
  // `fault(nth_sample_call, num_rows)` says what to damage in that call.
  RowFaultBackend(std::unique_ptr<Backend> inner, std::function<RowFault(uint64_t, int32_t)> fault)
      : inner_(std::move(inner)), fault_(std::move(fault)) {}

  BackendKind kind() const override { return inner_->kind(); }
  std::string_view name() const override { return "row-fault"; }
  bool host_accessible() const override { return inner_->host_accessible(); }
  Result<DeviceBuffer> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  Result<void> upload(DeviceBuffer& dst, size_t off, const void* src, size_t bytes) override {
    return inner_->upload(dst, off, src, bytes);
  }
  Result<void> download(const DeviceBuffer& src, size_t off, void* dst, size_t bytes) override {
    return inner_->download(src, off, dst, bytes);
  }
  void synchronize() override { inner_->synchronize(); }
  Result<PinnedBuffer> allocate_pinned(size_t bytes) override { return inner_->allocate_pinned(bytes); }
  Result<void> upload_async(DeviceBuffer& dst, size_t off, const void* src, size_t bytes) override {
    return inner_->upload_async(dst, off, src, bytes);
  }
  Result<std::unique_ptr<OpGraph>> capture(const std::function<Result<void>()>& issue) override {
    return inner_->capture(issue);
  }
  Result<void> replay(const OpGraph& graph) override { return inner_->replay(graph); }
  void embedding(const EmbeddingParams& p) override { inner_->embedding(p); }
  void rms_norm(const RmsNormParams& p) override { inner_->rms_norm(p); }
  void rope(const RopeParams& p) override { inner_->rope(p); }
  void silu_mul(const SiluMulParams& p) override { inner_->silu_mul(p); }
  void kv_cache_write(const KvCacheWriteParams& p) override { inner_->kv_cache_write(p); }
  void paged_attention(const PagedAttentionParams& p) override { inner_->paged_attention(p); }
  void copy_blocks(const CopyBlocksParams& p) override { inner_->copy_blocks(p); }
  Result<void> matmul(const MatmulParams& p) override { return inner_->matmul(p); }
  void rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w) override { inner_->rope_kv_write(r, w); }
  Result<void> rms_norm_matmul(const RmsNormParams& n, const MatmulParams& mm) override {
    return inner_->rms_norm_matmul(n, mm);
  }
  Result<void> silu_mul_matmul(const SiluMulParams& s, const MatmulParams& mm) override {
    return inner_->silu_mul_matmul(s, mm);
  }
  Result<void> paged_attention_matmul(const PagedAttentionParams& a,
                                      const MatmulParams& mm) override {
    return inner_->paged_attention_matmul(a, mm);
  }
  void sample(const SamplingParams& p) override {
    const RowFault f = fault_ ? fault_(++calls_, p.num_rows) : RowFault{};
    const bool hit = f.row >= 0 && f.row < p.num_rows;
    if (hit && f.nan_logits) {
      // The whole row, as a NaN in the row's hidden state spreads through the LM head.
      float* row = const_cast<float*>(p.logits) + int64_t(f.row) * p.vocab_size;  // host memory
      std::fill(row, row + p.vocab_size, std::numeric_limits<float>::quiet_NaN());
    }
    inner_->sample(p);
    if (hit && !f.nan_logits) p.tokens[f.row] = p.vocab_size + 7;
    if (hit) ++damaged_;
  }
  uint64_t damaged() const { return damaged_.load(); }

 protected:
  void release(void*, size_t) noexcept override {}  // never owns a buffer

 private:
  std::unique_ptr<Backend> inner_;
  std::function<RowFault(uint64_t, int32_t)> fault_;
  uint64_t calls_ = 0;
  std::atomic<uint64_t> damaged_{0};
};

}  // namespace pagoda::gpu::test
