// Tests for gpu/cpu/half_matmul.hpp: F16 / BF16 weights kept in 16 bits.
//
// References in double from this file's own decoding of the 16-bit values
// (fp16 by its fields, bf16 by the top half of an fp32), tolerance
// γ(K+1)·Σ_k |w_k·x_k| (a chain of K FMAs in fp32). Every SIMD variant the CPU
// has gives the scalar kernel's bits (one FMA chain per output in k order); a
// variant this CPU lacks skips and says why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/cpu/half_matmul.hpp"
#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::cpu {
namespace {

constexpr double kU = 0x1p-24;

double decode(WeightFormat f, uint16_t h) {
  if (f == WeightFormat::BF16) {
    const uint32_t u = uint32_t(h) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  const double mag = exp == 0 ? std::ldexp(mant / 1024.0, -14) : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -mag : mag;
}

struct HalfWeight {
  WeightFormat format;
  int64_t n, k;
  std::vector<uint16_t> raw;    // [n, k]
  std::vector<uint8_t> packed;
  LinearWeight view() const { return {format, n, k, packed.data(), WeightLayout::kPacked16}; }
};

HalfWeight make_weight(WeightFormat f, int64_t n, int64_t k, std::mt19937& rng) {
  HalfWeight w{f, n, k, std::vector<uint16_t>(size_t(n * k)), {}};
  std::normal_distribution<float> g(0.0f, 0.05f);
  for (auto& v : w.raw) v = f == WeightFormat::BF16 ? fp32_to_bf16(g(rng)) : fp32_to_fp16(g(rng));
  w.raw[0] = f == WeightFormat::BF16 ? fp32_to_bf16(1e30f) : fp32_to_fp16(6e4f);  // large values
  const auto p = pack_half_weight({f, n, k, w.raw.data()}, w.packed);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return w;
}

std::vector<float> run(const HalfWeight& w, const std::vector<float>& x, int64_t M, QuantIsa isa,
                       ThreadPool& pool) {
  std::vector<float> y(size_t(M * w.n), -12345.0f);
  const auto r = half_matmul(w.view(), x.data(), y.data(), M, isa, pool);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return y;
}

struct Shape {
  int64_t M, N, K;
};
const Shape kShapes[] = {{1, 1, 32},  {1, 7, 64},    {2, 17, 96},   {3, 33, 128},  {5, 16, 32},
                         {1, 576, 576}, {4, 192, 576}, {9, 67, 160}, {64, 48, 256}, {1, 1000, 64}};
const WeightFormat kFormats[] = {WeightFormat::F16, WeightFormat::BF16};

std::vector<float> make_x(int64_t M, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(size_t(M * K));
  for (auto& v : x) v = g(rng);
  return x;
}

TEST(HalfMatmul, MatchesDoubleReference) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  for (WeightFormat f : kFormats) {
    double worst = 0;
    for (const Shape& s : kShapes) {
      const HalfWeight w = make_weight(f, s.N, s.K, rng);
      const std::vector<float> x = make_x(s.M, s.K, rng);
      const std::vector<float> y = run(w, x, s.M, best_quant_isa(), pool);
      const double g = (s.K + 1) * kU / (1 - (s.K + 1) * kU);
      for (int64_t m = 0; m < s.M; ++m) {
        for (int64_t n = 0; n < s.N; ++n) {
          double ref = 0, mag = 0;
          for (int64_t k = 0; k < s.K; ++k) {
            const double p = decode(f, w.raw[size_t(n * s.K + k)]) * x[size_t(m * s.K + k)];
            ref += p;
            mag += std::fabs(p);
          }
          const double err = std::fabs(y[size_t(m * s.N + n)] - ref), tol = g * mag + 1e-30;
          worst = std::max(worst, err / tol);
          ASSERT_LE(err, tol) << format_name(f) << " M=" << s.M << " N=" << s.N << " K=" << s.K
                              << " at " << m << "," << n;
        }
      }
    }
    std::printf("%s %s: worst err/bound %.3f\n", format_name(f).data(),
                isa_name(best_quant_isa()).data(), worst);
  }
}

class HalfVariant : public ::testing::TestWithParam<QuantIsa> {};

TEST_P(HalfVariant, EqualsScalarBitForBit) {
  const QuantIsa isa = GetParam();
  if (!quant_isa_supported(isa)) {
    GTEST_SKIP() << isa_name(isa) << " not run: " << quant_isa_unsupported_reason(isa);
  }
  ThreadPool pool(2);
  std::mt19937 rng(11);
  int64_t compared = 0;
  for (WeightFormat f : kFormats) {
    for (const Shape& s : kShapes) {
      const HalfWeight w = make_weight(f, s.N, s.K, rng);
      std::vector<float> x = make_x(s.M, s.K, rng);
      if (x.size() > 40) x[37] = NAN;  // poisons its row only
      const auto ys = run(w, x, s.M, QuantIsa::Scalar, pool), yv = run(w, x, s.M, isa, pool);
      for (size_t i = 0; i < ys.size(); ++i) {
        if (std::isnan(ys[i]) && std::isnan(yv[i])) continue;
        ASSERT_EQ(ys[i], yv[i]) << format_name(f) << " " << isa_name(isa) << " M=" << s.M
                                << " N=" << s.N << " K=" << s.K << " at " << i;
        ++compared;
      }
    }
  }
  std::printf("%s == scalar on %lld outputs\n", isa_name(isa).data(), (long long)compared);
}

INSTANTIATE_TEST_SUITE_P(Isa, HalfVariant,
                         ::testing::Values(QuantIsa::Avx2, QuantIsa::AvxVnni, QuantIsa::Avx512Bw,
                                           QuantIsa::Avx512Vnni),
                         [](const ::testing::TestParamInfo<QuantIsa>& i) {
                           return std::string(isa_name(i.param));
                         });

// A row's result does not depend on the batch or the thread count.
TEST(HalfMatmul, BatchAndThreadIndependentBitwise) {
  ThreadPool one(1), three(3);
  std::mt19937 rng(5);
  const HalfWeight w = make_weight(WeightFormat::BF16, 100, 192, rng);
  const std::vector<float> x = make_x(7, 192, rng);
  const std::vector<float> all = run(w, x, 7, best_quant_isa(), three);
  EXPECT_EQ(all, run(w, x, 7, best_quant_isa(), one));
  for (int64_t m = 0; m < 7; ++m) {
    const std::vector<float> row(x.begin() + m * 192, x.begin() + (m + 1) * 192);
    const std::vector<float> alone = run(w, row, 1, best_quant_isa(), one);
    for (int64_t n = 0; n < 100; ++n) ASSERT_EQ(alone[size_t(n)], all[size_t(m * 100 + n)]);
  }
}

TEST(HalfMatmul, RejectsWhatItCannotRead) {
  std::vector<uint8_t> out;
  uint16_t w[64] = {};
  float x[32] = {}, y[2] = {};
  EXPECT_FALSE(pack_half_weight({WeightFormat::F32, 2, 32, w}, out).ok());
  EXPECT_FALSE(pack_half_weight({WeightFormat::F16, 2, 31, w}, out).ok());  // K % 32
  EXPECT_FALSE(half_matmul({WeightFormat::F16, 2, 32, w}, x, y, 1).ok());  // row layout
  MatmulScratch scratch;
  EXPECT_FALSE(matmul({WeightFormat::BF16, 2, 32, w}, x, y, 1, scratch).ok());
  ASSERT_TRUE(pack_half_weight({WeightFormat::BF16, 2, 32, w}, out).ok());
  EXPECT_TRUE(matmul({WeightFormat::BF16, 2, 32, out.data(), WeightLayout::kPacked16}, x, y, 1,
                     scratch).ok());
}

}  // namespace
}  // namespace pagoda::gpu::cpu
