// The CPU backend's Gemma ops (gpu/ops.hpp): gelu_tanh_mul against PyTorch's
// tanh-approximated GELU in fp64, scale_cap against x * scale and
// cap * tanh(x * scale / cap), and the Backend defaults' refusal to run them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "tests/backend_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

std::unique_ptr<Backend> cpu() { return std::move(make_backend(BackendKind::kCpu)).value(); }

TEST(GemmaOps, GeluTanhMulMatchesDouble) {
  auto be = cpu();
  const int32_t T = 5, I = 77;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  std::vector<float> x(size_t(T) * 2 * I);
  for (float& v : x) v = u(rng);
  DeviceBuffer xb = put(*be, x), out = put(*be, std::vector<float>(size_t(T) * I, 0.0f));
  be->gelu_tanh_mul({xb.as<const float>(), out.as<float>(), T, I});
  const std::vector<float> got = get<float>(*be, out, size_t(T) * I);
  for (int32_t t = 0; t < T; ++t) {
    for (int32_t i = 0; i < I; ++i) {
      const double g = x[size_t(t) * 2 * I + size_t(i)], up = x[size_t(t) * 2 * I + size_t(I + i)];
      const double want =
          0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up;
      EXPECT_NEAR(got[size_t(t) * I + size_t(i)], want, 1e-5 + 1e-5 * std::fabs(want));
    }
  }
}

TEST(GemmaOps, ScaleCap) {
  auto be = cpu();
  std::vector<float> x;
  for (int i = -500; i <= 500; ++i) x.push_back(float(i) / 10.0f);
  DeviceBuffer a = put(*be, x), b = put(*be, x);
  be->scale_cap({a.as<float>(), int64_t(x.size()), 3.0f, 0.0f});
  be->scale_cap({b.as<float>(), int64_t(x.size()), 1.0f, 4.0f});
  const auto scaled = get<float>(*be, a, x.size()), capped = get<float>(*be, b, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(scaled[i], x[i] * 3.0f);
    EXPECT_NEAR(capped[i], 4.0 * std::tanh(double(x[i]) / 4.0), 2e-6);
    EXPECT_LE(std::fabs(capped[i]), 4.0f);
  }
}

}  // namespace
}  // namespace pagoda::gpu::test
