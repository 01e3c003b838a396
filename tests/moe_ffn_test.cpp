// model/moe_ffn: route_topk against a direct reference (double softmax, a
// full sort, the top k, their renormalisation) on random logits; MoeFfn's
// grouped dispatch (one matmul per expert over its gathered rows) against a
// per-token reference (each token alone through the same MoeFfn, and, for
// fp32 weights, a double evaluation of the formula) with fp32 and Q5_0
// experts; an expert no token chooses is never read (its NaN weights do not
// reach the output) and the byte counter says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "llama_test_util.hpp"
#include "test_quantizers.hpp"
#include "model/llama_weights.hpp"
#include "model/moe_ffn.hpp"

namespace pagoda {
namespace {

using model::MoeRouting;

// The reference: per token, the k (expert, weight) pairs, by descending p.
std::vector<std::vector<std::pair<int32_t, double>>> reference_routes(
    const std::vector<float>& logits, int32_t T, int32_t E, int32_t k, bool norm) {
  std::vector<std::vector<std::pair<int32_t, double>>> out(static_cast<size_t>(T));
  for (int32_t t = 0; t < T; ++t) {
    std::vector<double> p(static_cast<size_t>(E));
    double mx = -1e300, sum = 0;
    for (int32_t e = 0; e < E; ++e) mx = std::max(mx, double(logits[size_t(t * E + e)]));
    for (int32_t e = 0; e < E; ++e)
      sum += p[size_t(e)] = std::exp(double(logits[size_t(t * E + e)]) - mx);
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    double top = 0;
    for (int32_t j = 0; j < k; ++j) top += p[size_t(order[size_t(j)])] / sum;
    for (int32_t j = 0; j < k; ++j) {
      const double w = p[size_t(order[size_t(j)])] / sum;
      out[size_t(t)].push_back({order[size_t(j)], norm ? w / top : w});
    }
  }
  return out;
}

TEST(MoeRoute, TopkAndNormalisationMatchADirectReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  MoeRouting r;
  for (int32_t E : {4, 8, 60, 128}) {
    for (int32_t k : {1, 2, 4, 8}) {
      if (k > E) continue;
      for (bool norm : {false, true}) {
        const int32_t T = 37;
        std::vector<float> logits(static_cast<size_t>(T * E));
        for (float& x : logits) x = dist(rng);
        model::route_topk(logits.data(), T, E, k, norm, r);
        const auto ref = reference_routes(logits, T, E, k, norm);
        ASSERT_EQ(r.offsets.size(), size_t(E + 1));
        ASSERT_EQ(r.offsets.back(), T * k);
        std::vector<std::vector<std::pair<int32_t, double>>> got(static_cast<size_t>(T));
        for (int32_t e = 0; e < E; ++e) {
          ASSERT_LE(r.offsets[size_t(e)], r.offsets[size_t(e + 1)]);
          for (int32_t i = r.offsets[size_t(e)]; i < r.offsets[size_t(e + 1)]; ++i) {
            if (i > r.offsets[size_t(e)]) {
              EXPECT_LT(r.tokens[size_t(i - 1)], r.tokens[size_t(i)]);
            }
            got[size_t(r.tokens[size_t(i)])].push_back({e, r.weights[size_t(i)]});
          }
        }
        for (int32_t t = 0; t < T; ++t) {
          auto want = ref[size_t(t)];
          std::sort(want.begin(), want.end());
          ASSERT_EQ(got[size_t(t)].size(), size_t(k)) << "E " << E << " k " << k << " token " << t;
          double sum = 0;
          for (int32_t j = 0; j < k; ++j) {
            EXPECT_EQ(got[size_t(t)][size_t(j)].first, want[size_t(j)].first)
                << "E " << E << " k " << k;
            EXPECT_NEAR(got[size_t(t)][size_t(j)].second, want[size_t(j)].second, 1e-6)
                << "E " << E << " k " << k;
            sum += got[size_t(t)][size_t(j)].second;
          }
          if (norm) {
            EXPECT_NEAR(sum, 1.0, 1e-6);
          }
        }
      }
    }
  }
}

struct Rig {
  static constexpr int32_t H = 64, Ie = 32, E = 6, k = 2;
  std::unique_ptr<gpu::Backend> backend = test::cpu_backend();
  model::ModelConfig config;
  model::LlamaLayerWeights layer;
  std::vector<std::vector<float>> gate_up, down;  // [E] x [2 Ie, H], [H, Ie] as dequantized
  std::vector<float> router;                      // [E, H]

  // Random experts (fp32, or Q5_0 when quant); expert `never` gets NaN
  // weights and a router row that loses to every other for positive x.
  Rig(bool quant, int32_t never = -1) {
    config.hidden_size = H;
    config.num_experts = E;
    config.num_experts_used = k;
    config.expert_intermediate_size = Ie;
    config.moe_norm_topk_prob = true;
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.0f, 0.3f);
    router.resize(size_t(E * H));
    for (float& x : router) x = never >= 0 ? std::fabs(dist(rng)) : dist(rng);
    if (never >= 0) std::fill_n(router.begin() + never * H, H, -1.0f);
    layer.router = upload(router, E, H, false);
    for (int32_t e = 0; e < E; ++e) {
      std::vector<float> gu(size_t(2 * Ie * H)), dn(size_t(H * Ie));
      for (float& x : gu) x = e == never ? NAN : dist(rng);
      for (float& x : dn) x = e == never ? NAN : dist(rng);
      model::MoeExpertWeights ex;
      ex.gate_up = upload(gu, 2 * Ie, H, quant && e != never);
      ex.down = upload(dn, H, Ie, quant && e != never);
      layer.experts.push_back(std::move(ex));
      gate_up.push_back(quant && e != never ? roundtrip(gu) : gu);
      down.push_back(quant && e != never ? roundtrip(dn) : dn);
    }
  }
  static std::vector<float> roundtrip(const std::vector<float>& w) {
    const std::vector<uint8_t> q = test::quantize_q5_0(w);
    std::vector<float> out(w.size());
    gpu::dequant::q5_0(q.data(), out.data(), int64_t(w.size() / 32));
    return out;
  }
  model::DeviceLinear upload(const std::vector<float>& w, int64_t n, int64_t kk, bool quant) {
    std::vector<uint8_t> q = quant ? test::quantize_q5_0(w) : std::vector<uint8_t>();
    gpu::LinearWeight lw{quant ? gpu::WeightFormat::Q5_0 : gpu::WeightFormat::F32, n, kk,
                         quant ? static_cast<const void*>(q.data()) : w.data()};
    auto d = model::upload_linear_weight(*backend, {lw, nullptr, false},
                                         model::WeightPrecision::kQuantized);
    EXPECT_TRUE(d.ok()) << d.error().message;
    return std::move(d).value();
  }
  // y [T, H] through MoeFfn.
  std::vector<float> run(const std::vector<float>& x, int32_t T, model::MoeFfn& moe) {
    std::vector<float> y(size_t(T * H));
    EXPECT_TRUE(moe.forward(*backend, layer, x.data(), y.data(), T).ok());
    return y;
  }
};

std::vector<float> random_x(int32_t T, int32_t H, bool positive) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(T * H));
  for (float& v : x) v = positive ? std::fabs(dist(rng)) : dist(rng);
  return x;
}

// The formula in double: sum over the reference route of w * down(silu(g) * u).
std::vector<double> formula(const Rig& rig, const std::vector<float>& x, int32_t T) {
  const int32_t H = Rig::H, Ie = Rig::Ie, E = Rig::E;
  std::vector<float> logits(static_cast<size_t>(T * E));
  for (int32_t t = 0; t < T; ++t) {
    for (int32_t e = 0; e < E; ++e) {
      double s = 0;
      for (int32_t h = 0; h < H; ++h)
        s += double(x[size_t(t * H + h)]) * rig.router[size_t(e * H + h)];
      logits[size_t(t * E + e)] = float(s);
    }
  }
  const auto routes = reference_routes(logits, T, E, Rig::k, true);
  std::vector<double> y(size_t(T * H), 0.0);
  for (int32_t t = 0; t < T; ++t) {
    for (const auto& [e, w] : routes[size_t(t)]) {
      std::vector<double> act(static_cast<size_t>(Ie));
      for (int32_t i = 0; i < Ie; ++i) {
        double g = 0, u = 0;
        for (int32_t h = 0; h < H; ++h) {
          g += double(rig.gate_up[size_t(e)][size_t(i * H + h)]) * x[size_t(t * H + h)];
          u += double(rig.gate_up[size_t(e)][size_t((Ie + i) * H + h)]) * x[size_t(t * H + h)];
        }
        act[size_t(i)] = g / (1 + std::exp(-g)) * u;
      }
      for (int32_t h = 0; h < H; ++h) {
        double s = 0;
        for (int32_t i = 0; i < Ie; ++i)
          s += double(rig.down[size_t(e)][size_t(h * Ie + i)]) * act[size_t(i)];
        y[size_t(t * H + h)] += w * s;
      }
    }
  }
  return y;
}

TEST(MoeFfn, GroupedDispatchEqualsPerTokenReference) {
  for (bool quant : {false, true}) {
    Rig rig(quant);
    const int32_t T = 23, H = Rig::H;
    auto moe = model::MoeFfn::create(*rig.backend, rig.config, T);
    ASSERT_TRUE(moe.ok()) << moe.error().message;
    const std::vector<float> x = random_x(T, H, false);
    const std::vector<float> y = rig.run(x, T, *moe);
    EXPECT_EQ(moe->pairs_run(), int64_t(T) * Rig::k);
    std::vector<int32_t> used(Rig::E, 0);
    for (int32_t e = 0; e < Rig::E; ++e)
      used[size_t(e)] =
          moe->last_routing().offsets[size_t(e + 1)] - moe->last_routing().offsets[size_t(e)];
    EXPECT_GE(std::count_if(used.begin(), used.end(), [](int32_t n) { return n > 1; }), 3)
        << "routes spread";
    const std::vector<double> ref = formula(rig, x, T);
    double worst_alone = 0, worst_formula = 0, scale = 0;
    for (int32_t t = 0; t < T; ++t) {
      const std::vector<float> row(x.begin() + t * H, x.begin() + (t + 1) * H);
      const std::vector<float> alone = rig.run(row, 1, *moe);
      for (int32_t h = 0; h < H; ++h) {
        worst_alone =
            std::max(worst_alone, double(std::fabs(alone[size_t(h)] - y[size_t(t * H + h)])));
        worst_formula =
            std::max(worst_formula, std::fabs(ref[size_t(t * H + h)] - y[size_t(t * H + h)]));
        scale = std::max(scale, std::fabs(ref[size_t(t * H + h)]));
      }
    }
    std::printf("[%s] grouped vs per-token %.3g, vs double formula %.3g (output scale %.3g)\n",
                quant ? "Q5_0" : "F32", worst_alone, worst_formula, scale);
    EXPECT_LE(worst_alone, 1e-5 * scale) << (quant ? "Q5_0" : "F32");
    // fp32 weights: the formula itself; Q5_0 runs int8 activations (~1% of the scale).
    EXPECT_LE(worst_formula, (quant ? 2e-2 : 1e-5) * scale) << (quant ? "Q5_0" : "F32");
  }
}

TEST(MoeFfn, AnExpertNoTokenChoosesIsNotRead) {
  Rig rig(false, /*never=*/4);
  const int32_t T = 16;
  auto moe = model::MoeFfn::create(*rig.backend, rig.config, T);
  ASSERT_TRUE(moe.ok());
  const std::vector<float> y = rig.run(random_x(T, Rig::H, true), T, *moe);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(moe->last_routing().offsets[5] - moe->last_routing().offsets[4], 0);
  uint64_t expect = model::linear_weight_bytes(rig.layer.router);
  for (int32_t e = 0; e < Rig::E; ++e) {
    if (moe->last_routing().offsets[size_t(e + 1)] > moe->last_routing().offsets[size_t(e)]) {
      expect += model::linear_weight_bytes(rig.layer.experts[size_t(e)].gate_up) +
                model::linear_weight_bytes(rig.layer.experts[size_t(e)].down);
    }
  }
  EXPECT_EQ(moe->bytes_read(), expect);
}

}  // namespace
}  // namespace pagoda
