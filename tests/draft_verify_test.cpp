// Draft-model speculation's sampling rule (actors/draft_runner.hpp,
// actors/speculative_verify.hpp) on the CPU sampler: the draft d is drawn
// from the draft's distribution q with the target row's own (seed, step),
// the target draws t from p with the same parameters, and verify_drafts
// commits t (accepting d when d == t). Over 20k seeds with q != p:
//  - the committed token follows p (chi-squared goodness of fit), while a
//    biased rule (commit d when p(d) >= p(t), a "keep the likelier" bias, or
//    always commit d) fails the same test;
//  - the acceptance rate is that of a coupled draw: far above the
//    independent-draw rate sum_x p(x) q(x), and at most the optimum
//    1 - TV(p, q) that min(1, p/q) rejection sampling reaches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "actors/speculative_verify.hpp"
#include "gpu/backend.hpp"

namespace pagoda::actors {
namespace {

constexpr int V = 16, N = 20000;

std::vector<float> logits(uint32_t seed, float sd, const std::vector<float>* base = nullptr) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(V);
  for (int i = 0; i < V; ++i) v[size_t(i)] = (base ? (*base)[size_t(i)] : 0.0f) + d(rng);
  return v;
}

std::vector<double> softmax(const std::vector<float>& l) {
  double m = -1e30, z = 0;
  for (float x : l) m = std::max(m, double(x));
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(double(l[i]) - m);
  for (double& x : p) x /= z;
  return p;
}

// N draws of one logits row, row i with seed 1000 + i at output index 5.
std::vector<int32_t> draws(gpu::Backend& be, const std::vector<float>& row) {
  std::vector<float> all;
  std::vector<gpu::SamplingRowParams> rows;
  for (int i = 0; i < N; ++i) {
    all.insert(all.end(), row.begin(), row.end());
    rows.push_back(gpu::SamplingRowParams{.temperature = 1.0f, .seed = uint64_t(1000 + i), .step = 5});
  }
  std::vector<int32_t> tokens(N);
  std::vector<float> lp(N);
  gpu::SamplingParams sp;
  sp.logits = all.data();
  sp.rows = rows.data();
  sp.num_rows = N;
  sp.vocab_size = V;
  sp.tokens = tokens.data();
  sp.logprobs = lp.data();
  be.sample(sp);
  return tokens;
}

// Chi-squared of counts against p (bins with < 5 expected merged).
double chi2(const std::vector<int>& counts, const std::vector<double>& p, int* df) {
  double stat = 0, rest_e = 0, rest_o = 0;
  *df = -1;
  for (int i = 0; i < V; ++i) {
    const double e = p[size_t(i)] * N;
    if (e < 5) {
      rest_e += e, rest_o += counts[size_t(i)];
      continue;
    }
    stat += (counts[size_t(i)] - e) * (counts[size_t(i)] - e) / e;
    ++*df;
  }
  if (rest_e > 0) stat += (rest_o - rest_e) * (rest_o - rest_e) / std::max(rest_e, 1e-9), ++*df;
  return stat;
}

TEST(DraftVerify, CoupledDraftsKeepTheTargetDistribution) {
  auto be = std::move(gpu::make_backend(gpu::BackendKind::kCpu, gpu::BackendOptions{})).value();
  const std::vector<float> lp = logits(1, 1.5f);
  const std::vector<float> lq = logits(2, 0.8f, &lp);  // the draft: p plus noise
  const auto p = softmax(lp), q = softmax(lq);
  double tv = 0, indep = 0;
  for (int i = 0; i < V; ++i) tv += std::fabs(p[size_t(i)] - q[size_t(i)]) / 2, indep += p[size_t(i)] * q[size_t(i)];
  const auto d = draws(*be, lq), t = draws(*be, lp);
  std::vector<int> ours(V), biased(V), always(V);
  int accepted = 0;
  for (int i = 0; i < N; ++i) {
    const int32_t drafts[1] = {d[size_t(i)]};
    const int32_t samples[2] = {t[size_t(i)], t[size_t(i)]};
    const VerifyOutcome v = verify_drafts(drafts, samples);
    accepted += v.accepted;
    ++ours[size_t(v.tokens[0])];
    ++biased[size_t(p[size_t(d[size_t(i)])] >= p[size_t(t[size_t(i)])] ? d[size_t(i)] : t[size_t(i)])];
    ++always[size_t(d[size_t(i)])];
  }
  int df = 0;
  const double c_ours = chi2(ours, p, &df);
  const double c_biased = chi2(biased, p, &df);
  const double c_always = chi2(always, p, &df);
  const double limit = df + 4.0 * std::sqrt(2.0 * df);  // ~ the 0.9999 quantile for these df
  const double rate = double(accepted) / N;
  std::printf("TV(p,q) %.3f: acceptance %.3f (optimum 1-TV %.3f, independent draws %.3f); "
              "chi2 df %d: ours %.1f, biased %.1f, always-accept %.1f (limit %.1f)\n",
              tv, rate, 1 - tv, indep, df, c_ours, c_biased, c_always, limit);
  EXPECT_GT(tv, 0.1) << "q should differ from p";
  EXPECT_LT(c_ours, limit) << "the committed tokens do not follow p";
  EXPECT_GT(c_biased, limit) << "the test cannot see a biased rule";
  EXPECT_GT(c_always, limit) << "the test cannot see a rule that keeps q";
  EXPECT_LE(rate, 1 - tv + 0.02);
  EXPECT_GT(rate, indep + 0.1) << "drafts and target draws are not coupled";
}

}  // namespace
}  // namespace pagoda::actors
