// PinnedBuffer: host memory from Backend::allocate_pinned, the source of
// asynchronous uploads (Backend::upload_async). On CUDA it is page-locked
// (cudaHostAlloc), so cudaMemcpyAsync DMAs from it without a staging copy and
// returns at once; on the CPU backend it is ordinary aligned memory.
// Move-only RAII: the buffer frees itself with the function it was made with.
// It must not outlive its backend's runtime (CUDA: the process's context).
// Not thread-safe (a value owned by the executor thread).
#pragma once

#include <cstddef>
#include <utility>

namespace pagoda::gpu {

class PinnedBuffer {
 public:
  using FreeFn = void (*)(void*) noexcept;
  PinnedBuffer() = default;
  PinnedBuffer(void* ptr, size_t bytes, FreeFn free_fn) : ptr_(ptr), bytes_(bytes), free_(free_fn) {}
  ~PinnedBuffer() { reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
        free_(std::exchange(o.free_, nullptr)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      free_ = std::exchange(o.free_, nullptr);
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
  void reset() noexcept {
    if (ptr_ != nullptr && free_ != nullptr) free_(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
    free_ = nullptr;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_ = nullptr;
};

}  // namespace pagoda::gpu
