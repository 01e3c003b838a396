#include "gpu/cuda/op_profile.cuh"

#include <cstdio>
#include <cstdlib>

namespace pagoda::gpu::cuda {

namespace {
constexpr const char* kNames[] = {"gemm", "attention", "sampling", "kv_write", "other"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(OpCategory::kCount));
}  // namespace

OpProfiler* OpProfiler::from_env() {
  const char* path = std::getenv("PAGODA_CUDA_PROFILE");
  if (path == nullptr || *path == '\0') return nullptr;
  return new OpProfiler(path);
}

cudaEvent_t OpProfiler::event() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  if (cudaEventCreate(&e) != cudaSuccess) return nullptr;
  return e;
}

void OpProfiler::begin(OpCategory c, cudaStream_t s) {
  if (have_last_sync_ && pending_.empty()) {  // the host time since the last sync
    host_between_ms_ +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - last_sync_).count();
  }
  Pair p{c, event(), event()};
  if (p.start != nullptr) cudaEventRecord(p.start, s);
  pending_.push_back(p);
}

void OpProfiler::end(cudaStream_t s) {
  if (!pending_.empty() && pending_.back().stop != nullptr) cudaEventRecord(pending_.back().stop, s);
}

void OpProfiler::collect() {
  have_last_sync_ = true;
  last_sync_ = std::chrono::steady_clock::now();
  if (pending_.empty()) return;
  double busy = 0;
  for (const Pair& p : pending_) {
    float ms = 0;
    if (p.start != nullptr && p.stop != nullptr &&
        cudaEventElapsedTime(&ms, p.start, p.stop) == cudaSuccess) {
      ms_[size_t(p.cat)] += ms;
      busy += ms;
    }
    ++calls_[size_t(p.cat)];
  }
  float span = 0;
  const Pair &first = pending_.front(), &last = pending_.back();
  if (first.start != nullptr && last.stop != nullptr &&
      cudaEventElapsedTime(&span, first.start, last.stop) == cudaSuccess) {
    span_ms_ += span;
    busy_ms_ += busy;
    ++windows_;
  }
  for (const Pair& p : pending_) {
    if (p.start != nullptr) free_.push_back(p.start);
    if (p.stop != nullptr) free_.push_back(p.stop);
  }
  pending_.clear();
  cudaGetLastError();  // an unrecorded event reports an error: not the ops' concern
}

OpProfiler::~OpProfiler() {
  if (FILE* f = std::fopen(path_.c_str(), "w")) {
    std::fprintf(f, "{\"windows\": %llu, \"span_ms\": %.3f, \"busy_ms\": %.3f, \"gap_ms\": %.3f, "
                    "\"host_between_ms\": %.3f, \"ops\": {",
                 (unsigned long long)windows_, span_ms_, busy_ms_, span_ms_ - busy_ms_,
                 host_between_ms_);
    for (size_t c = 0; c < size_t(OpCategory::kCount); ++c) {
      std::fprintf(f, "%s\"%s\": {\"calls\": %llu, \"ms\": %.3f}", c ? ", " : "", kNames[c],
                   (unsigned long long)calls_[c], ms_[c]);
    }
    std::fprintf(f, "}}\n");
    std::fclose(f);
  }
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
  for (const Pair& p : pending_) {
    if (p.start != nullptr) cudaEventDestroy(p.start);
    if (p.stop != nullptr) cudaEventDestroy(p.stop);
  }
}

}  // namespace pagoda::gpu::cuda
