// CUDA dequantize-on-load (CudaBackend::prepare_weight) for every block type
// of the weight table (gpu/weight_format.hpp kWeightTypes: Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS; issue 20 item 1): random blocks
// (random bytes, finite fp16 scale fields) prepared to BF16 on the device
// must equal the CPU dequantizer (gpu::dequantize) rounded to bf16, bit for
// bit, and prepared to F32 the CPU dequantizer exactly; one shape spans two
// of prepare_weight's 4M-element chunks. Then a matmul on the prepared BF16
// weight (M = 1 and 3: the GEMV kernel) against fp64 over the bf16 values.
// Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <random>

#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaDequant = CudaTest;

constexpr WeightFormat kBlockTypes[] = {
    WeightFormat::Q4_0, WeightFormat::Q4_1, WeightFormat::Q5_0, WeightFormat::Q5_1,
    WeightFormat::Q8_0, WeightFormat::Q2_K, WeightFormat::Q3_K, WeightFormat::Q4_K,
    WeightFormat::Q5_K, WeightFormat::Q6_K, WeightFormat::IQ4_NL, WeightFormat::IQ4_XS};

// Random blocks of format f for n elements: random bytes, then every fp16
// scale field (traits(f).half_at) set to a finite value in [0.002, 0.062)
// (negative for every third block's first field).
std::vector<uint8_t> random_blocks(WeightFormat f, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.002f, 0.062f);
  const WeightTypeTraits& t = traits(f);
  std::vector<uint8_t> bytes(size_t(storage_bytes(f, n)));
  for (auto& b : bytes) b = uint8_t(rng());
  size_t block = 0;
  for (size_t at = 0; at < bytes.size(); at += size_t(t.block_bytes), ++block) {
    for (int s = 0; s < t.half_count; ++s) {
      const float v = (s == 0 && block % 3 == 0) ? -u(rng) : u(rng);
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(&bytes[at + t.half_at[s]], &h, 2);
    }
  }
  return bytes;
}

void check_type(cuda::CudaBackend& gpu, WeightFormat f, int64_t N, int64_t K) {
  const std::string label = std::string(format_name(f)) + " N=" + std::to_string(N) +
                            " K=" + std::to_string(K);
  const auto storage = random_blocks(f, N * K, uint32_t(f) * 977 + uint32_t(K));
  const std::vector<float> want = dequantize(f, storage.data(), N * K);
  for (float v : want) ASSERT_TRUE(std::isfinite(v)) << label << ": the generator made a non-finite value";
  const LinearWeight host{f, N, K, storage.data()};

  auto f32 = gpu.prepare_weight(host, WeightFormat::F32);
  ASSERT_TRUE(f32.ok()) << label << ": " << f32.error().message;
  expect_bitwise(get<float>(gpu, f32->storage, size_t(N * K)), want, label + " -> F32");

  auto bf16 = gpu.prepare_weight(host, WeightFormat::BF16);
  ASSERT_TRUE(bf16.ok()) << label << ": " << bf16.error().message;
  ASSERT_EQ(bf16->weight.format, WeightFormat::BF16);
  const auto bits = get<uint16_t>(gpu, bf16->storage, size_t(N * K));
  expect_bitwise(bits, to_bf16(want), label + " -> BF16");

  for (int64_t M : {1, 3}) {
    const auto x = random_vec(size_t(M * K), uint32_t(M + K), -1.0f, 1.0f);
    DeviceBuffer xb = put(gpu, x), yb = put(gpu, std::vector<float>(size_t(M * N), NAN));
    auto ok = gpu.matmul({xb.as<const float>(), K, bf16->weight, nullptr, yb.as<float>(), M});
    ASSERT_TRUE(ok.ok()) << label << ": " << ok.error().message;
    const auto y = get<float>(gpu, yb, size_t(M * N));
    double worst = 0;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(round_bf16(x[size_t(m * K + k)])) * bf16_to_fp32(bits[size_t(n * K + k)]);
          acc += p;
          mag += std::abs(p);
        }
        worst = std::max(worst, std::abs(y[size_t(m * N + n)] - acc) / (1e-5 * mag + 1e-6));
      }
    }
    EXPECT_LE(worst, 1.0) << label << " matmul M=" << M << ": worst err/limit";
  }
}

TEST_F(CudaDequant, EveryBlockTypeEqualsCpuDequantizer) {
  for (WeightFormat f : kBlockTypes) check_type(*gpu_, f, 7, 512);
}

TEST_F(CudaDequant, AcrossPrepareWeightChunks) {
  // prepare_weight converts 4M elements at a time: 2048 rows per chunk here.
  for (WeightFormat f : {WeightFormat::Q2_K, WeightFormat::Q5_1, WeightFormat::IQ4_XS}) {
    check_type(*gpu_, f, 2049, 2048);
  }
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaDequant, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
