// The BF16 GEMV of the CUDA decode path (gpu/cuda/gemv.cu; BF16 weight,
// M = 1..8, which CudaBackend::matmul routes to it: asserted through
// gemv_unsupported) against fp64 over bf16(x) . bf16(W) within 1e-5 sum|x w|
// (only the fp32 summation order differs) and against the CPU backend's
// matmul (the same W values as F32, unrounded x) within the bf16 bound
// 2^-7 sum|x w|: N not a multiple of a CTA's rows, K not a multiple of an
// iteration, bias, padded x rows; a misaligned x stride falls back to cuBLAS
// (also checked); Llama-3-8B-sized shapes; a row's result is bitwise the
// same at every M. Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include "gpu/cuda/cuda_ops.cuh"
#include "tests/cuda_decode_test_util.hpp"
#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaGemv = CudaTest;

// y = x . W^T + bias in fp64 over bf16-rounded x (W is bf16 already), and sum |x w|.
void reference(const std::vector<float>& x, int64_t stride, const std::vector<uint16_t>& w,
               const std::vector<float>* bias, int64_t M, int64_t N, int64_t K, bool round_x,
               std::vector<double>& y, std::vector<double>& mag) {
  y.assign(size_t(M * N), 0.0);
  mag.assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias ? (*bias)[size_t(n)] : 0.0, sum = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const float xv = x[size_t(m * stride + k)];
        const double p = double(round_x ? round_bf16(xv) : xv) * bf16_to_fp32(w[size_t(n * K + k)]);
        acc += p;
        sum += std::abs(p);
      }
      y[size_t(m * N + n)] = acc;
      mag[size_t(m * N + n)] = sum;
    }
  }
}

struct MatmulRun {
  std::vector<float> y;
  const char* gemv_refusal;  // nullptr: the GEMV kernel served it
};

MatmulRun run_matmul(Backend& be, const std::vector<uint16_t>& w, const std::vector<float>& x,
                     int64_t stride, const std::vector<float>* bias, int64_t M, int64_t N,
                     int64_t K) {
  DeviceBuffer wb, xb = put(be, x), yb = put(be, std::vector<float>(size_t(M * N), NAN));
  DeviceBuffer bb = bias ? put(be, *bias) : DeviceBuffer();
  MatmulParams p{xb.as<const float>(), stride, weight_on(be, w, N, K, wb),
                 bias ? bb.as<const float>() : nullptr, yb.as<float>(), M};
  const char* refusal = be.kind() == BackendKind::kCuda
                            ? cuda::gemv_unsupported(p, p.x, p.x_stride, false)
                            : "cpu";
  auto ok = be.matmul(p);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
  return {get<float>(be, yb, size_t(M * N)), refusal};
}

TEST_F(CudaGemv, MatchesFp64AndCpuBackend) {
  const std::pair<int64_t, int64_t> shapes[] = {{37, 264}, {1000, 4104}, {9, 8}};
  for (auto [N, K] : shapes) {
    const auto w = random_bf16(size_t(N * K), uint32_t(N + K));
    const auto bias = random_vec(size_t(N), uint32_t(N), -2.0f, 2.0f);
    for (int64_t M = 1; M <= 8; ++M) {
      for (int64_t pad : {0, 4, 1}) {  // packed, padded (aligned), misaligned -> cuBLAS
        const int64_t stride = K + pad;
        const bool with_bias = (M + pad) % 2 == 1;
        const auto x = random_vec(size_t(M * stride), uint32_t(M * 7 + pad), -2.0f, 2.0f);
        const std::string label = "N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                  " M=" + std::to_string(M) + " stride=" + std::to_string(stride) +
                                  (with_bias ? " bias" : "");
        const MatmulRun got = run_matmul(*gpu_, w, x, stride, with_bias ? &bias : nullptr, M, N, K);
        EXPECT_EQ(got.gemv_refusal == nullptr, pad != 1)
            << label << ": " << (got.gemv_refusal ? got.gemv_refusal : "gemv");
        std::vector<double> ref, mag;
        reference(x, stride, w, with_bias ? &bias : nullptr, M, N, K, true, ref, mag);
        expect_within(got.y, ref, mag, 1e-5, label + " vs fp64(bf16 x)");
        const MatmulRun cpu = run_matmul(*cpu_, w, x, stride, with_bias ? &bias : nullptr, M, N, K);
        std::vector<double> cpu_y(cpu.y.begin(), cpu.y.end());
        expect_within(got.y, cpu_y, mag, 1.0 / 128, label + " vs cpu backend");
      }
    }
  }
}

TEST_F(CudaGemv, LlamaShapesAgainstCpuBackend) {
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {512, 14336}};
  for (auto [N, K] : shapes) {
    const auto w = random_bf16(size_t(N * K), uint32_t(N ^ K));
    for (int64_t M : {1, 8}) {
      const auto x = random_vec(size_t(M * K), uint32_t(M), -1.0f, 1.0f);
      const MatmulRun got = run_matmul(*gpu_, w, x, K, nullptr, M, N, K);
      ASSERT_EQ(got.gemv_refusal, nullptr);
      const MatmulRun cpu = run_matmul(*cpu_, w, x, K, nullptr, M, N, K);
      std::vector<double> want(cpu.y.begin(), cpu.y.end()), mag(want.size(), 0.0);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) {
            s += std::abs(double(x[size_t(m * K + k)]) * bf16_to_fp32(w[size_t(n * K + k)]));
          }
          mag[size_t(m * N + n)] = s;
        }
      }
      expect_within(got.y, want, mag, 1.0 / 128,
                    "N=" + std::to_string(N) + " K=" + std::to_string(K) + " M=" + std::to_string(M));
    }
  }
}

TEST_F(CudaGemv, RowResultIndependentOfBatchSize) {
  const int64_t N = 300, K = 1032;
  const auto w = random_bf16(size_t(N * K), 5);
  const auto x = random_vec(size_t(8 * K), 6, -1.0f, 1.0f);
  const auto all = run_matmul(*gpu_, w, x, K, nullptr, 8, N, K).y;
  for (int64_t m = 0; m < 8; ++m) {
    const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
    const auto one = run_matmul(*gpu_, w, row, K, nullptr, 1, N, K).y;
    expect_bitwise(one, std::vector<float>(all.begin() + m * N, all.begin() + (m + 1) * N),
                   "row " + std::to_string(m) + " alone vs in a batch of 8");
  }
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaGemv, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
