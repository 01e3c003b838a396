// PinnedBuffer: host memory from Backend::allocate_pinned, the source of
// asynchronous uploads (Backend::upload_async). On CUDA it is page-locked
// (cudaHostAlloc), so cudaMemcpyAsync DMAs from it without a staging copy and
// returns at once; on the CPU backend it is ordinary aligned memory.
//
// The ordering rule (the staging race): an upload_async from the buffer reads
// it when the device queue reaches the copy, which may be long after the call
// returned (a step that samples nothing never synchronises). So a writer
// that reuses the buffer must
//   1. call wait_writable() before rewriting bytes that a queued upload may
//      still read (returns at once when nothing is pending), and
//   2. call uploads_issued() after queueing the upload_async calls that read
//      it (marks the point the next wait_writable() waits for).
// The backend that allocated the buffer supplies the UploadFence that does
// this (CUDA: one event per buffer, recorded on the backend's stream); a
// buffer without a fence (the CPU backend: uploads are done on return) makes
// both calls no-ops.
//
// Move-only RAII: the buffer frees itself with the function it was made with,
// after waiting for its pending uploads. It must not outlive the backend that
// made it. Not thread-safe (a value owned by the executor thread).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace pagoda::gpu {

// The device-queue side of the ordering rule, made by a backend for one
// PinnedBuffer. Called on the issuing thread only.
class UploadFence {
 public:
  virtual ~UploadFence() = default;
  // Marks the point after everything issued to the backend so far.
  virtual void record() noexcept = 0;
  // Blocks until the device queue has passed the last record()ed point (an
  // error there: until it is idle, or returns when the device is lost).
  virtual void wait() noexcept = 0;
};

class PinnedBuffer {
 public:
  using FreeFn = void (*)(void*) noexcept;
  PinnedBuffer() = default;
  PinnedBuffer(void* ptr, size_t bytes, FreeFn free_fn, std::unique_ptr<UploadFence> fence = {})
      : ptr_(ptr), bytes_(bytes), free_(free_fn), fence_(std::move(fence)) {}
  ~PinnedBuffer() { reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
        free_(std::exchange(o.free_, nullptr)), fence_(std::move(o.fence_)),
        pending_(std::exchange(o.pending_, false)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      free_ = std::exchange(o.free_, nullptr);
      fence_ = std::move(o.fence_);
      pending_ = std::exchange(o.pending_, false);
    }
    return *this;
  }

  void* data() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t size() const { return bytes_; }
  // True when [p, p + bytes) lies inside this buffer.
  bool contains(const void* p, size_t bytes) const {
    const char* b = static_cast<const char*>(ptr_);
    const char* q = static_cast<const char*>(p);
    return ptr_ != nullptr && q >= b && bytes <= bytes_ && size_t(q - b) <= bytes_ - bytes;
  }

  // The ordering rule (see the top): after queueing uploads from the buffer...
  void uploads_issued() noexcept {
    if (!fence_) return;
    fence_->record();
    pending_ = true;
  }
  // ... and before rewriting it.
  void wait_writable() noexcept {
    if (!pending_) return;
    fence_->wait();
    pending_ = false;
  }
  // True between uploads_issued() and the next wait_writable().
  bool upload_pending() const { return pending_; }

  void reset() noexcept {
    wait_writable();  // no DMA may read freed memory
    fence_.reset();
    if (ptr_ != nullptr && free_ != nullptr) free_(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
    free_ = nullptr;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_ = nullptr;
  std::unique_ptr<UploadFence> fence_;  // null: uploads are done on return
  bool pending_ = false;
};

}  // namespace pagoda::gpu
