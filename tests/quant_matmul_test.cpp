// Tests for gpu/cpu/quant_matmul.hpp and gpu/cpu/gemm_f32.hpp.
//
// References are computed here in double from the raw weight bytes (this
// file's own block decoder) and the fp32 inputs. Tolerances (u = 2^-24,
// γ(n) = n·u/(1−n·u), nb = K/32 blocks, A_j = |x_j| + amax_b/254):
//  - vs x·dequant(W)ᵀ ("true"): activation quantization moves each x_j by at
//    most amax_b/254 (half a quantization step; ×1.0001 covers the fp32
//    rounding of d, 1/d and x/d), so
//      |err| ≤ Σ_b (1.0001·amax_b/254)·Σ_{j∈b}|w_j| + F,
//    where F = γ(nb+5)·(Σ_j |d_w q_wj|·A_j + Σ_b |m_b|·Σ_{j∈b} A_j) + 2u|ref|
//    bounds the fp32 work: rounding d_w·d_x, the block product or FMA, nb block
//    additions, the 3-level horizontal sum of the AVX2 lanes, s = d·Σq and the
//    final add (Q2_K, Q3_K, Q6_K: γ(2nb+5), an FMA per 16-element half; m per
//    half for Q2_K).
//  - vs x̂·dequant(W)ᵀ ("tight"), x̂ = activations quantized here by the spec
//    (d = amax/127, q = round-to-nearest-even(x·(1/d))): only F remains, with
//    A_j = |x̂_j|. Any integer or layout slip shows up as O(1) errors here.
//  - SIMD variants (AVX2, AVX-VNNI, AVX-512 BW, AVX-512 VNNI) vs scalar: bit for bit
//    equal (they share one fixed fp32 summation order, see
//    gpu/cpu/quant_tile_simd.hpp); a variant this CPU lacks skips and says why.
//  - Every check runs on both weight layouts: the file's rows and the CPU's
//    packed 16-row groups (gpu/cpu/quant_packed.hpp, its own summation order,
//    within the same bounds; its variants equal its scalar kernel bit for bit).
//  - gemm_f32 vs double: |err| ≤ γ(K+2)·Σ_k |x_k·w_k| for any summation order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "gpu/cpu/gemm_f32.hpp"
#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/cpu/quant_packed.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::cpu {
namespace {

constexpr double kU = 0x1p-24;
double gamma_n(double n) { return n * kU / (1 - n * kU); }

double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  const double mag = exp == 0 ? std::ldexp(mant / 1024.0, -14)
                              : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -mag : mag;
}

// A random quantized weight and its independent decoding.
struct TestWeight {
  WeightFormat format;
  int64_t n, k;
  std::vector<uint8_t> raw;
  std::vector<double> w;      // [n*k] dequantized
  std::vector<double> scaled; // [n*k] d·q (the part multiplied by x's quants)
  std::vector<double> m;      // [n*k/16] offsets per 16 elements (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), else 0
  std::vector<uint8_t> packed;  // raw in WeightLayout::kPacked16
  LinearWeight view(WeightLayout layout = WeightLayout::kRows) const {
    if (layout == WeightLayout::kPacked16) {
      return {format, n, k, packed.data(), WeightLayout::kPacked16};
    }
    return {format, n, k, raw.data()};
  }
};

constexpr WeightLayout kLayouts[] = {WeightLayout::kRows, WeightLayout::kPacked16};
const char* layout_name(WeightLayout l) { return l == WeightLayout::kRows ? "rows" : "packed16"; }

bool has_offset(WeightFormat f) { return f == WeightFormat::Q4_1 || f == WeightFormat::Q5_1; }
// Formats with kernels in the packed layout only (Q5_0, Q5_1, IQ4_NL).
bool packed_only(WeightFormat f) {
  return f != WeightFormat::Q8_0 && f != WeightFormat::Q4_0 && f != WeightFormat::Q4_1;
}

// Q5_0 / Q5_1 / IQ4_NL block b: w and d·q through the library's dequantizer
// (gpu/quant_format.cpp; with m zeroed, d·q is exact in fp32), m decoded here.
void decode_by_dequantizer(TestWeight& t, const uint8_t* p) {
  std::vector<uint8_t> blk(p, p + block_bytes(t.format));
  double mm = 0;
  if (has_offset(t.format)) {
    mm = half_value(uint16_t(blk[2] | blk[3] << 8));
    blk[2] = blk[3] = 0;
  }
  float dq[32];
  dequantize_row(t.format, blk.data(), dq, 32);
  t.m.insert(t.m.end(), 2, mm);
  for (int j = 0; j < 32; ++j) {
    t.scaled.push_back(dq[j]);
    t.w.push_back(double(dq[j]) + mm);
  }
}

// IQ4_XS (256-element super-blocks, random 6-bit sub-block scales and grid
// indices, a finite fp16 d of either sign), decoded by the dequantizer.
TestWeight make_iq4_xs(int64_t n, int64_t k, std::mt19937& rng, int fill) {
  TestWeight t{WeightFormat::IQ4_XS, n, k, {}, {}, {}, {}, {}};
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.00005f, 0.001f);
  t.raw.resize(size_t(n * k / 256 * 136));
  for (auto& b : t.raw) b = uint8_t(fill >= 0 ? fill : byte(rng));
  for (size_t b = 0; b < t.raw.size(); b += 136) {
    const uint16_t dh = fp32_to_fp16(scale(rng) * (byte(rng) < 128 ? -1.0f : 1.0f));
    t.raw[b] = dh & 0xFF, t.raw[b + 1] = dh >> 8;
  }
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    dequantize_row(t.format, t.raw.data() + r * (k / 256 * 136), row.data(), k);
    for (float v : row) t.scaled.push_back(v), t.w.push_back(v);
    t.m.insert(t.m.end(), size_t(k / 16), 0.0);
  }
  EXPECT_TRUE(pack_weight(t.view(), t.packed).ok());
  return t;
}

bool is_kquant(WeightFormat f) {
  return f == WeightFormat::Q2_K || f == WeightFormat::Q3_K || f == WeightFormat::Q4_K ||
         f == WeightFormat::Q5_K || f == WeightFormat::Q6_K;
}

// A K-quant (random bytes, finite fp16 d and dmin of either sign), decoded by
// the library's dequantizer twice per row: with dmin zeroed it gives the
// scaled part (d·sc)·q, with d zeroed the minima −dmin·mn, both exact in
// fp32 (at most 11 + 7 + 6 significant bits); w is their sum in double.
TestWeight make_kquant(WeightFormat f, int64_t n, int64_t k, std::mt19937& rng, int fill) {
  TestWeight t{f, n, k, {}, {}, {}, {}, {}};
  const WeightTypeTraits& tr = traits(f);
  const int64_t bb = tr.block_bytes, row_bytes = k / 256 * bb;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.0002f, 0.004f);
  t.raw.resize(size_t(n * row_bytes));
  for (auto& b : t.raw) b = uint8_t(fill >= 0 ? fill : byte(rng));
  for (size_t b = 0; b < t.raw.size(); b += size_t(bb)) {
    for (int h = 0; h < tr.half_count; ++h) {
      const uint16_t v = fp32_to_fp16(scale(rng) * (byte(rng) < 128 ? -1.0f : 1.0f));
      t.raw[b + tr.half_at[h]] = v & 0xFF, t.raw[b + tr.half_at[h] + 1] = v >> 8;
    }
  }
  std::vector<uint8_t> part(static_cast<size_t>(row_bytes));
  std::vector<float> scaled(static_cast<size_t>(k)), mins(static_cast<size_t>(k), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = t.raw.data() + r * row_bytes;
    for (int which = 0; which < tr.half_count; ++which) {  // 0: dmin zeroed, 1: d zeroed
      part.assign(row, row + row_bytes);
      for (int64_t b = 0; b < row_bytes; b += bb) {
        const int z = tr.half_count == 1 ? -1 : tr.half_at[1 - which];
        if (z >= 0) part[size_t(b + z)] = part[size_t(b + z + 1)] = 0;
      }
      dequantize_row(f, part.data(), which == 0 ? scaled.data() : mins.data(), k);
    }
    for (int64_t e = 0; e < k; ++e) {
      t.scaled.push_back(scaled[size_t(e)]);
      t.w.push_back(double(scaled[size_t(e)]) + double(mins[size_t(e)]));
      if (e % 16 == 0) t.m.push_back(mins[size_t(e)]);
    }
  }
  EXPECT_TRUE(pack_weight(t.view(), t.packed).ok());
  return t;
}

// Whether a test shape's K suits the format (IQ4_XS: a multiple of 256).
bool fits(WeightFormat f, int64_t k) { return k % block_elems(f) == 0; }

// fill >= 0: every byte but the scales is `fill` instead of random (0xFF:
// the largest quants of the unsigned forms, for the int16 sums' limits).
TestWeight make_weight(WeightFormat f, int64_t n, int64_t k, std::mt19937& rng, int fill = -1) {
  if (f == WeightFormat::IQ4_XS) return make_iq4_xs(n, k, rng, fill);
  if (is_kquant(f)) return make_kquant(f, n, k, rng, fill);
  TestWeight t{f, n, k, {}, {}, {}, {}, {}};
  const int64_t nb = n * k / 32, bsz = block_bytes(f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f), offset(-0.3f, 0.05f);
  t.raw.resize(static_cast<size_t>(nb * bsz));
  for (auto& b : t.raw) b = static_cast<uint8_t>(fill >= 0 ? fill : byte(rng));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* p = t.raw.data() + b * bsz;
    // ggml's Q8_0/Q4_0 scales may be negative; Q4_1's d is >= 0.
    const float d = scale(rng) * (!has_offset(f) && byte(rng) < 128 ? -1.0f : 1.0f);
    const uint16_t dh = fp32_to_fp16(d), mh = fp32_to_fp16(offset(rng));
    p[0] = dh & 0xFF, p[1] = dh >> 8;
    if (has_offset(f)) p[2] = mh & 0xFF, p[3] = mh >> 8;
    if (packed_only(f)) {
      decode_by_dequantizer(t, p);
      continue;
    }
    const double dd = half_value(dh), mm = f == WeightFormat::Q4_1 ? half_value(mh) : 0.0;
    t.m.insert(t.m.end(), 2, mm);
    for (int j = 0; j < 32; ++j) {
      int q;
      if (f == WeightFormat::Q8_0) {
        q = static_cast<int8_t>(p[2 + j]);
      } else {
        const uint8_t byte_j = p[(f == WeightFormat::Q4_1 ? 4 : 2) + j % 16];
        q = (j < 16 ? byte_j & 15 : byte_j >> 4) - (f == WeightFormat::Q4_0 ? 8 : 0);
      }
      t.scaled.push_back(q * dd);
      t.w.push_back(q * dd + mm);
    }
  }
  const auto packed = pack_weight(t.view(), t.packed);
  EXPECT_TRUE(packed.ok());
  return t;
}

// Activations ~N(0,1) with outliers and some all-zero blocks.
std::vector<float> make_x(int64_t M, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = g(rng) * (pick(rng) == 0 ? 20.0f : 1.0f);
  for (int64_t b = 0; b < M * K / 32; ++b) {
    if (pick(rng) < 3) std::fill_n(x.begin() + b * 32, 32, 0.0f);
  }
  return x;
}

// x̂: the activation quantization as specified in quant_matmul.hpp.
std::vector<double> spec_quantize(const std::vector<float>& x) {
  std::vector<double> out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    if (amax < 1e-30f) continue;  // tiny blocks quantize to zero
    const float d = amax / 127.0f;
    const float id = 1.0f / d;
    for (size_t j = b; j < b + 32; ++j) out[j] = static_cast<double>(d) * std::nearbyint(x[j] * id);
  }
  return out;
}

struct Check {
  double worst_true = 0, worst_tight = 0;  // max err/bound seen
};

// Checks y against the true and tight references with the bounds above.
void check_against_references(const TestWeight& t, const std::vector<float>& x, int64_t M,
                              const std::vector<float>& y, Check& c, const char* what) {
  const int64_t N = t.n, K = t.k;
  const std::vector<double> xq = spec_quantize(x);
  // Q2_K, Q3_K, Q6_K accumulate twice per block (one FMA per 16-element half).
  const bool halves = t.format == WeightFormat::Q2_K || t.format == WeightFormat::Q3_K ||
                      t.format == WeightFormat::Q6_K;
  const double g = gamma_n(static_cast<double>((halves ? 2 : 1) * K / 32 + 5));
  for (int64_t mi = 0; mi < M; ++mi) {
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, refq = 0, eq = 0, fa = 0, fq = 0;
      for (int64_t b = 0; b < K / 32; ++b) {
        const float* xb = x.data() + mi * K + b * 32;
        double amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double(xb[j])));
        const double half_step = amax < 1e-30 ? amax : 1.0001 * amax / 254;
        double wabs = 0, sa[2] = {0, 0}, sq[2] = {0, 0};  // per 16-element half
        for (int j = 0; j < 32; ++j) {
          const int64_t k = b * 32 + j;
          const double w = t.w[n * K + k], s = std::fabs(t.scaled[n * K + k]);
          const double xv = xb[j], xh = xq[mi * K + k];
          ref += xv * w;
          refq += xh * w;
          wabs += std::fabs(w);
          fa += s * (std::fabs(xv) + half_step);
          fq += s * std::fabs(xh);
          sa[j / 16] += std::fabs(xv) + half_step;
          sq[j / 16] += xh;
        }
        eq += half_step * wabs;
        const double m0 = t.m[n * (K / 16) + 2 * b], m1 = t.m[n * (K / 16) + 2 * b + 1];
        fa += std::fabs(m0) * sa[0] + std::fabs(m1) * sa[1];
        fq += m0 == m1 ? std::fabs(m0 * (sq[0] + sq[1])) : std::fabs(m0 * sq[0]) + std::fabs(m1 * sq[1]);
      }
      const double got = y[mi * N + n];
      const double tol_true = eq + g * fa + 2 * kU * std::fabs(ref) + 1e-30;
      const double tol_tight = g * fq + 2 * kU * std::fabs(refq) + 1e-30;
      c.worst_true = std::max(c.worst_true, std::fabs(got - ref) / tol_true);
      c.worst_tight = std::max(c.worst_tight, std::fabs(got - refq) / tol_tight);
      ASSERT_LE(std::fabs(got - ref), tol_true) << what << " m=" << mi << " n=" << n;
      ASSERT_LE(std::fabs(got - refq), tol_tight) << what << " m=" << mi << " n=" << n;
    }
  }
}

std::vector<float> run_quant(const TestWeight& t, const std::vector<float>& x, int64_t M,
                             QuantIsa isa, ThreadPool& pool,
                             WeightLayout layout = WeightLayout::kRows) {
  std::vector<float> y(static_cast<size_t>(M * t.n), -12345.0f);
  MatmulScratch scratch;
  const auto r = quant_matmul(t.view(layout), x.data(), y.data(), M, scratch, isa, pool);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return y;
}

struct Shape {
  int64_t M, N, K;
};
const Shape kShapes[] = {{1, 1, 32},     {3, 7, 64},       {17, 33, 96},  {64, 67, 576},
                         {1, 1536, 576}, {17, 192, 1536}, {64, 576, 1536}, {3, 1536, 576},
                         {8, 40, 256},   {16, 33, 576},   {96, 50, 192},  {1, 70, 512},
                         {4, 17, 768},   {64, 40, 256},   {135, 20, 256}};
const WeightFormat kFormats[] = {WeightFormat::Q8_0, WeightFormat::Q4_0,   WeightFormat::Q4_1,
                                 WeightFormat::Q5_0, WeightFormat::Q5_1,   WeightFormat::IQ4_NL,
                                 WeightFormat::IQ4_XS, WeightFormat::Q4_K, WeightFormat::Q6_K,
                                 WeightFormat::Q5_K, WeightFormat::Q3_K, WeightFormat::Q2_K};

std::vector<QuantIsa> isas() {
  std::vector<QuantIsa> v;
  for (QuantIsa isa : kAllQuantIsas) {
    if (quant_isa_supported(isa)) v.push_back(isa);
  }
  return v;
}

const char* name(QuantIsa isa) { return isa_name(isa).data(); }

TEST(QuantMatmul, MatchesReferencesWithinQuantizationBound) {
  ThreadPool pool(2);
  for (WeightLayout layout : kLayouts) {
    for (WeightFormat f : kFormats) {
      if (layout == WeightLayout::kRows && packed_only(f)) continue;
      for (QuantIsa isa : isas()) {
        Check c;
        std::mt19937 rng(42);
        for (const Shape& s : kShapes) {
          if (!fits(f, s.K)) continue;
          const TestWeight t = make_weight(f, s.N, s.K, rng);
          const std::vector<float> x = make_x(s.M, s.K, rng);
          char what[112];
          std::snprintf(what, sizeof what, "%s %s %s M=%ld N=%ld K=%ld", format_name(f).data(),
                        name(isa), layout_name(layout), long(s.M), long(s.N), long(s.K));
          check_against_references(t, x, s.M, run_quant(t, x, s.M, isa, pool, layout), c, what);
          if (HasFatalFailure()) return;
        }
        std::printf("%s %s %s: worst err/bound true %.3f tight %.3f\n", format_name(f).data(),
                    name(isa), layout_name(layout), c.worst_true, c.worst_tight);
      }
    }
  }
}

// Every compiled SIMD variant the CPU supports gives the scalar kernel's
// bits, on shapes that exercise every tile remainder (M % 4 and M % 8: the
// AVX-512 packed kernel's 8-row steps; 16 <= M <= 32: its 16-row passes; N % NR; M past the packed split's
// 64-row blocks), the model's shapes, extreme scales, zero and non-finite
// blocks.
class QuantVariant : public ::testing::TestWithParam<QuantIsa> {};

TEST_P(QuantVariant, EqualsScalarBitForBit) {
  const QuantIsa isa = GetParam();
  if (!quant_isa_supported(isa)) {
    GTEST_SKIP() << name(isa) << " not run: " << quant_isa_unsupported_reason(isa);
  }
  ThreadPool pool(2);
  std::mt19937 rng(5);
  const Shape shapes[] = {{1, 1, 32},    {2, 3, 64},     {3, 5, 96},     {4, 6, 128},
                          {5, 7, 160},   {7, 9, 192},    {9, 13, 576},   {1, 1536, 576},
                          {6, 192, 1536}, {1, 4099, 64}, {33, 67, 576},  {64, 576, 1536},
                          {8, 40, 64},   {16, 129, 256}, {70, 37, 96},  {135, 300, 64},
                          {1, 1, 256},   {3, 17, 512},   {9, 70, 768},  {67, 33, 256},
                          {135, 40, 256}, {4, 35, 512},  {1, 301, 512}, {17, 20, 256},
                          {32, 40, 512},  {24, 19, 256}};
  int64_t compared = 0;
  for (WeightFormat f : kFormats) {
    for (const Shape& s : shapes) {
      if (!fits(f, s.K)) continue;
      const TestWeight t = make_weight(f, s.N, s.K, rng);
      std::vector<float> x = make_x(s.M, s.K, rng);
      const float scales[] = {1.0f, 1e-20f, 3e4f, 1e-40f, 0.5f, 1e20f, 1.0f};
      for (size_t i = 0; i < x.size(); ++i) x[i] *= scales[i / 32 % 7];
      if (s.M * s.K > 96) x[size_t(s.K + 7) % x.size()] = NAN;
      for (WeightLayout layout : kLayouts) {
        if (layout == WeightLayout::kRows && packed_only(f)) continue;
        const auto ys = run_quant(t, x, s.M, QuantIsa::Scalar, pool, layout);
        const auto yv = run_quant(t, x, s.M, isa, pool, layout);
        for (size_t i = 0; i < ys.size(); ++i) {
          if (std::isnan(ys[i]) && std::isnan(yv[i])) continue;
          ASSERT_EQ(ys[i], yv[i]) << format_name(f) << " " << name(isa) << " "
                                  << layout_name(layout) << " M=" << s.M << " N=" << s.N
                                  << " K=" << s.K << " at " << i / s.N << "," << i % s.N;
          ++compared;
        }
      }
    }
  }
  std::printf("%s == scalar on %lld outputs\n", name(isa), static_cast<long long>(compared));
}

INSTANTIATE_TEST_SUITE_P(Isa, QuantVariant,
                         ::testing::Values(QuantIsa::Avx2, QuantIsa::AvxVnni,
                                           QuantIsa::Avx512Bw, QuantIsa::Avx512Vnni),
                         [](const ::testing::TestParamInfo<QuantIsa>& i) {
                           return std::string(isa_name(i.param));
                         });

// Every variant's activation quantizer writes the scalar one's bytes (scales,
// sums and quants), on blocks of extreme scales, zero and non-finite blocks.
TEST(QuantMatmul, ActivationQuantizersWriteTheScalarBytes) {
  std::mt19937 rng(77);
  std::vector<float> x = make_x(5, 640, rng);
  const float scales[] = {1.0f, 1e-20f, 3e4f, 1e-40f, 0.5f, 1e20f, 0x1p-126f, 1e-31f};
  for (size_t i = 0; i < x.size(); ++i) x[i] *= scales[i / 32 % 8];
  x[100] = NAN;
  x[700] = -INFINITY;
  for (int j = 0; j < 32; ++j) x[size_t(1280 + j)] = (j % 2 ? 127.5f : -0.5f) * (j + 1);  // ties
  const int64_t blocks = 5 * 640 / 32;
  std::vector<detail::ActBlock> want(static_cast<size_t>(blocks)), got(static_cast<size_t>(blocks));
  activation_quantizer(QuantIsa::Scalar)(x.data(), 5, 640, want.data());
  for (QuantIsa isa : isas()) {
    std::fill(got.begin(), got.end(), detail::ActBlock{1, 2, 3, 4, {}});
    activation_quantizer(isa)(x.data(), 5, 640, got.data());
    for (int64_t b = 0; b < blocks; ++b) {
      const detail::ActBlock &w = want[size_t(b)], &g = got[size_t(b)];
      const bool nan = std::isnan(w.d);
      ASSERT_EQ(nan, std::isnan(g.d)) << name(isa) << " block " << b;
      if (nan) continue;
      ASSERT_EQ(w.d, g.d) << name(isa) << " block " << b;
      ASSERT_EQ(w.s, g.s) << name(isa) << " block " << b;
      ASSERT_EQ(w.sum, g.sum) << name(isa) << " block " << b;
      ASSERT_EQ(w.sum_lo, g.sum_lo) << name(isa) << " block " << b;
      for (int j = 0; j < 32; ++j) ASSERT_EQ(w.qs[j], g.qs[j]) << name(isa) << " " << b << "," << j;
    }
  }
}

TEST(QuantMatmul, ForcedUnsupportedVariantIsAnError) {
  for (QuantIsa isa : kAllQuantIsas) {
    if (quant_isa_supported(isa)) continue;
    float x[32] = {}, y[1] = {};
    std::vector<uint8_t> w(block_bytes(WeightFormat::Q8_0), 0);
    MatmulScratch scratch;
    const auto r = quant_matmul({WeightFormat::Q8_0, 1, 32, w.data()}, x, y, 1, scratch, isa);
    EXPECT_FALSE(r.ok()) << name(isa);
  }
  EXPECT_TRUE(quant_isa_supported(QuantIsa::Scalar));
  EXPECT_TRUE(quant_isa_supported(best_quant_isa()));
}

// Blocks of very different magnitudes, down to subnormal activations.
TEST(QuantMatmul, ExtremeBlockScales) {
  ThreadPool pool(2);
  std::mt19937 rng(31);
  const float scales[] = {1e-20f, 1e-36f, 1e-44f, 1e20f, 1.0f, 0x1p-126f};
  for (WeightFormat f : kFormats) {
    const int64_t K = fits(f, 192) ? 192 : 256;
    const TestWeight t = make_weight(f, 9, K, rng);
    std::vector<float> x = make_x(2, K, rng);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= scales[i / 32 % 6];
    for (QuantIsa isa : isas()) {
      for (WeightLayout layout : kLayouts) {
        if (layout == WeightLayout::kRows && packed_only(t.format)) continue;
        Check c;
        check_against_references(t, x, 2, run_quant(t, x, 2, isa, pool, layout), c,
                                 format_name(f).data());
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The largest quants (every bit set) against activations of one sign at
// full scale: the int16 partial sums of the pmaddubsw variants at their
// limits (Q6_K: 2·63·127 per pair), so a sum that saturates shows here, in
// every variant, against the references and the scalar bits.
TEST(QuantMatmul, LargestQuantsDoNotSaturate) {
  ThreadPool pool(2);
  std::mt19937 rng(8);
  for (WeightFormat f : kFormats) {
    const int64_t K = fits(f, 512) ? 512 : 256, M = 3;
    const TestWeight t = make_weight(f, 37, K, rng, 0xFF);
    std::vector<float> x(size_t(M * K), 1.0f);
    for (int64_t j = K; j < 2 * K; ++j) x[size_t(j)] = -1.0f;
    for (int64_t j = 2 * K; j < 3 * K; ++j) x[size_t(j)] = j % 2 ? 2.0f : -2.0f;
    for (WeightLayout layout : kLayouts) {
      if (layout == WeightLayout::kRows && packed_only(t.format)) continue;
      const auto ys = run_quant(t, x, M, QuantIsa::Scalar, pool, layout);
      for (QuantIsa isa : isas()) {
        const auto yv = run_quant(t, x, M, isa, pool, layout);
        Check c;
        check_against_references(t, x, M, yv, c, format_name(f).data());
        if (HasFatalFailure()) return;
        ASSERT_EQ(ys, yv) << format_name(f) << " " << name(isa) << " " << layout_name(layout);
      }
    }
  }
}

// Per-output math does not depend on the split: any pool size gives the same bits.
TEST(QuantMatmul, ThreadCountDoesNotChangeResults) {
  ThreadPool one(1), three(3);
  std::mt19937 rng(9);
  const TestWeight t = make_weight(WeightFormat::Q4_1, 200, 576, rng);
  const std::vector<float> x = make_x(70, 576, rng);
  for (QuantIsa isa : isas()) {
    for (WeightLayout layout : kLayouts) {
      if (layout == WeightLayout::kRows && packed_only(t.format)) continue;
      EXPECT_EQ(run_quant(t, x, 70, isa, one, layout), run_quant(t, x, 70, isa, three, layout));
    }
  }
}

// A row's result must not depend on how many other rows share the call: the
// engine batches requests, and greedy output must be the same alone or in a
// batch. Compares each row of an M-row call with the same row computed alone.
TEST(QuantMatmul, RowResultsIndependentOfBatchSizeBitwise) {
  ThreadPool pool(2);
  std::mt19937 rng(21);
  for (WeightFormat f : kFormats) {
    const int64_t K = fits(f, 576) ? 576 : 512;
    const TestWeight t = make_weight(f, 97, K, rng);
    const std::vector<float> x = make_x(9, K, rng);
    for (QuantIsa isa : isas()) {
      for (WeightLayout layout : kLayouts) {
        if (layout == WeightLayout::kRows && packed_only(t.format)) continue;
        const std::vector<float> all = run_quant(t, x, 9, isa, pool, layout);
        for (int64_t m = 0; m < 9; ++m) {
          const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
          const std::vector<float> alone = run_quant(t, row, 1, isa, pool, layout);
          for (int64_t n = 0; n < t.n; ++n) {
            ASSERT_EQ(alone[size_t(n)], all[size_t(m * t.n + n)])
                << format_name(f) << " " << name(isa) << " " << layout_name(layout)
                << " m=" << m << " n=" << n;
          }
        }
      }
    }
  }
}

TEST(QuantMatmul, NonFiniteActivationsPoisonOnlyTheirRow) {
  ThreadPool pool(2);
  std::mt19937 rng(13);
  for (WeightFormat f : kFormats) {
    const int64_t K = fits(f, 64) ? 64 : 256;
    const TestWeight t = make_weight(f, 40, K, rng);
    std::vector<float> x = make_x(3, K, rng);
    x[K + 40] = NAN;         // row 1, block 1
    x[2 * K + 3] = INFINITY;  // row 2, block 0
    for (QuantIsa isa : isas()) {
      for (WeightLayout layout : kLayouts) {
        if (layout == WeightLayout::kRows && packed_only(t.format)) continue;
        const auto y = run_quant(t, x, 3, isa, pool, layout);
        for (int n = 0; n < 40; ++n) {
          EXPECT_TRUE(std::isfinite(y[n])) << n;
          EXPECT_TRUE(std::isnan(y[40 + n])) << n;
          EXPECT_TRUE(std::isnan(y[80 + n])) << n;
        }
      }
    }
  }
}

TEST(QuantMatmul, RejectsUnsupportedFormats) {
  float w[64] = {}, x[64] = {}, y[2] = {};
  MatmulScratch scratch;
  EXPECT_FALSE(quant_matmul({WeightFormat::F32, 2, 32, w}, x, y, 1, scratch).ok());
  EXPECT_FALSE(matmul({WeightFormat::F16, 2, 32, w}, x, y, 1, scratch).ok());
  EXPECT_FALSE(matmul({WeightFormat::BF16, 2, 32, w}, x, y, 1, scratch).ok());
  // The packed-only formats in the file's row layout: an error, not a wrong answer.
  for (WeightFormat f : {WeightFormat::Q5_0, WeightFormat::Q5_1, WeightFormat::IQ4_NL,
                         WeightFormat::IQ4_XS}) {
    EXPECT_FALSE(quant_matmul({f, 2, 32, w}, x, y, 1, scratch).ok()) << format_name(f);
    EXPECT_FALSE(matmul({f, 2, 32, w}, x, y, 1, scratch).ok()) << format_name(f);
  }
  EXPECT_FALSE(matmul({WeightFormat::Q4_K, 2, 256, w}, x, y, 1, scratch).ok());
}

// Only block formats in the row layout can be packed; padding rows are zero.
TEST(QuantPacked, PackRejectsOtherFormatsAndLayouts) {
  std::vector<uint8_t> out;
  float f[64] = {};
  EXPECT_FALSE(pack_weight({WeightFormat::F32, 2, 32, f}, out).ok());
  std::mt19937 rng(3);
  const TestWeight t = make_weight(WeightFormat::Q4_1, 5, 64, rng);
  EXPECT_FALSE(pack_weight(t.view(WeightLayout::kPacked16), out).ok());
  ASSERT_EQ(int64_t(t.packed.size()), packed_bytes(WeightFormat::Q4_1, 5, 64));
  // Row 5..15 of the one group: scale bytes 10..31 of each tile are zero.
  for (int64_t b = 0; b < 2; ++b) {
    for (int i = 10; i < 32; ++i) EXPECT_EQ(t.packed[size_t(b * 320 + i)], 0) << b << " " << i;
  }
}

// K-quants: per 16-row group and super-block, one header — the rows' fp16 d
// (then dmin, with minima) as in the file, padding rows zero — then the 8
// tiles; bytes per tile with the header's share: the layout comment's.
TEST(QuantPacked, KQuantSuperBlocksShareOneHeader) {
  std::mt19937 rng(5);
  const std::pair<WeightFormat, int64_t> per_tile[] = {
      {WeightFormat::Q2_K, 200}, {WeightFormat::Q3_K, 228}, {WeightFormat::Q4_K, 296},
      {WeightFormat::Q5_K, 360}, {WeightFormat::Q6_K, 420}};
  for (const auto& [f, bytes] : per_tile) {
    SCOPED_TRACE(format_name(f));
    const TestWeight t = make_weight(f, 5, 512, rng);  // one group, 2 super-blocks
    ASSERT_EQ(int64_t(t.packed.size()), 16 * bytes);
    ASSERT_EQ(packed_bytes(f, 5, 512), 16 * bytes);
    const WeightTypeTraits& tr = traits(f);
    for (int64_t sb = 0; sb < 2; ++sb) {
      for (int r = 0; r < 16; ++r) {
        for (int h = 0; h < tr.half_count; ++h) {  // d, then dmin
          const uint8_t* got = t.packed.data() + sb * 8 * bytes + 32 * h + 2 * r;
          const size_t at = size_t((2 * r + sb) * tr.block_bytes + tr.half_at[h]);
          EXPECT_EQ(got[0], r < 5 ? t.raw[at] : 0) << sb << " " << r << " " << h;
          EXPECT_EQ(got[1], r < 5 ? t.raw[at + 1] : 0) << sb << " " << r << " " << h;
        }
      }
    }
  }
}

// matmul dispatches F32 to gemm_f32 and quantized formats to quant_matmul.
TEST(Matmul, DispatchesOnFormat) {
  ThreadPool pool(2);
  std::mt19937 rng(17);
  const TestWeight t = make_weight(WeightFormat::Q8_0, 50, 96, rng);
  const std::vector<float> x = make_x(5, 96, rng);
  MatmulScratch scratch;
  std::vector<float> y(5 * 50);
  ASSERT_TRUE(matmul(t.view(), x.data(), y.data(), 5, scratch, pool).ok());
  EXPECT_EQ(y, run_quant(t, x, 5, best_quant_isa(), pool));

  // The exact path: dequantize once, then fp32 GEMM.
  const std::vector<float> wf = dequantize(WeightFormat::Q8_0, t.raw.data(), 50 * 96);
  ASSERT_TRUE(matmul({WeightFormat::F32, 50, 96, wf.data()}, x.data(), y.data(), 5, scratch, pool).ok());
  for (int m = 0; m < 5; ++m) {
    for (int n = 0; n < 50; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < 96; ++k) {
        ref += double(x[m * 96 + k]) * t.w[n * 96 + k];
        mag += std::fabs(double(x[m * 96 + k]) * t.w[n * 96 + k]);
      }
      EXPECT_LE(std::fabs(y[m * 50 + n] - ref), gamma_n(98) * mag + 1e-30) << m << "," << n;
    }
  }
}

// ---- gemm_f32 ---------------------------------------------------------------

TEST(GemmF32, MatchesDoubleReferenceOnOddShapes) {
  ThreadPool pool(2);
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const Shape shapes[] = {{1, 1, 1},    {3, 7, 5},     {17, 33, 64},  {1, 300, 577},
                          {130, 300, 577}, {600, 40, 64}, {64, 1536, 576}};
  for (const Shape& s : shapes) {
    std::vector<float> x(s.M * s.K), w(s.N * s.K), y(s.M * s.N, NAN);
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    gemm_f32(x.data(), w.data(), y.data(), s.M, s.N, s.K, pool);
    for (int64_t m = 0; m < s.M; ++m) {
      for (int64_t n = 0; n < s.N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < s.K; ++k) {
          ref += double(x[m * s.K + k]) * w[n * s.K + k];
          mag += std::fabs(double(x[m * s.K + k]) * w[n * s.K + k]);
        }
        ASSERT_LE(std::fabs(y[m * s.N + n] - ref), gamma_n(double(s.K + 2)) * mag)
            << "M=" << s.M << " N=" << s.N << " K=" << s.K << " at " << m << "," << n;
      }
    }
  }
}

TEST(GemmF32, EmptySumIsZero) {
  float y[6] = {1, 2, 3, 4, 5, 6};
  gemm_f32(nullptr, nullptr, y, 2, 3, 0);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace pagoda::gpu::cpu
