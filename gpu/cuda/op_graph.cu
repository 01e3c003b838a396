// CudaBackend::capture / replay (gpu/backend.hpp): CUDA graphs for the
// executor's decode steps (gpu-notes §6). capture() records `issue` on the
// backend's stream in thread-local capture mode, so only the issuing thread's
// calls are affected; whatever goes wrong while recording (an op's launch
// error, a scratch buffer that would have to grow, an unsupported call) ends
// the capture, is cleared from the backend's pending error and is returned,
// and the caller falls back to eager launches. A graph remembers the scratch
// epoch it was captured in; replay() refuses it once any scratch buffer has
// been reallocated (its frozen pointers would dangle).
#include <cuda_runtime.h>

#include <optional>
#include <utility>

#include "gpu/cuda/cuda_backend.hpp"
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/op_profile.cuh"

namespace pagoda::gpu::cuda {

namespace {

class CudaOpGraph final : public OpGraph {
 public:
  CudaOpGraph(const CudaBackend* owner, cudaGraphExec_t exec, uint64_t epoch)
      : owner_(owner), exec_(exec), epoch_(epoch) {}
  ~CudaOpGraph() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    cudaGetLastError();
  }
  CudaOpGraph(const CudaOpGraph&) = delete;
  CudaOpGraph& operator=(const CudaOpGraph&) = delete;

  const CudaBackend* owner() const { return owner_; }
  cudaGraphExec_t exec() const { return exec_; }
  uint64_t epoch() const { return epoch_; }

 private:
  const CudaBackend* owner_;
  cudaGraphExec_t exec_;
  uint64_t epoch_;
};

}  // namespace

Result<std::unique_ptr<OpGraph>> CudaBackend::capture(const std::function<Result<void>()>& issue) {
  if (profiler_) {
    return make_error("cuda: no graph capture while PAGODA_CUDA_PROFILE is set (ops run eagerly)");
  }
  const bool had_pending = pending_.has_value();
  PAGODA_CUDA_TRY(check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                             "cudaStreamBeginCapture"));
  capturing_ = true;
  const Result<void> issued = issue();
  capturing_ = false;
  return end_capture(issued, had_pending);
}

// Ends the capture begun by capture(); every failure path leaves the stream
// out of capture mode and no new pending error behind.
Result<std::unique_ptr<OpGraph>> CudaBackend::end_capture(const Result<void>& issued,
                                                          bool had_pending) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  cudaGetLastError();
  std::optional<Error> failed;
  if (!had_pending && pending_) {
    failed = std::move(*pending_);
    pending_.reset();
  }
  if (!issued) {
    failed = issued.error();
  } else if (!failed && ended != cudaSuccess) {
    failed = cuda_error("cudaStreamEndCapture", ended);
  } else if (!failed && graph == nullptr) {
    failed = make_error("cuda: graph capture recorded nothing");
  }
  if (failed) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return std::move(*failed);
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    cudaGetLastError();
    return cuda_error("cudaGraphInstantiate", made);
  }
  return std::unique_ptr<OpGraph>(new CudaOpGraph(this, exec, scratch_epoch_));
}

Result<void> CudaBackend::replay(const OpGraph& graph) {
  const auto* g = dynamic_cast<const CudaOpGraph*>(&graph);
  if (g == nullptr || g->owner() != this) {
    return make_error("cuda replay: the graph was captured by another backend");
  }
  if (g->epoch() != scratch_epoch_) {
    return make_error("cuda replay: stale graph (scratch memory was reallocated since capture)");
  }
  return check_cuda(cudaGraphLaunch(g->exec(), stream_), "cudaGraphLaunch");
}

}  // namespace pagoda::gpu::cuda
