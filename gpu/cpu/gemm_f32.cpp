#include "gpu/cpu/gemm_f32.hpp"

#include <cblas.h>

#include <mutex>

namespace pagoda::gpu::cpu {

namespace {

// Below this many multiply-adds a parallel split costs more than it saves.
constexpr int64_t kSerialMacs = int64_t{1} << 18;
// Fewest rows (of W or x) one pool chunk handles.
constexpr size_t kMinRows = 32;

// y[M, N] (row stride ldy) = x[M, K] · w[N, K]ᵀ. A single row goes to sgemv:
// sgemm would repack all of w for one output row.
void sgemm_nt(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K,
              int64_t ldy) {
  if (M == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(N), static_cast<blasint>(K),
                1.0f, w, static_cast<blasint>(K), x, 1, 0.0f, y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), 1.0f, x,
              static_cast<blasint>(K), w, static_cast<blasint>(K), 0.0f, y,
              static_cast<blasint>(ldy));
}

struct GemmArgs {
  const float* x;
  const float* w;
  float* y;
  int64_t M, N, K;
};

}  // namespace

void gemm_f32(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K,
              ThreadPool& pool) {
  static std::once_flag single_threaded_blas;
  std::call_once(single_threaded_blas, [] { openblas_set_num_threads(1); });
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum: sgemm with K = 0 is not guaranteed to zero y
    for (int64_t i = 0; i < M * N; ++i) y[i] = 0.0f;
    return;
  }
  if (pool.size() == 1 || M * N * K < kSerialMacs) {
    sgemm_nt(x, w, y, M, N, K, N);
    return;
  }
  const GemmArgs a{x, w, y, M, N, K};
  if (N >= M) {  // split W's rows: each chunk writes columns [n0, n1) of y
    pool.parallel_for(static_cast<size_t>(N), [&a](size_t n0, size_t n1) {
      sgemm_nt(a.x, a.w + n0 * a.K, a.y + n0, a.M, static_cast<int64_t>(n1 - n0), a.K, a.N);
    }, kMinRows);
  } else {  // split x's rows: each chunk writes rows [m0, m1) of y
    pool.parallel_for(static_cast<size_t>(M), [&a](size_t m0, size_t m1) {
      sgemm_nt(a.x + m0 * a.K, a.w, a.y + m0 * a.N, static_cast<int64_t>(m1 - m0), a.N, a.K,
               a.N);
    }, kMinRows);
  }
}

}  // namespace pagoda::gpu::cpu
