// CUDA sampler against the CPU twin (same token for the same logits, params,
// seed and step; logprobs and top-N candidates) over greedy, temperature,
// top_k, top_p, min_p, penalties and their combinations, on plain, tied and
// partly masked (-inf) logits, token masks with logit biases (issue 23), raw
// and processed logprob modes; plus checks
// independent of the twin: determinism and batch independence, top_k = 1 is
// the argmax, drawn tokens stay inside sort-based top_k / top_p / min_p sets,
// and a chi-square test of the draw frequencies against softmax.
// Skips without a device.
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_CUDA

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <random>

#include "tests/cuda_gpu_test_util.hpp"

namespace pagoda::gpu::test {
namespace {

using CudaSampling = CudaTest;

enum class Logits { kNormal, kTies, kMasked };

struct Batch {
  int32_t V = 0;
  std::vector<float> logits;  // [R, V]
  std::vector<SamplingRowParams> rows;
  std::vector<int32_t> history;
};

struct Out {
  std::vector<int32_t> tokens, top_tokens;
  std::vector<float> logprobs, top_logprobs;
};

SamplingRowParams row(float t, int32_t k = 0, float p = 1.0f, float min_p = 0.0f,
                      float rep = 1.0f, float freq = 0.0f, float pres = 0.0f) {
  SamplingRowParams r;
  r.temperature = t;
  r.top_k = k;
  r.top_p = p;
  r.min_p = min_p;
  r.repetition_penalty = rep;
  r.frequency_penalty = freq;
  r.presence_penalty = pres;
  return r;
}

const std::vector<SamplingRowParams>& configs() {
  static const std::vector<SamplingRowParams> c = {
      row(0.0f), row(1.0f), row(0.7f), row(1.3f, 1), row(1.0f, 5), row(0.9f, 50),
      row(1.0f, 0, 0.9f), row(1.0f, 0, 0.5f), row(1.0f, 0, 0.0f), row(1.0f, 0, 0.999f),
      row(1.0f, 0, 1.0f, 0.05f), row(1.0f, 0, 1.0f, 0.5f), row(0.8f, 40, 0.9f, 0.02f),
      row(1.0f, 0, 1.0f, 0.0f, 1.3f), row(1.0f, 0, 1.0f, 0.0f, 1.0f, 0.4f, 0.6f),
      row(0.0f, 0, 1.0f, 0.0f, 1.5f, 0.3f, 0.2f), row(0.5f, 10, 0.8f, 0.0f, 1.2f, 0.5f, 0.5f),
      row(1e-6f), row(2.0f, 3, 1.0f, 0.1f)};
  return c;
}

// Rows = configs x `repeats` (seeds and steps vary); histories hold repeats,
// out-of-range ids and the row's argmax, so penalties change the outcome;
// odd repeats ban the argmax.
Batch make_batch(int32_t V, Logits kind, int repeats, uint32_t seed) {
  Batch b;
  b.V = V;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 3.0f);
  for (const SamplingRowParams& base : configs()) {
    for (int i = 0; i < repeats; ++i) {
      const size_t at = b.logits.size();
      for (int32_t v = 0; v < V; ++v) {
        float x = n(rng);
        if (kind == Logits::kTies) x = std::round(x * 2.0f) / 2.0f;
        if (kind == Logits::kMasked && rng() % 10 < 3) x = -INFINITY;
        b.logits.push_back(x);
      }
      const int32_t top = int32_t(std::max_element(b.logits.begin() + ptrdiff_t(at), b.logits.end()) -
                                  (b.logits.begin() + ptrdiff_t(at)));
      SamplingRowParams r = base;
      r.seed = 1000u + uint64_t(rng() % 100000);
      r.step = uint64_t(i) * 7 + (uint64_t{1} << 33);  // the high word of step matters too
      r.num_top_logprobs = std::array<int32_t, 4>{0, 1, 5, 20}[size_t(i) % 4];
      r.prompt_offset = int64_t(b.history.size());
      const std::vector<int32_t> prompt = {top, int32_t(rng() % uint32_t(V)), -1, V + 3, top};
      b.history.insert(b.history.end(), prompt.begin(), prompt.end());
      r.prompt_len = int32_t(prompt.size());
      r.output_offset = int64_t(b.history.size());
      const std::vector<int32_t> output = {int32_t(rng() % uint32_t(V)), top, V, top,
                                           int32_t(rng() % uint32_t(V)), top};
      b.history.insert(b.history.end(), output.begin(), output.end());
      r.output_len = int32_t(output.size());
      if (i % 2 == 1) {  // ban the argmax (and an out-of-range id) on odd repeats
        r.banned_offset = int64_t(b.history.size());
        b.history.insert(b.history.end(), {top, V + 1});
        r.banned_len = 2;
      }
      if (i % 3 == 2) {  // a token mask (~3/4 allowed) and two logit biases (issue 23)
        r.mask_offset = int64_t(b.history.size());
        r.mask_words = (V + 31) / 32;
        for (int32_t w = 0; w < r.mask_words; ++w) b.history.push_back(int32_t(uint32_t(rng()) | uint32_t(rng())));
        const float up = 2.5f, down = -4.0f;
        int32_t up_bits, down_bits;
        std::memcpy(&up_bits, &up, 4);
        std::memcpy(&down_bits, &down, 4);
        r.bias_offset = int64_t(b.history.size());
        b.history.insert(b.history.end(), {top, down_bits, (top + 1) % V, up_bits});
        r.bias_len = 2;
      }
      b.rows.push_back(r);
    }
  }
  return b;
}

Out run_sample(Backend& be, const Batch& b, LogprobMode mode) {
  const size_t R = b.rows.size();
  DeviceBuffer lb = put(be, b.logits), rb = put(be, b.rows), hb = put(be, b.history);
  DeviceBuffer tok = put(be, std::vector<int32_t>(R, -7)), lp = put(be, std::vector<float>(R));
  DeviceBuffer tt = put(be, std::vector<int32_t>(R * kMaxTopLogprobs, -7));
  DeviceBuffer tl = put(be, std::vector<float>(R * kMaxTopLogprobs));
  SamplingParams p;
  p.logits = lb.as<const float>();
  p.rows = rb.as<const SamplingRowParams>();
  p.history = hb.as<const int32_t>();
  p.num_rows = int32_t(R);
  p.vocab_size = b.V;
  p.logprob_mode = mode;
  p.tokens = tok.as<int32_t>();
  p.logprobs = lp.as<float>();
  p.top_tokens = tt.as<int32_t>();
  p.top_logprobs = tl.as<float>();
  be.sample(p);
  return Out{get<int32_t>(be, tok, R), get<int32_t>(be, tt, R * kMaxTopLogprobs),
             get<float>(be, lp, R), get<float>(be, tl, R * kMaxTopLogprobs)};
}

void expect_same(const Out& got, const Out& want, const std::string& label) {
  expect_bitwise(got.tokens, want.tokens, label + " tokens");
  expect_bitwise(got.top_tokens, want.top_tokens, label + " top tokens");
  expect_close(got.logprobs, want.logprobs, 2e-6, 1e-6, label + " logprobs");
  expect_close(got.top_logprobs, want.top_logprobs, 2e-6, 1e-6, label + " top logprobs");
}

TEST_F(CudaSampling, MatchesCpuTwin) {
  for (int32_t V : {49152, 1000, 7, 1}) {
    for (Logits kind : {Logits::kNormal, Logits::kTies, Logits::kMasked}) {
      const Batch b = make_batch(V, kind, 6, uint32_t(V) + uint32_t(kind));
      for (LogprobMode mode : {LogprobMode::kRaw, LogprobMode::kProcessed}) {
        const std::string label = "V=" + std::to_string(V) + " logits=" +
                                  std::to_string(int(kind)) + " mode=" + std::to_string(int(mode));
        expect_same(run_sample(*gpu_, b, mode), run_sample(*cpu_, b, mode), label);
      }
    }
  }
}

TEST_F(CudaSampling, DeterministicAndBatchIndependent) {
  const Batch b = make_batch(49152, Logits::kNormal, 2, 5);
  const Out first = run_sample(*gpu_, b, LogprobMode::kRaw);
  const Out again = run_sample(*gpu_, b, LogprobMode::kRaw);
  expect_bitwise(again.tokens, first.tokens, "rerun tokens");
  expect_bitwise(again.logprobs, first.logprobs, "rerun logprobs");
  for (size_t r : {size_t(3), size_t(12), b.rows.size() - 1}) {
    Batch one;
    one.V = b.V;
    one.logits.assign(b.logits.begin() + ptrdiff_t(r * size_t(b.V)),
                      b.logits.begin() + ptrdiff_t((r + 1) * size_t(b.V)));
    one.rows = {b.rows[r]};
    one.history = b.history;
    const Out alone = run_sample(*gpu_, one, LogprobMode::kRaw);
    EXPECT_EQ(alone.tokens[0], first.tokens[r]) << "row " << r;
    EXPECT_EQ(alone.logprobs[0], first.logprobs[r]) << "row " << r;
  }
}

// Draws of one row over many steps (one row per step).
Batch repeated_row(const std::vector<float>& logits, SamplingRowParams rp, int draws) {
  Batch b;
  b.V = int32_t(logits.size());
  for (int i = 0; i < draws; ++i) {
    b.logits.insert(b.logits.end(), logits.begin(), logits.end());
    rp.seed = 77;
    rp.step = uint64_t(i);
    b.rows.push_back(rp);
  }
  b.history = {0};
  return b;
}

TEST_F(CudaSampling, FiltersKeepOnlySortBasedSets) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> logits(5000);
  for (auto& x : logits) x = n(rng);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return logits[a] > logits[c]; });
  // top_p = 0.3 nucleus: the sorted prefix reaching 30% of the mass.
  double total = 0;
  for (float x : logits) total += std::exp(double(x) - logits[order[0]]);
  size_t nucleus = 0;
  for (double cum = 0; cum < 0.3 * total; ++nucleus) cum += std::exp(double(logits[order[nucleus]]) - logits[order[0]]);
  struct Case {
    SamplingRowParams rp;
    size_t allowed;  // the first `allowed` tokens of `order`
  };
  const double min_p_floor = logits[order[0]] + std::log(0.2);
  size_t min_p_set = 0;
  while (logits[order[min_p_set]] >= min_p_floor) ++min_p_set;
  for (const Case& c : {Case{row(1.0f, 7), 7}, Case{row(1.0f, 0, 0.3f), nucleus},
                        Case{row(1.0f, 0, 1.0f, 0.2f), min_p_set}, Case{row(1.5f, 1), 1}}) {
    const Out out = run_sample(*gpu_, repeated_row(logits, c.rp, 2000), LogprobMode::kRaw);
    const std::vector<int32_t> allowed(order.begin(), order.begin() + ptrdiff_t(c.allowed));
    std::vector<int> seen(logits.size());
    for (int32_t t : out.tokens) {
      ASSERT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end())
          << "token " << t << " outside the set of " << c.allowed;
      ++seen[size_t(t)];
    }
    if (c.allowed <= 7) {
      for (int32_t t : allowed) EXPECT_GT(seen[size_t(t)], 0) << "never drew " << t;
    }
  }
}

TEST_F(CudaSampling, DrawFrequenciesFollowSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, -1.0f, 0.25f, 1.5f};
  const int draws = 20000;
  const Out out = run_sample(*gpu_, repeated_row(logits, row(1.0f), draws), LogprobMode::kRaw);
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += (p[i] = std::exp(double(logits[i])));
  std::vector<int> count(logits.size());
  for (int32_t t : out.tokens) ++count[size_t(t)];
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double expected = draws * p[i] / z;
    chi2 += (count[i] - expected) * (count[i] - expected) / expected;
  }
  EXPECT_LT(chi2, 30.0) << "7 degrees of freedom";
}

}  // namespace
}  // namespace pagoda::gpu::test

#else

TEST(CudaSampling, NotBuilt) { GTEST_SKIP() << "built without CUDA (PAGODA_CUDA=OFF)"; }

#endif
