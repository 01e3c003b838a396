// The CPU backend's RoPE op against an fp64 reference written here: the
// inverse frequencies (none, linear, llama3 scaling), NeoX and interleaved
// pairing, full and partial rotary dims, and the interleaved pairing equal to
// NeoX's under llama.cpp's GGUF row permutation. (Split from gpu_ops_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "tests/backend_test_util.hpp"

namespace pagoda::gpu {
namespace {

using test::random_vec;

std::unique_ptr<Backend> cpu_backend() {
  auto b = make_backend(BackendKind::kCpu, BackendOptions{0, 3});
  EXPECT_TRUE(b.ok());
  return std::move(b).value();
}

// ---- RoPE --------------------------------------------------------------------

// HF's llama3 rule in its torch.where form (written independently of the op).
double ref_llama3(double inv, double factor, double lf, double hf, double orig) {
  const double pi = 3.14159265358979323846;
  double wavelen = 2 * pi / inv;
  double low_wl = orig / lf, high_wl = orig / hf;
  double scaled = wavelen > low_wl ? inv / factor : inv;
  double smooth = (orig / wavelen - lf) / (hf - lf);
  double smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
  return medium ? smoothed : scaled;
}

TEST(Rope, InvFreqNoneLinearLlama3) {
  RopeConfig c;
  c.head_dim = 128;
  c.theta = 500000.0f;
  auto none = rope_inv_freq(c);
  ASSERT_EQ(none.size(), 64u);
  EXPECT_EQ(none[0], 1.0f);
  EXPECT_NEAR(none[63], std::pow(500000.0, -126.0 / 128), 1e-12);
  c.scaling = RopeScaling::kLinear;
  c.factor = 4.0f;
  auto lin = rope_inv_freq(c);
  for (size_t i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(lin[i], none[i] / 4.0f);
  c.scaling = RopeScaling::kLlama3;
  c.factor = 8.0f;
  auto l3 = rope_inv_freq(c);
  EXPECT_EQ(l3[0], 1.0f);                         // high frequency: unchanged
  EXPECT_FLOAT_EQ(l3[63], none[63] / 8.0f);       // low frequency: / factor
  int medium = 0;
  for (size_t i = 0; i < 64; ++i) {
    double base = std::pow(500000.0, -2.0 * double(i) / 128);
    EXPECT_NEAR(l3[i], ref_llama3(base, 8, 1, 4, 8192), 1e-7 * base) << i;
    if (l3[i] < none[i] * 0.999f && l3[i] > none[i] / 8 * 1.001f) ++medium;
  }
  EXPECT_GT(medium, 3);  // a band of smoothly interpolated frequencies exists
  RopeConfig bad = c;
  bad.rotary_dim = 127;
  EXPECT_FALSE(validate_rope_config(bad).ok());
}

// Direct formula: pairs per style, angle pos * theta^(-2i/rot) (scaled).
void ref_rope(std::vector<double>& v, int D, int rot, RopeStyle style, double pos,
              const std::vector<double>& inv) {
  for (int i = 0; i < rot / 2; ++i) {
    int a = style == RopeStyle::kNeox ? i : 2 * i;
    int b = style == RopeStyle::kNeox ? i + rot / 2 : 2 * i + 1;
    double c = std::cos(pos * inv[size_t(i)]), s = std::sin(pos * inv[size_t(i)]);
    double x = v[size_t(a)], y = v[size_t(b)];
    v[size_t(a)] = x * c - y * s;
    v[size_t(b)] = y * c + x * s;
  }
  (void)D;
}

void check_rope(RopeStyle style, int rot, RopeScaling scaling) {
  auto be = cpu_backend();
  const int T = 7, Hq = 9, Hk = 3, D = 64, stride = (Hq + 2 * Hk) * D;
  RopeConfig cfg;
  cfg.head_dim = D;
  cfg.rotary_dim = rot;
  cfg.theta = 10000.0f;
  cfg.style = style;
  cfg.scaling = scaling;
  cfg.factor = scaling == RopeScaling::kNone ? 1.0f : 8.0f;
  cfg.original_max_positions = 64;  // puts D = 64's frequencies in all three bands
  auto table = be->create_rope_table(cfg);
  ASSERT_TRUE(table.ok()) << table.error().message;
  std::vector<double> inv(size_t(rot / 2));
  for (int i = 0; i < rot / 2; ++i) {
    double f = std::pow(10000.0, -2.0 * i / rot);
    if (scaling == RopeScaling::kLinear) f /= 8;
    if (scaling == RopeScaling::kLlama3) f = ref_llama3(f, 8, 1, 4, 64);
    inv[size_t(i)] = double(float(f));  // the table is fp32, as HF's inv_freq buffer
  }
  auto qkv = random_vec(size_t(T * stride), 11);
  std::vector<int32_t> pos = {0, 1, 2, 17, 100, 1000, 4095};
  auto got = qkv;
  be->rope(table->params(got.data(), stride, got.data() + Hq * D, stride, pos.data(), T, Hq, Hk));
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < Hq + 2 * Hk; ++h) {
      std::vector<double> v(static_cast<size_t>(D));
      for (int d = 0; d < D; ++d) v[size_t(d)] = qkv[size_t(t * stride + h * D + d)];
      if (h < Hq + Hk) ref_rope(v, D, rot, style, pos[size_t(t)], inv);  // V untouched
      for (int d = 0; d < D; ++d) {
        ASSERT_NEAR(got[size_t(t * stride + h * D + d)], v[size_t(d)], 2e-6)
            << "t=" << t << " h=" << h << " d=" << d;
      }
    }
  }
}

TEST(Rope, NeoxFull) { check_rope(RopeStyle::kNeox, 64, RopeScaling::kNone); }
TEST(Rope, InterleavedFull) { check_rope(RopeStyle::kInterleaved, 64, RopeScaling::kNone); }
TEST(Rope, NeoxPartialLinear) { check_rope(RopeStyle::kNeox, 32, RopeScaling::kLinear); }
TEST(Rope, InterleavedLlama3) { check_rope(RopeStyle::kInterleaved, 64, RopeScaling::kLlama3); }
TEST(Rope, NeoxLlama3) { check_rope(RopeStyle::kNeox, 64, RopeScaling::kLlama3); }

// GGUF's Q/K permutation maps HF rows (i, i + D/2) to (2i, 2i + 1): interleaved
// rope on permuted vectors must equal NeoX rope on the originals, permuted.
TEST(Rope, InterleavedEqualsNeoxUnderGgufPermutation) {
  auto be = cpu_backend();
  const int D = 128;
  RopeConfig cfg;
  cfg.head_dim = D;
  cfg.theta = 500000.0f;
  auto neox_table = be->create_rope_table(cfg);
  cfg.style = RopeStyle::kInterleaved;
  auto inter_table = be->create_rope_table(cfg);
  ASSERT_TRUE(neox_table.ok() && inter_table.ok());
  auto x = random_vec(D, 12);
  std::vector<float> perm(D);
  for (int i = 0; i < D / 2; ++i) {
    perm[size_t(2 * i)] = x[size_t(i)];
    perm[size_t(2 * i + 1)] = x[size_t(i + D / 2)];
  }
  int32_t pos = 777;
  be->rope(neox_table->params(x.data(), D, nullptr, 0, &pos, 1, 1, 0));
  be->rope(inter_table->params(perm.data(), D, nullptr, 0, &pos, 1, 1, 0));
  for (int i = 0; i < D / 2; ++i) {
    EXPECT_EQ(perm[size_t(2 * i)], x[size_t(i)]);
    EXPECT_EQ(perm[size_t(2 * i + 1)], x[size_t(i + D / 2)]);
  }
}

}  // namespace
}  // namespace pagoda::gpu
