// DeviceBuffer: an owning handle to one allocation in a Backend's memory
// (host memory for the CPU backend, device memory for CUDA). Move-only; the
// destructor gives the bytes back to the backend that allocated them.
//
// Contract: a DeviceBuffer must not outlive its Backend. data() is a device
// pointer: dereference it on the host only when Backend::host_accessible().
// Not thread-safe (like any owning handle).
#pragma once

#include <cstddef>
#include <utility>

namespace pagoda::gpu {

class Backend;

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : owner_(std::exchange(o.owner_, nullptr)),
        ptr_(std::exchange(o.ptr_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      owner_ = std::exchange(o.owner_, nullptr);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  void* data() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t size() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

  // Frees the allocation now (no-op when empty). Defined in backend.cpp.
  void reset() noexcept;

 private:
  friend class Backend;  // only Backend::wrap_allocation makes non-empty buffers
  DeviceBuffer(Backend* owner, void* ptr, size_t bytes)
      : owner_(owner), ptr_(ptr), bytes_(bytes) {}

  Backend* owner_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pagoda::gpu
