// CUDA matmul (cuBLAS) with weights prepared by CudaBackend::prepare_weight,
// for every weight format (F32, F16, BF16, Q8_0, Q4_0, Q4_1 random blocks) and
// M in {1, 7, 64}, with a padded x row stride and with/without bias, against
// fp64 references computed on the host from gpu::dequantize:
//  - BF16 path: reference over bf16(x) . bf16(W) (the rounding the path
//    promises), |y - ref| <= 1e-5 sum|x w| + 1e-6; and against the unrounded
//    product within the bf16 bound 2^-7 sum|x w| + 1e-6;
//  - F32 path (exact): |y - ref| <= 1e-5 sum|x w| + 1e-6 (TF32 would fail it).
// Also: the prepared BF16 bytes equal the host rounding, SmolLM2-sized
// shapes, and unprepared quantized weights are an Error. Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <random>

#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaMatmul = CudaTest;

// Random storage of an [N, K] weight in format f (valid blocks: finite scales).
std::vector<uint8_t> random_weight(WeightFormat f, int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint8_t> bytes(size_t(storage_bytes(f, N * K)));
  auto put16 = [&](size_t at, uint16_t v) { std::memcpy(&bytes[at], &v, 2); };
  if (f == WeightFormat::F32) {
    for (size_t i = 0; i < bytes.size(); i += 4) {
      const float x = u(rng);
      std::memcpy(&bytes[i], &x, 4);
    }
  } else if (f == WeightFormat::F16 || f == WeightFormat::BF16) {
    for (size_t i = 0; i < bytes.size(); i += 2) {
      put16(i, f == WeightFormat::F16 ? fp32_to_fp16(u(rng)) : fp32_to_bf16(u(rng)));
    }
  } else {
    const size_t bb = size_t(block_bytes(f));
    for (size_t at = 0; at < bytes.size(); at += bb) {
      put16(at, fp32_to_fp16(0.002f + 0.03f * (u(rng) + 1.0f)));  // d
      size_t q = 2;
      if (f == WeightFormat::Q4_1) {
        put16(at + 2, fp32_to_fp16(0.3f * u(rng)));  // m
        q = 4;
      }
      for (; q < bb; ++q) bytes[at + q] = uint8_t(rng());  // quants
    }
  }
  return bytes;
}

struct Ref {
  std::vector<double> y, mag;  // reference and sum |x w| per output
};

// y = x . W^T + bias in fp64, x/W optionally rounded to bf16 first.
Ref reference(const std::vector<float>& x, int64_t stride, const std::vector<float>& w,
              const std::vector<float>* bias, int64_t M, int64_t N, int64_t K, bool bf16) {
  Ref r{std::vector<double>(size_t(M * N)), std::vector<double>(size_t(M * N))};
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = x[size_t(m * stride + k)], b = w[size_t(n * K + k)];
        if (bf16) a = round_bf16(float(a)), b = round_bf16(float(b));
        acc += a * b;
        mag += std::abs(a * b);
      }
      if (bias) acc += (*bias)[size_t(n)];
      r.y[size_t(m * N + n)] = acc;
      r.mag[size_t(m * N + n)] = mag;
    }
  }
  return r;
}

void expect_within(const std::vector<float>& y, const Ref& ref, double rel, const std::string& label) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double lim = rel * ref.mag[i] + 1e-6;
    const double ratio = std::isfinite(y[i]) ? std::abs(y[i] - ref.y[i]) / lim : 1e30;
    if (ratio > worst) worst = ratio, at = i;
  }
  EXPECT_LE(worst, 1.0) << label << ": worst err/limit " << worst << " at " << at << ": got "
                        << y[at] << ", want " << ref.y[at];
}

void check_format(cuda::CudaBackend& gpu, WeightFormat f, int64_t N, int64_t K) {
  const auto storage = random_weight(f, N, K, uint32_t(f) * 31 + uint32_t(N));
  const std::vector<float> w = dequantize(f, storage.data(), N * K);
  LinearWeight host{f, N, K, storage.data()};
  std::mt19937 rng{uint32_t(K)};
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> bias(static_cast<size_t>(N));
  for (auto& b : bias) b = u(rng);
  for (WeightFormat target : {WeightFormat::BF16, WeightFormat::F32}) {
    auto dw = gpu.prepare_weight(host, target);
    ASSERT_TRUE(dw.ok()) << dw.error().message;
    ASSERT_EQ(dw->weight.format, target);
    if (target == WeightFormat::BF16) {
      expect_bitwise(get<uint16_t>(gpu, dw->storage, size_t(N * K)), to_bf16(w),
                     "prepared bf16 " + std::string(format_name(f)));
    }
    DeviceBuffer bb = put(gpu, bias);
    for (int64_t M : {1, 7, 64}) {
      for (bool with_bias : {false, true}) {
        const int64_t stride = K + 40;  // x is a view with padded rows
        std::vector<float> x(size_t(M * stride));
        for (auto& v : x) v = u(rng);
        DeviceBuffer xb = put(gpu, x), yb = put(gpu, std::vector<float>(size_t(M * N), NAN));
        MatmulParams p{xb.as<const float>(), stride, dw->weight,
                       with_bias ? bb.as<const float>() : nullptr, yb.as<float>(), M};
        auto ok = gpu.matmul(p);
        ASSERT_TRUE(ok.ok()) << ok.error().message;
        const auto y = get<float>(gpu, yb, size_t(M * N));
        const std::string label = std::string(format_name(f)) + "->" +
                                  std::string(format_name(target)) + " N=" + std::to_string(N) +
                                  " K=" + std::to_string(K) + " M=" + std::to_string(M) +
                                  (with_bias ? " bias" : "");
        const bool bf16 = target == WeightFormat::BF16;
        expect_within(y, reference(x, stride, w, with_bias ? &bias : nullptr, M, N, K, bf16),
                      1e-5, label);
        if (bf16) {
          expect_within(y, reference(x, stride, w, with_bias ? &bias : nullptr, M, N, K, false),
                        1.0 / 128, label + " vs unrounded");
        }
      }
    }
  }
}

TEST_F(CudaMatmul, EveryFormatAgainstFp64) {
  for (WeightFormat f : {WeightFormat::F32, WeightFormat::F16, WeightFormat::BF16,
                         WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1}) {
    check_format(*gpu_, f, 96, 256);
  }
}

TEST_F(CudaMatmul, SmolLmShapes) {
  check_format(*gpu_, WeightFormat::Q4_1, 1536, 576);  // gate/up
  check_format(*gpu_, WeightFormat::Q8_0, 576, 1536);  // down
}

TEST_F(CudaMatmul, UnpreparedQuantizedWeightIsAnError) {
  const auto storage = random_weight(WeightFormat::Q4_1, 8, 64, 1);
  DeviceBuffer wb = put(*gpu_, storage), xb = put(*gpu_, std::vector<float>(64)),
               yb = put(*gpu_, std::vector<float>(8));
  MatmulParams p{xb.as<const float>(), 64, LinearWeight{WeightFormat::Q4_1, 8, 64, wb.data()},
                 nullptr, yb.as<float>(), 1};
  auto r = gpu_->matmul(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("Q4_1"), std::string::npos) << r.error().message;
  EXPECT_FALSE(gpu_->prepare_weight(LinearWeight{WeightFormat::Q4_1, 8, 60, storage.data()}).ok())
      << "K not a multiple of 32";
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaMatmul, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
