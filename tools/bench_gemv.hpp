// The decode-GEMV part of bench_kernels (tools/bench_kernels.cpp, CUDA only):
// CudaBackend::matmul with BF16 weights at Llama-3-8B's decode shapes
// (4096x4096 q/o, 14336x4096 gate/up, 4096x14336 down, 128256x4096 lm_head)
// for M = 1, 2, 4, 8 (the GEMV kernel, gpu/cuda/gemv.cu) and M = 16 (cuBLAS,
// for comparison): achieved GB/s = (weight + x + y bytes) / time, against
// the device's measured device-to-device copy bandwidth ((read + write) /
// time of a 512 MiB cudaMemcpyAsync) and its theoretical peak (2 x memory
// clock x bus width). Every call reads a different copy of the weight, with
// copies spanning >= 4x the L2 cache, so the weights come from HBM as they do
// in a decode step. Timing: CUDA events on the backend's stream, 3 warm-up
// calls, then the mean of `iters`.
// Thread-safety: one caller; the backend's issuing thread.
#pragma once

#if PAGODA_HAVE_CUDA

#include <string>
#include <vector>

#include "gpu/cuda/cuda_backend.hpp"

namespace pagoda::tools {

// Bytes read plus written per second by a device-to-device copy; 0 on failure.
double measure_copy_bandwidth(gpu::cuda::CudaBackend& be, int iters);

// One JSON line per (shape, M) appended to out (also printed on stderr).
// An Error when an allocation or a matmul failed.
Result<void> gemv_cases(gpu::cuda::CudaBackend& be, double copy_bps, double peak_bps,
                             int iters, std::vector<std::string>& out);

}  // namespace pagoda::tools

#endif
