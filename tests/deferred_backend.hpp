// DeferredBackend: a fake device queue for checking the pinned-staging
// ordering rule (gpu/pinned_buffer.hpp) without a GPU. It forwards to an
// inner backend (the CPU backend) but, like a CUDA stream that is always
// busy, runs NOTHING when it is issued: every op and every upload_async goes
// into a FIFO queue, which runs only when the host must wait for it
// (synchronize, download, a synchronous upload, or a pinned buffer's
// UploadFence::wait). Its pinned buffers carry such a fence.
//
// upload_async snapshots the source bytes when it is called; when the queue
// finally runs the copy, it copies the source as it is THEN (as a DMA would)
// and counts a violation if those bytes differ from the snapshot: the host
// rewrote a pinned buffer while an upload from it was pending.
//
// Test-only; one issuing thread; buffers belong to the inner backend (host
// memory); capture/replay are refused (callers fall back to eager ops).
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "gpu/backend.hpp"

namespace pagoda::gpu::test {

class DeferredBackend final : public Backend {
 public:
  explicit DeferredBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  ~DeferredBackend() override { run_until(issued_); }

  BackendKind kind() const override { return inner_->kind(); }
  std::string_view name() const override { return "deferred"; }
  bool host_accessible() const override { return inner_->host_accessible(); }

  Result<DeviceBuffer> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  Result<void> upload(DeviceBuffer& dst, size_t off, const void* src, size_t bytes) override {
    synchronize();
    return inner_->upload(dst, off, src, bytes);
  }
  Result<void> download(const DeviceBuffer& src, size_t off, void* dst, size_t bytes) override {
    synchronize();
    return inner_->download(src, off, dst, bytes);
  }
  void synchronize() override { run_until(issued_); }

  Result<PinnedBuffer> allocate_pinned(size_t bytes) override {
    if (bytes == 0) return PinnedBuffer();
    void* p = ::operator new(bytes, std::align_val_t(256), std::nothrow);
    if (p == nullptr) return make_error("deferred backend: out of host memory");
    return PinnedBuffer(p, bytes, [](void* q) noexcept { ::operator delete(q, std::align_val_t(256)); },
                        std::make_unique<Fence>(*this));
  }
  Result<void> upload_async(DeviceBuffer& dst, size_t off, const void* src, size_t bytes) override {
    if (off > dst.size() || bytes > dst.size() - off) {
      return make_error("deferred backend: upload_async out of range");
    }
    if (bytes == 0) return {};
    char* to = static_cast<char*>(dst.data()) + off;
    const char* from = static_cast<const char*>(src);
    std::vector<char> snapshot(from, from + bytes);
    ++async_uploads_;
    push([this, to, from, snapshot = std::move(snapshot)] {
      if (std::memcmp(from, snapshot.data(), snapshot.size()) != 0) ++violations_;
      std::memcpy(to, from, snapshot.size());
    });
    return {};
  }

  void embedding(const EmbeddingParams& p) override { push([this, p] { inner_->embedding(p); }); }
  void rms_norm(const RmsNormParams& p) override { push([this, p] { inner_->rms_norm(p); }); }
  void rope(const RopeParams& p) override { push([this, p] { inner_->rope(p); }); }
  void silu_mul(const SiluMulParams& p) override { push([this, p] { inner_->silu_mul(p); }); }
  void kv_cache_write(const KvCacheWriteParams& p) override {
    push([this, p] { inner_->kv_cache_write(p); });
  }
  void paged_attention(const PagedAttentionParams& p) override {
    push([this, p] { inner_->paged_attention(p); });
  }
  void copy_blocks(const CopyBlocksParams& p) override {
    push([this, p] { inner_->copy_blocks(p); });
  }
  void sample(const SamplingParams& p) override { push([this, p] { inner_->sample(p); }); }
  Result<void> matmul(const MatmulParams& p) override {
    push([this, p] { matmul_failed_ = matmul_failed_ || !inner_->matmul(p).ok(); });
    return {};
  }

  // Counters for the tests.
  int64_t violations() const { return violations_; }          // rewritten while pending
  int64_t async_uploads() const { return async_uploads_; }    // upload_async calls queued
  int64_t fence_waits() const { return fence_waits_; }        // waits that ran queued work
  int64_t queued() const { return issued_ - done_; }          // not yet run
  bool matmul_failed() const { return matmul_failed_; }

 protected:
  void release(void*, size_t) noexcept override {}  // never owns a buffer

 private:
  // A pinned buffer's fence: the queue position after what was issued so far.
  class Fence final : public UploadFence {
   public:
    explicit Fence(DeferredBackend& b) : b_(b) {}
    void record() noexcept override { mark_ = b_.issued_; }
    void wait() noexcept override {
      if (b_.done_ < mark_) ++b_.fence_waits_;
      b_.run_until(mark_);
    }

   private:
    DeferredBackend& b_;
    int64_t mark_ = 0;
  };

  void push(std::function<void()> f) {
    queue_.push_back(std::move(f));
    ++issued_;
  }
  void run_until(int64_t mark) {
    while (done_ < mark && !queue_.empty()) {
      std::function<void()> f = std::move(queue_.front());
      queue_.pop_front();
      ++done_;
      f();
    }
  }

  std::unique_ptr<Backend> inner_;
  std::deque<std::function<void()>> queue_;
  int64_t issued_ = 0, done_ = 0;  // queue positions: pushed, run
  int64_t violations_ = 0, async_uploads_ = 0, fence_waits_ = 0;
  bool matmul_failed_ = false;
};

}  // namespace pagoda::gpu::test
