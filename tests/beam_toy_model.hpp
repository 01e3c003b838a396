// A toy language model for the beam-search tests: log_softmax (rounded to
// float, as the sampler reports it) of logits drawn from a hash of the whole
// context and a salt, over kSmallVocab tokens. Header-only, test code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "actors/beam_search.hpp"

namespace pagoda::actors::beam_test {

inline constexpr int32_t kSmallVocab = 16;

// The "model": log_softmax of hash-seeded logits of the whole context.
inline std::vector<double> toy_logprobs(const std::vector<TokenId>& ctx, uint64_t salt) {
  uint64_t h = 0xcbf29ce484222325ULL ^ salt;
  for (TokenId t : ctx) h = (h ^ uint64_t(t + 1)) * 0x100000001b3ULL;
  std::mt19937_64 rng(h);
  std::vector<double> z(kSmallVocab);
  double mx = -1e300;
  for (double& v : z) {
    v = double(float(std::uniform_real_distribution<double>(-4.0, 4.0)(rng)));
    mx = std::max(mx, v);
  }
  double sum = 0.0;
  for (double v : z) sum += std::exp(v - mx);
  for (double& v : z) v = double(float(v - mx - std::log(sum)));  // as float logprobs
  return z;
}

// The toy model's best n tokens of a context, best first (ties: lower id).
inline std::vector<BeamToken> toy_top(const std::vector<TokenId>& ctx, uint64_t salt, int32_t n) {
  std::vector<double> lp = toy_logprobs(ctx, salt);
  std::vector<BeamToken> all;
  for (int32_t v = 0; v < kSmallVocab; ++v) all.push_back({v, float(lp[size_t(v)])});
  std::stable_sort(all.begin(), all.end(),
                   [](const BeamToken& a, const BeamToken& b) { return a.logprob > b.logprob; });
  all.resize(size_t(std::min(n, kSmallVocab)));
  return all;
}

}  // namespace pagoda::actors::beam_test
