// The CPU sampler against sort-based fp64 references written here: greedy,
// token masks and logit biases (structured output),
// top_k = 1, min_p/top_k/top_p membership (and reachability), penalties (HF
// repetition, OpenAI presence/frequency), raw and processed logprobs, top-N
// candidates, reproducibility by (seed, step) regardless of batch order and
// thread count, and a chi-squared goodness of fit on 20k seeded draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gpu/backend.hpp"

namespace pagoda::gpu {
namespace {

std::unique_ptr<Backend> backend(size_t threads = 3) {
  return std::move(make_backend(BackendKind::kCpu, BackendOptions{0, threads})).value();
}

std::vector<float> normal_logits(size_t n, uint32_t seed, float sd = 2.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Batch {
  int V = 0;
  std::vector<float> logits;
  std::vector<SamplingRowParams> rows;
  std::vector<int32_t> history;
  LogprobMode mode = LogprobMode::kRaw;
  std::vector<int32_t> tokens, top_tokens;
  std::vector<float> logprobs, top_logprobs;

  void run(Backend& be) {
    const size_t R = rows.size();
    tokens.assign(R, -7);
    logprobs.assign(R, 0.0f);
    top_tokens.assign(R * kMaxTopLogprobs, -7);
    top_logprobs.assign(R * kMaxTopLogprobs, 0.0f);
    SamplingParams p;
    p.logits = logits.data();
    p.rows = rows.data();
    p.history = history.data();
    p.num_rows = int32_t(R);
    p.vocab_size = V;
    p.logprob_mode = mode;
    p.tokens = tokens.data();
    p.logprobs = logprobs.data();
    p.top_tokens = top_tokens.data();
    p.top_logprobs = top_logprobs.data();
    be.sample(p);
  }
};

// One row repeated over `draws` steps (same logits, same seed).
Batch repeated(const std::vector<float>& logits, SamplingRowParams rp, int draws) {
  Batch b;
  b.V = int(logits.size());
  for (int i = 0; i < draws; ++i) {
    b.logits.insert(b.logits.end(), logits.begin(), logits.end());
    rp.step = uint64_t(i);
    b.rows.push_back(rp);
  }
  return b;
}

TEST(Sampling, GreedyTakesArgmaxLowestIndexOnTies) {
  auto be = backend();
  Batch b;
  b.V = 6;
  b.logits = {1, 5, 2, 5, -1, 0, /* row 2 */ -3, -2, -2, -9, -2, -8};
  SamplingRowParams greedy;
  greedy.temperature = 0.0f;
  SamplingRowParams tiny = greedy;
  tiny.temperature = 1e-6f;  // below kGreedyTemperature: greedy too
  b.rows = {greedy, tiny};
  b.run(*be);
  EXPECT_EQ(b.tokens[0], 1);
  EXPECT_EQ(b.tokens[1], 1);
}

TEST(Sampling, TopK1EqualsGreedy) {
  auto be = backend();
  for (uint32_t seed = 0; seed < 20; ++seed) {
    auto logits = normal_logits(1000, seed);
    SamplingRowParams rp;
    rp.top_k = 1;
    rp.temperature = 1.5f;
    rp.seed = seed;
    Batch b = repeated(logits, rp, 5);
    b.run(*be);
    const int want = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    for (int t : b.tokens) EXPECT_EQ(t, want) << "seed " << seed;
  }
}

// Sort-based fp64 reference of the survivor set (semantics in gpu/ops.hpp).
// Sets *borderline when the top_p boundary is too close to call.
std::set<int> survivors(const std::vector<float>& raw, const SamplingRowParams& rp, bool* borderline) {
  const int V = int(raw.size());
  std::vector<double> z(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) z[size_t(i)] = double(raw[size_t(i)] / rp.temperature);
  const double zmax = *std::max_element(z.begin(), z.end());
  std::vector<int> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return z[size_t(a)] > z[size_t(b)]; });
  std::vector<int> keep;
  for (int i : order) {
    if (rp.min_p <= 0 || z[size_t(i)] >= zmax + std::log(double(rp.min_p))) keep.push_back(i);
  }
  if (rp.top_k > 0 && rp.top_k < int(keep.size())) {
    const double kth = z[size_t(keep[size_t(rp.top_k - 1)])];
    while (z[size_t(keep.back())] < kth) keep.pop_back();
  }
  *borderline = false;
  if (rp.top_p < 1.0f) {
    double total = 0, cum = 0;
    for (int i : keep) total += std::exp(z[size_t(i)] - zmax);
    size_t n = 0;
    while (n < keep.size()) {
      cum += std::exp(z[size_t(keep[n])] - zmax);
      ++n;
      if (std::abs(cum - rp.top_p * total) < 1e-5 * total) *borderline = true;
      if (cum >= rp.top_p * total) break;
    }
    const double thr = z[size_t(keep[n - 1])];
    while (z[size_t(keep.back())] < thr) keep.pop_back();
  }
  return std::set<int>(keep.begin(), keep.end());
}

TEST(Sampling, FilterMembershipMatchesSortReference) {
  auto be = backend();
  struct Case {
    float temperature, min_p, top_p;
    int top_k;
  };
  const Case cases[] = {{1.0f, 0, 0.9f, 0},  {0.7f, 0, 1.0f, 7},   {1.3f, 0.2f, 1.0f, 0},
                        {1.0f, 0.05f, 0.8f, 20}, {0.5f, 0, 0.5f, 0}, {2.0f, 0.1f, 0.95f, 50},
                        {1.0f, 0, 0.3f, 3}};
  int checked = 0;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    for (const Case& c : cases) {
      auto logits = normal_logits(300, 1000 + seed);
      SamplingRowParams rp;
      rp.temperature = c.temperature;
      rp.min_p = c.min_p;
      rp.top_p = c.top_p;
      rp.top_k = c.top_k;
      rp.seed = seed * 31 + 7;
      bool borderline;
      const std::set<int> allowed = survivors(logits, rp, &borderline);
      if (borderline) continue;
      Batch b = repeated(logits, rp, 400);
      b.run(*be);
      std::set<int> seen(b.tokens.begin(), b.tokens.end());
      for (int t : seen) ASSERT_TRUE(allowed.count(t)) << "token " << t << " filtered out";
      // Small nuclei are fully reached (each member has probability >= ~1/70 here).
      if (allowed.size() <= 4) {
        EXPECT_EQ(seen, allowed) << "seed " << seed;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 70);
}

TEST(Sampling, SameSeedAndStepGiveSameTokenWhateverTheBatch) {
  auto one = backend(1), four = backend(4);
  const int V = 5000, R = 9;
  Batch b;
  b.V = V;
  for (int r = 0; r < R; ++r) {
    auto l = normal_logits(size_t(V), uint32_t(50 + r), 1.0f);
    b.logits.insert(b.logits.end(), l.begin(), l.end());
    SamplingRowParams rp;
    rp.temperature = 0.8f + 0.1f * float(r);
    rp.top_p = r % 2 ? 0.9f : 1.0f;
    rp.top_k = r % 3 ? 0 : 100;
    rp.seed = 1000 + uint64_t(r);
    rp.step = uint64_t(r * 3);
    b.rows.push_back(rp);
  }
  b.run(*one);
  const auto ref = b.tokens;
  b.run(*four);
  EXPECT_EQ(b.tokens, ref);
  // Reversed order, and each row alone.
  Batch rev = b;
  for (int r = 0; r < R; ++r) {
    std::copy_n(b.logits.begin() + ptrdiff_t(r) * V, V, rev.logits.begin() + ptrdiff_t(R - 1 - r) * V);
    rev.rows[size_t(R - 1 - r)] = b.rows[size_t(r)];
  }
  rev.run(*four);
  for (int r = 0; r < R; ++r) EXPECT_EQ(rev.tokens[size_t(R - 1 - r)], ref[size_t(r)]);
  for (int r = 0; r < R; ++r) {
    Batch alone;
    alone.V = V;
    alone.logits.assign(b.logits.begin() + ptrdiff_t(r) * V, b.logits.begin() + ptrdiff_t(r + 1) * V);
    alone.rows = {b.rows[size_t(r)]};
    alone.run(*one);
    EXPECT_EQ(alone.tokens[0], ref[size_t(r)]) << "row " << r;
  }
  // A different step or seed changes the draw stream (flat logits: many tokens).
  Batch flat = repeated(std::vector<float>(1000, 0.0f), SamplingRowParams{}, 50);
  flat.run(*four);
  EXPECT_GT(std::set<int>(flat.tokens.begin(), flat.tokens.end()).size(), 40u);
}

// log-softmax in fp64.
std::vector<double> log_softmax(const std::vector<double>& x) {
  const double mx = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (double v : x) s += std::exp(v - mx);
  std::vector<double> out;
  for (double v : x) out.push_back(v - mx - std::log(s));
  return out;
}

TEST(Sampling, PenaltiesMatchReference) {
  auto be = backend();
  const int V = 20;
  std::vector<float> raw = normal_logits(V, 77, 3.0f);
  raw[3] = 2.5f;    // positive, repeated in prompt and output
  raw[4] = -1.5f;   // negative, in the output twice
  raw[9] = 0.0f;    // zero stays zero under repetition
  Batch b;
  b.V = V;
  b.logits = raw;
  b.history = {3, 3, 9, 11, /* output */ 4, 3, 4, 17, 4};
  SamplingRowParams rp;
  rp.temperature = 0.8f;
  rp.repetition_penalty = 1.3f;
  rp.frequency_penalty = 0.25f;
  rp.presence_penalty = 0.5f;
  rp.prompt_offset = 0;
  rp.prompt_len = 4;
  rp.output_offset = 4;
  rp.output_len = 5;
  rp.num_top_logprobs = 20;
  b.rows = {rp};
  b.mode = LogprobMode::kProcessed;
  b.run(*be);
  // Reference: HF repetition over distinct {3, 9, 11, 4, 17}; counts in output 4:3, 3:1, 17:1.
  std::vector<double> z(raw.begin(), raw.end());
  for (int t : {3, 9, 11, 4, 17}) z[size_t(t)] = z[size_t(t)] > 0 ? z[size_t(t)] / 1.3 : z[size_t(t)] * 1.3;
  for (auto [t, n] : {std::pair{4, 3}, {3, 1}, {17, 1}}) z[size_t(t)] -= 0.25 * n + 0.5;
  for (double& v : z) v /= 0.8;
  auto lp = log_softmax(z);
  for (int j = 0; j < V; ++j) {
    const int t = b.top_tokens[size_t(j)];
    ASSERT_GE(t, 0);
    EXPECT_NEAR(b.top_logprobs[size_t(j)], lp[size_t(t)], 2e-5) << "token " << t;
    if (j > 0) {
      EXPECT_GE(lp[size_t(b.top_tokens[size_t(j - 1)])], lp[size_t(t)]);
    }
  }
  EXPECT_NEAR(b.logprobs[0], lp[size_t(b.tokens[0])], 2e-5);
  // Greedy sees the penalised logits too.
  b.rows[0].temperature = 0.0f;
  b.run(*be);
  EXPECT_EQ(b.tokens[0], int(std::max_element(z.begin(), z.end()) - z.begin()));
}

TEST(Sampling, BannedTokensAreNeverSampledButKeepRawLogprobs) {
  auto be = backend();
  const int V = 50;
  std::vector<float> raw = normal_logits(V, 5, 1.0f);
  raw[7] = 9.0f;  // the argmax, banned
  raw[2] = 8.5f;  // the runner-up, banned too
  raw[30] = 8.0f;
  SamplingRowParams rp;
  rp.temperature = 0.0f;
  rp.banned_offset = 0;
  rp.banned_len = 3;
  rp.num_top_logprobs = 2;
  Batch g = repeated(raw, rp, 1);
  g.history = {7, 2, 999 /* outside the vocabulary: ignored */};
  g.run(*be);
  EXPECT_EQ(g.tokens[0], 30);
  // Raw logprobs still describe the model's distribution (token 7 on top).
  EXPECT_EQ(g.top_tokens[0], 7);
  rp.temperature = 1.5f;
  Batch b = repeated(raw, rp, 400);
  b.history = g.history;
  b.run(*be);
  int seen30 = 0;
  for (int32_t t : b.tokens) {
    EXPECT_NE(t, 7);
    EXPECT_NE(t, 2);
    seen30 += t == 30;
  }
  EXPECT_GT(seen30, 100) << "without 7 and 2, token 30 holds most of the mass";
}

// Structured output (issue 23): a row's token mask (bits in the history
// buffer) and logit biases; masked rows report logprobs and top candidates
// over their allowed tokens only.
TEST(Sampling, MaskAndBiasSteerTheSampler) {
  auto be = backend();
  const int V = 100;
  std::vector<float> raw = normal_logits(V, 9, 1.0f);
  raw[50] = 9.0f;  // the unmasked argmax, not allowed
  const std::vector<int32_t> allowed = {3, 40, 77};
  std::vector<int32_t> words((V + 31) / 32, 0);
  for (int32_t t : allowed) words[size_t(t >> 5)] |= int32_t(uint32_t(1) << (t & 31));
  SamplingRowParams rp;
  rp.temperature = 0.0f;
  rp.num_top_logprobs = 5;
  rp.mask_offset = 0;
  rp.mask_words = int32_t(words.size());
  Batch g = repeated(raw, rp, 1);
  g.history = words;
  g.run(*be);
  const int32_t best = *std::max_element(allowed.begin(), allowed.end(),
                                         [&](int32_t a, int32_t b) { return raw[size_t(a)] < raw[size_t(b)]; });
  EXPECT_EQ(g.tokens[0], best);
  double mass = 0.0;
  for (int j = 0; j < 3; ++j) {
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), g.top_tokens[size_t(j)]), allowed.end());
    mass += std::exp(double(g.top_logprobs[size_t(j)]));
  }
  EXPECT_NEAR(mass, 1.0, 1e-5) << "logprobs over the allowed tokens";
  EXPECT_EQ(g.top_tokens[3], -1);
  EXPECT_EQ(g.top_tokens[4], -1);
  // A bias moves the argmax inside the mask; biases add after the penalties.
  const int32_t other = best == 40 ? 77 : 40;
  float bias = 50.0f;
  int32_t bits;
  std::memcpy(&bits, &bias, 4);
  rp.bias_offset = int64_t(words.size());
  rp.bias_len = 1;
  Batch b = repeated(raw, rp, 1);
  b.history = words;
  b.history.insert(b.history.end(), {other, bits});
  b.run(*be);
  EXPECT_EQ(b.tokens[0], other);
  // A bias on a masked-out token does not let it through.
  Batch m = repeated(raw, rp, 1);
  m.history = words;
  m.history.insert(m.history.end(), {50, bits});
  m.run(*be);
  EXPECT_EQ(m.tokens[0], best) << "a biased token outside the mask was drawn";
  rp.bias_len = 0;
  rp.temperature = 2.0f;
  rp.num_top_logprobs = 0;
  Batch d = repeated(raw, rp, 300);
  d.history = words;
  d.run(*be);
  std::set<int32_t> seen(d.tokens.begin(), d.tokens.end());
  for (int32_t t : seen) EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
  EXPECT_EQ(seen.size(), 3u) << "every allowed token is drawn at temperature 2";
}

// A row that allows no token (every id banned or masked out, as a grammar can
// leave it) still yields a token, and its logprobs are -inf, never NaN (the
// CUDA sampler follows the same rule: cuda_sampling_gpu_test).
TEST(Sampling, RowWithNoAllowedTokenReportsMinusInfNeverNaN) {
  auto be = backend();
  const float inf = std::numeric_limits<float>::infinity();
  for (LogprobMode mode : {LogprobMode::kRaw, LogprobMode::kProcessed}) {
    for (float t : {0.0f, 1.0f}) {
      SCOPED_TRACE("mode " + std::to_string(int(mode)) + " temperature " + std::to_string(t));
      SamplingRowParams rp;
      rp.temperature = t;
      rp.num_top_logprobs = 3;
      rp.banned_len = 1;  // V = 1, its only token banned
      Batch ban = repeated({0.5f}, rp, 1);
      ban.history = {0};
      ban.mode = mode;
      ban.run(*be);
      EXPECT_EQ(ban.tokens[0], 0);
      // Raw logprobs ignore bans (the model's distribution); processed ones do not.
      EXPECT_EQ(ban.logprobs[0], mode == LogprobMode::kRaw ? 0.0f : -inf);
      EXPECT_EQ(ban.top_tokens[0], 0);
      EXPECT_EQ(ban.top_logprobs[0], mode == LogprobMode::kRaw ? 0.0f : -inf);
      rp.banned_len = 0;
      rp.mask_words = 1;  // V = 7, a mask that allows nothing
      Batch mask = repeated(normal_logits(7, 3), rp, 1);
      mask.history = {0};
      mask.mode = mode;
      mask.run(*be);
      EXPECT_GE(mask.tokens[0], 0);
      EXPECT_LT(mask.tokens[0], 7);
      EXPECT_EQ(mask.logprobs[0], -inf);
      for (int j = 0; j < kMaxTopLogprobs; ++j) {
        EXPECT_EQ(mask.top_tokens[size_t(j)], -1) << j;
        EXPECT_EQ(mask.top_logprobs[size_t(j)], -inf) << j;
      }
    }
  }
}

TEST(Sampling, RawLogprobsAndTopCandidates) {
  auto be = backend();
  const int V = 50000;
  auto raw = normal_logits(V, 5, 4.0f);
  raw[123] = raw[456] = 30.0f;  // a tie at the top: lower index first
  Batch b;
  b.V = V;
  b.logits = raw;
  SamplingRowParams rp;
  rp.temperature = 0.6f;
  rp.repetition_penalty = 2.0f;  // raw logprobs ignore penalties and temperature
  b.history = {123};
  rp.prompt_len = 1;
  rp.num_top_logprobs = 5;
  b.rows = {rp};
  b.run(*be);
  auto lp = log_softmax(std::vector<double>(raw.begin(), raw.end()));
  EXPECT_NEAR(b.logprobs[0], lp[size_t(b.tokens[0])], 1e-5);
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return raw[size_t(x)] > raw[size_t(y)]; });
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(b.top_tokens[size_t(j)], order[size_t(j)]);
    EXPECT_NEAR(b.top_logprobs[size_t(j)], lp[size_t(order[size_t(j)])], 1e-5);
  }
  EXPECT_EQ(b.top_tokens[0], 123);
  for (int j = 5; j < kMaxTopLogprobs; ++j) {
    EXPECT_EQ(b.top_tokens[size_t(j)], -1);
    EXPECT_EQ(b.top_logprobs[size_t(j)], -std::numeric_limits<float>::infinity());
  }
  EXPECT_EQ(b.tokens[0], 456);  // 123 is penalised to 15: 456 dominates
}

// Pearson chi-squared of 20k seeded draws against the expected distribution.
double chi_squared(const std::vector<float>& logits, SamplingRowParams rp,
                   const std::vector<double>& probs) {
  auto be = backend(2);
  Batch b = repeated(logits, rp, 20000);
  b.run(*be);
  std::vector<int> count(logits.size(), 0);
  for (int t : b.tokens) count[size_t(t)]++;
  double chi = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " is outside the support";
      continue;
    }
    const double e = 20000 * probs[i];
    chi += (count[i] - e) * (count[i] - e) / e;
  }
  return chi;
}

TEST(Sampling, ChiSquaredFullDistribution) {
  const std::vector<float> logits = {0.0f, 1.0f, -0.5f, 2.0f, 0.3f, -1.0f, 1.5f, 0.8f};
  SamplingRowParams rp;
  rp.temperature = 1.0f;
  rp.seed = 2024;
  std::vector<double> z(logits.begin(), logits.end());
  auto lp = log_softmax(z);
  std::vector<double> probs;
  for (double l : lp) probs.push_back(std::exp(l));
  const double chi = chi_squared(logits, rp, probs);
  std::printf("chi^2 = %.2f (7 dof)\n", chi);
  EXPECT_LT(chi, 24.3);  // 7 dof, p = 0.001
}

TEST(Sampling, ChiSquaredTemperatureAndTopK) {
  const std::vector<float> logits = {0.0f, 1.0f, -0.5f, 2.0f, 0.3f, -1.0f, 1.5f, 0.8f};
  SamplingRowParams rp;
  rp.temperature = 0.7f;
  rp.top_k = 4;  // keeps 3, 6, 1, 7
  rp.seed = 99;
  std::vector<double> z(8, -std::numeric_limits<double>::infinity());
  for (int t : {3, 6, 1, 7}) z[size_t(t)] = logits[size_t(t)] / 0.7;
  std::vector<double> probs(8, 0.0);
  double s = 0;
  for (int t : {3, 6, 1, 7}) s += std::exp(z[size_t(t)]);
  for (int t : {3, 6, 1, 7}) probs[size_t(t)] = std::exp(z[size_t(t)]) / s;
  const double chi = chi_squared(logits, rp, probs);
  std::printf("chi^2 = %.2f (3 dof)\n", chi);
  EXPECT_LT(chi, 16.3);  // 3 dof, p = 0.001
}

}  // namespace
}  // namespace pagoda::gpu
