// Error handling for the CUDA backend: every CUDA runtime and cuBLAS status is
// turned into a pagoda::Error that names the call, the error's enum name and
// its description. Host-only helpers; no aborts, no exceptions.
//
// Kernel launches: a launch reports configuration errors (bad grid, too much
// shared memory) through cudaGetLastError right away (check_launch); faults
// inside a kernel (illegal address, ...) surface later, at the next
// synchronising call, which CudaBackend reports from download()/check().
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "gpu/result.hpp"

namespace pagoda::gpu::cuda {

inline Error cuda_error(const char* what, cudaError_t e) {
  return make_error(std::string("cuda: ") + what + ": " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
}

// On failure also clears the runtime's "last error" (for non-sticky errors),
// so that a later check_launch does not report it again.
inline Result<void> check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_error(what, e);
  }
  return {};
}

inline Result<void> check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    return make_error(std::string("cublas: ") + what + ": " + cublasGetStatusName(s) + " (" +
                      cublasGetStatusString(s) + ")");
  }
  return {};
}

// The launch status of the kernel just launched by `op` (clears it).
inline Result<void> check_launch(const char* op) { return check_cuda(cudaGetLastError(), op); }

}  // namespace pagoda::gpu::cuda

// Returns the Error of a failed Result<void> expression from the enclosing
// function (whose return type is any Result<T>).
#define PAGODA_CUDA_TRY(expr)                        \
  do {                                               \
    if (auto pagoda_try_ = (expr); !pagoda_try_) {   \
      return pagoda_try_.error();                    \
    }                                                \
  } while (0)
