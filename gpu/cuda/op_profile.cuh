// OpProfiler: the step-time breakdown of a CudaBackend from CUDA events, for
// benchmarks (tools/gpu-check.sh sets it for the engine benchmark).
// Enabled by the environment variable PAGODA_CUDA_PROFILE=<file.json> when the
// backend is created; off (no events, no cost) otherwise.
//
// Every op the backend issues is bracketed by two events and counted in a
// category: gemm (matmul), attention (paged_attention), sampling (sample),
// kv_write (kv_cache_write), other (embedding, rms_norm, rope, silu_mul,
// copy_blocks). At each synchronisation (synchronize, download, upload) the
// completed pairs are read: per category the calls and GPU milliseconds; per
// window (the ops between two synchronisations, about one engine step) the
// span from its first op's start to its last op's end, whose part not covered
// by ops is "gap": time the GPU waited for the host inside the window (host
// work between launches, cuBLAS set-up, uploads). Time between windows (the
// host after a sync) is not seen by events and is reported as host_between_ms
// from the host clock. The totals are written as JSON to the file when the
// backend is destroyed.
//
// Threads: the backend's issuing thread only. Compiled only with CUDA.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

namespace pagoda::gpu::cuda {

enum class OpCategory { kGemm, kAttention, kSampling, kKvWrite, kOther, kCount };

class OpProfiler {
 public:
  // nullptr when PAGODA_CUDA_PROFILE is unset or empty.
  static OpProfiler* from_env();
  ~OpProfiler();  // writes the JSON file, frees the events

  void begin(OpCategory c, cudaStream_t s);
  void end(cudaStream_t s);
  // After the stream was synchronised: reads and recycles the pending events.
  void collect();

 private:
  explicit OpProfiler(std::string path) : path_(std::move(path)) {}
  cudaEvent_t event();
  struct Pair {
    OpCategory cat;
    cudaEvent_t start, stop;
  };
  std::string path_;
  std::vector<cudaEvent_t> free_;
  std::vector<Pair> pending_;
  std::array<double, size_t(OpCategory::kCount)> ms_{};
  std::array<uint64_t, size_t(OpCategory::kCount)> calls_{};
  double span_ms_ = 0, busy_ms_ = 0, host_between_ms_ = 0;
  uint64_t windows_ = 0;
  bool have_last_sync_ = false;
  std::chrono::steady_clock::time_point last_sync_;
};

// Brackets one op: begin on construction, end on destruction (when p != nullptr).
class OpScope {
 public:
  OpScope(OpProfiler* p, OpCategory c, cudaStream_t s) : p_(p), s_(s) {
    if (p_ != nullptr) p_->begin(c, s_);
  }
  ~OpScope() {
    if (p_ != nullptr) p_->end(s_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfiler* p_;
  cudaStream_t s_;
};

}  // namespace pagoda::gpu::cuda
