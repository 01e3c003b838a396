// gemm_f32: the exact CPU path for linear layers, y = x·Wᵀ in fp32 through
// OpenBLAS (cblas_sgemm), parallelised over the pagoda ThreadPool.
//
// Threading choice: OpenBLAS's own thread pool is switched off
// (openblas_set_num_threads(1), once, on the first call) so that its
// spinning workers never compete with the pagoda pool; each pool chunk calls
// a single-threaded sgemm on a tile of W's rows (or of x's rows when N is
// small). This setting is process-wide: any other cblas caller in the process
// also runs single-threaded.
//
// Thread-safety: like ThreadPool::parallel_for, one call at a time per pool.
#pragma once

#include <cstdint>

#include "gpu/cpu/thread_pool.hpp"

namespace pagoda::gpu::cpu {

// y[M, N] = x[M, K] · W[N, K]ᵀ, all row-major fp32, y overwritten.
// Requires M, N, K >= 0 (0 is a no-op), y not aliasing x or w.
void gemm_f32(const float* x /*[M,K]*/, const float* w /*[N,K]*/, float* y /*[M,N]*/,
              int64_t M, int64_t N, int64_t K, ThreadPool& pool = ThreadPool::global());

}  // namespace pagoda::gpu::cpu
