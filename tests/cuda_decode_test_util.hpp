// Helpers shared by the CUDA decode-path tests (tests/cuda_gemv_gpu_test.cpp,
// tests/cuda_decode_fusion_gpu_test.cpp): random bf16 weights, a weight
// view on either backend, and the "within rel * sum|x w|" comparison of the
// matmul tests. Call from test bodies (failures go through GoogleTest).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/backend_test_util.hpp"

namespace pagoda::gpu::test {

inline std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  return to_bf16(random_vec(n, seed, -1.0f, 1.0f));
}

inline void expect_within(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& mag, double rel, const std::string& label) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double lim = rel * mag[i] + 1e-6;
    const double ratio = std::isfinite(got[i]) ? std::abs(got[i] - want[i]) / lim : 1e30;
    if (ratio > worst) worst = ratio, at = i;
  }
  EXPECT_LE(worst, 1.0) << label << ": worst err/limit " << worst << " at " << at << ": got "
                        << got[at] << ", want " << want[at];
}

// W [N, K] of bf16 values on `be`: BF16 on CUDA; on the CPU backend (whose
// BF16 matmul wants the packed layout) the same values as F32.
inline LinearWeight weight_on(Backend& be, const std::vector<uint16_t>& w, int64_t N, int64_t K,
                       DeviceBuffer& keep) {
  if (be.kind() == BackendKind::kCuda) {
    keep = put(be, w);
    return LinearWeight{WeightFormat::BF16, N, K, keep.data()};
  }
  std::vector<float> f(w.size());
  for (size_t i = 0; i < w.size(); ++i) f[i] = bf16_to_fp32(w[i]);
  keep = put(be, f);
  return LinearWeight{WeightFormat::F32, N, K, keep.data()};
}

// sum_k |a[t, k] w[n, k]| for the bf16 bound against the CPU.
inline std::vector<double> magnitudes(const std::vector<float>& a, const std::vector<uint16_t>& w,
                               int64_t T, int64_t N, int64_t K) {
  std::vector<double> mag(size_t(T * N));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        s += std::abs(double(a[size_t(t * K + k)]) * bf16_to_fp32(w[size_t(n * K + k)]));
      }
      mag[size_t(t * N + n)] = s;
    }
  }
  return mag;
}

}  // namespace pagoda::gpu::test
