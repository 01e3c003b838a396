// BeamSearch (actors/beam_search.hpp) on its own:
//  - hand-built candidate lists: the top-k-rank rule for finished hypotheses,
//    length penalty over generated tokens (prompt excluded), early_stopping
//    true/false, max_new_tokens, min_new_tokens, ranked()/best();
//  - random small-vocabulary models (tests/beam_toy_model.hpp) against a
//    literal transcription of HF transformers' `_beam_search` tensor
//    algorithm (-1e9 masks, top-k over the merged finished + new lists).
// The scheduler integration is in beam_scheduler_test.cpp, the real model
// against HF goldens in beam_engine_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "actors/beam_search.hpp"
#include "beam_toy_model.hpp"

namespace pagoda::actors {
namespace {

using beam_test::kSmallVocab;
using beam_test::toy_logprobs;

constexpr TokenId kEos = 2;

std::vector<BeamToken> cands(std::initializer_list<std::pair<TokenId, float>> l) {
  std::vector<BeamToken> out;
  for (auto [t, lp] : l) out.push_back({t, lp});
  return out;
}

BeamConfig config(int32_t k, float lp, bool es, int32_t max_new, int32_t min_new = 0) {
  BeamConfig c;
  c.beam_width = k;
  c.length_penalty = lp;
  c.early_stopping = es;
  c.max_new_tokens = max_new;
  c.min_new_tokens = min_new;
  c.stop_tokens = {kEos};
  return c;
}

TEST(BeamSearch, FirstStepKeepsTheKBestTokensOfThePrompt) {
  BeamSearch b(config(2, 1.0f, true, 8));
  auto parents = b.step({cands({{9, -1.0f}, {5, -0.1f}, {7, -0.5f}, {kEos, -2.0f}})});
  ASSERT_TRUE(parents.ok());
  EXPECT_EQ(*parents, (std::vector<int32_t>{0, 0}));
  ASSERT_EQ(b.live().size(), 2u);
  EXPECT_EQ(b.live()[0].tokens, std::vector<TokenId>{5});
  EXPECT_EQ(b.live()[1].tokens, std::vector<TokenId>{7});
  EXPECT_NEAR(b.live()[1].cumulative_logprob, -0.5, 1e-7);
  EXPECT_TRUE(b.finished().empty());
  EXPECT_FALSE(b.done());
  EXPECT_EQ(BeamSearch::candidates_per_beam(b.config()), 4);
}

// An EOS candidate finishes a hypothesis only within the first k ranks; its
// score divides by the generated length including the EOS.
TEST(BeamSearch, EosFinishesOnlyWithinTheTopKRanks) {
  BeamSearch b(config(2, 2.0f, true, 8));
  ASSERT_TRUE(b.step({cands({{5, -0.1f}, {7, -0.5f}})}).ok());
  auto parents = b.step({cands({{kEos, -0.2f}, {10, -0.3f}, {11, -3.0f}}),
                         cands({{kEos, -0.05f}, {12, -0.1f}, {13, -4.0f}})});
  ASSERT_TRUE(parents.ok());
  // ranks: (0,EOS) -0.3, (0,10) -0.4, (1,EOS) -0.55 (rank 2: dropped), (1,12) -0.6
  EXPECT_EQ(*parents, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(b.live()[0].tokens, (std::vector<TokenId>{5, 10}));
  EXPECT_EQ(b.live()[1].tokens, (std::vector<TokenId>{7, 12}));
  ASSERT_EQ(b.finished().size(), 1u);
  EXPECT_EQ(b.finished()[0].tokens, (std::vector<TokenId>{5, kEos}));
  EXPECT_NEAR(b.finished()[0].score, -0.3 / 4.0, 1e-6);
  EXPECT_EQ(b.finished()[0].finish, FinishReason::stop);
}

// k = 2, length_penalty 1: after step 2 both slots are finished (-0.35,
// -0.5) while the best live beam could still score -0.8 / 2 = -0.4 > -0.5.
// early_stopping = true stops there; false goes on, finds a better
// hypothesis and stops when the heuristic closes (live best / length <=
// worst finished).
TEST(BeamSearch, EarlyStoppingFalseKeepsSearchingWhileImprovable) {
  for (bool es : {true, false}) {
    BeamSearch b(config(2, 1.0f, es, 8));
    ASSERT_TRUE(b.step({cands({{kEos, -0.5f}, {kEos + 1, -0.6f}, {5, -0.8f}, {6, -3.0f}})}).ok());
    ASSERT_EQ(b.finished().size(), 1u);
    ASSERT_TRUE(b.step({cands({{kEos, -0.1f}, {7, -0.2f}}), cands({{kEos, -0.1f}, {8, -0.05f}})}).ok());
    // (0,EOS) -0.7: score -0.35; (0,7) -0.8; (1,8) -0.85; (1,EOS) -0.9 is rank 3
    ASSERT_EQ(b.finished().size(), 2u);
    EXPECT_NEAR(b.finished()[0].score, -0.35, 1e-6);
    EXPECT_NEAR(b.finished()[1].score, -0.5, 1e-6);
    if (es) {
      EXPECT_TRUE(b.done());
      continue;
    }
    EXPECT_FALSE(b.done());
    ASSERT_TRUE(b.step({cands({{kEos, -0.05f}, {9, -1.0f}}), cands({{kEos, -2.0f}, {9, -2.0f}})}).ok());
    // (0,EOS) -0.85 / 3 joins and pushes out -0.5
    ASSERT_EQ(b.finished().size(), 2u);
    EXPECT_NEAR(b.finished()[0].score, -0.85 / 3.0, 1e-6);
    EXPECT_EQ(b.finished()[0].tokens, (std::vector<TokenId>{kEos + 1, 7, kEos}));
    EXPECT_NEAR(b.finished()[1].score, -0.35, 1e-6);
    EXPECT_TRUE(b.done());  // live best -1.8 / 3 = -0.6 <= -0.35
  }
}

// At max_new_tokens every candidate hits: the first k ranks are finished
// with `length` (an EOS among them with `stop`), best score first.
TEST(BeamSearch, MaxNewTokensFinishesTheTopKCandidates) {
  BeamSearch b(config(3, 1.0f, true, 1));
  ASSERT_TRUE(b.step({cands({{5, -0.1f}, {kEos, -0.2f}, {7, -0.3f}, {8, -0.4f}})}).ok());
  EXPECT_TRUE(b.done());
  EXPECT_TRUE(b.live().empty());
  ASSERT_EQ(b.finished().size(), 3u);
  EXPECT_EQ(b.finished()[0].tokens, std::vector<TokenId>{5});
  EXPECT_EQ(b.finished()[0].finish, FinishReason::length);
  EXPECT_EQ(b.finished()[1].finish, FinishReason::stop);
  EXPECT_EQ(b.finished()[2].tokens, std::vector<TokenId>{7});
  EXPECT_EQ(b.best(2).size(), 2u);
  EXPECT_FALSE(b.step({}).ok());  // done
}

TEST(BeamSearch, StopTokensAreNoCandidatesBeforeMinNewTokens) {
  BeamSearch b(config(1, 1.0f, true, 4, /*min_new=*/1));
  ASSERT_TRUE(b.step({cands({{kEos, -0.01f}, {5, -1.0f}})}).ok());
  EXPECT_TRUE(b.finished().empty());
  ASSERT_EQ(b.live().size(), 1u);
  EXPECT_EQ(b.live()[0].tokens, std::vector<TokenId>{5});
  ASSERT_TRUE(b.step({cands({{kEos, -0.01f}, {6, -1.0f}})}).ok());
  ASSERT_EQ(b.finished().size(), 1u);
  EXPECT_TRUE(b.done());
}

TEST(BeamSearch, RankedMergesLiveAndFinishedAndBestFillsWithLiveAsAbort) {
  BeamSearch b(config(2, 1.0f, true, 8));
  ASSERT_TRUE(b.step({cands({{kEos, -0.2f}, {5, -0.3f}, {6, -0.9f}})}).ok());
  std::vector<BeamResult> r = b.ranked();
  ASSERT_EQ(r.size(), 3u);  // fin EOS -0.2, live 5 -0.3, live 6 -0.9
  EXPECT_EQ(r[0].finish, FinishReason::stop);
  EXPECT_EQ(r[1].tokens, std::vector<TokenId>{5});
  EXPECT_EQ(r[1].finish, FinishReason::none);
  std::vector<BeamResult> best = b.best(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[1].tokens, std::vector<TokenId>{5});
  EXPECT_EQ(best[1].finish, FinishReason::abort);
  EXPECT_FALSE(b.step({cands({{1, 0.0f}})}).ok());  // two live beams expected
}


// ---- BeamSearch vs a literal transcription of HF's tensor algorithm --------

struct HfResult {
  std::vector<std::vector<TokenId>> seqs;
  std::vector<double> scores;
};

// HF _beam_search for batch 1 (generation/utils.py), with its masks: running
// scores start {0, -1e9, ...}, finished slots at -1e9, top-k over the
// merged (finished + new) scores, the sticky early-stop heuristic.
HfResult hf_beam_search(const BeamConfig& c, uint64_t salt) {
  const int32_t k = c.beam_width, V = kSmallVocab;
  const int32_t keep = std::max<int32_t>(2, 1 + int32_t(c.stop_tokens.size())) * k;
  auto is_eos = [&c](TokenId t) {
    return std::find(c.stop_tokens.begin(), c.stop_tokens.end(), t) != c.stop_tokens.end();
  };
  std::vector<std::vector<TokenId>> run(static_cast<size_t>(k)), fin(static_cast<size_t>(k));
  std::vector<double> run_s(static_cast<size_t>(k), -1e9), fin_s(static_cast<size_t>(k), -1e9);
  std::vector<bool> is_fin(static_cast<size_t>(k), false);
  run_s[0] = 0.0;
  bool improvable = true;
  for (int32_t cur = 0;; ++cur) {
    std::vector<std::pair<double, int32_t>> acc;  // (score, flat index)
    for (int32_t b = 0; b < k; ++b) {
      std::vector<double> lp = toy_logprobs(run[size_t(b)], salt);
      for (int32_t v = 0; v < V; ++v) {
        double x = lp[size_t(v)];
        if (cur < c.min_new_tokens && is_eos(v)) x = -INFINITY;
        acc.push_back({run_s[size_t(b)] + x, b * V + v});
      }
    }
    std::stable_sort(acc.begin(), acc.end(), [](auto& a, auto& b) { return a.first > b.first; });
    acc.resize(size_t(keep));
    std::vector<std::vector<TokenId>> top(static_cast<size_t>(keep));
    std::vector<bool> hits(static_cast<size_t>(keep));
    for (int32_t i = 0; i < keep; ++i) {
      top[size_t(i)] = run[size_t(acc[size_t(i)].second / V)];
      top[size_t(i)].push_back(acc[size_t(i)].second % V);
      hits[size_t(i)] = is_eos(acc[size_t(i)].second % V) || cur + 1 >= c.max_new_tokens;
    }
    std::vector<std::pair<double, int32_t>> r;
    for (int32_t i = 0; i < keep; ++i) r.push_back({acc[size_t(i)].first - 1e9 * hits[size_t(i)], i});
    std::stable_sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.first > b.first; });
    const bool full = std::all_of(is_fin.begin(), is_fin.end(), [](bool f) { return f; }) &&
                      c.early_stopping;
    std::vector<std::tuple<double, std::vector<TokenId>, bool>> merged;
    for (int32_t j = 0; j < k; ++j) merged.push_back({fin_s[size_t(j)], fin[size_t(j)], is_fin[size_t(j)]});
    for (int32_t i = 0; i < keep; ++i) {
      const bool just = hits[size_t(i)] && i < k;
      double s = acc[size_t(i)].first / std::pow(double(cur + 1), double(c.length_penalty));
      s += -1e9 * full - 1e9 * !improvable - 1e9 * !just;
      merged.push_back({s, top[size_t(i)], just});
    }
    std::stable_sort(merged.begin(), merged.end(),
                     [](auto& a, auto& b) { return std::get<0>(a) > std::get<0>(b); });
    for (int32_t j = 0; j < k; ++j) {
      std::tie(fin_s[size_t(j)], fin[size_t(j)], std::ignore) = merged[size_t(j)];
      is_fin[size_t(j)] = std::get<2>(merged[size_t(j)]);
      run[size_t(j)] = top[size_t(r[size_t(j)].second)];
      run_s[size_t(j)] = r[size_t(j)].first;
    }
    const double best = run_s[0] / std::pow(double(cur + 1), double(c.length_penalty));
    const double worst = *std::min_element(fin_s.begin(), fin_s.end());
    bool any = false;
    for (int32_t j = 0; j < k; ++j) any = any || best > (is_fin[size_t(j)] ? worst : -1e9);
    improvable = improvable && any;
    const bool all_fin = std::all_of(is_fin.begin(), is_fin.end(), [](bool f) { return f; });
    const bool all_hit = std::all_of(hits.begin(), hits.end(), [](bool h) { return h; });
    if (!improvable || (all_fin && c.early_stopping) || all_hit) break;
  }
  HfResult out;
  for (int32_t j = 0; j < k; ++j) {
    if (!is_fin[size_t(j)]) continue;
    out.seqs.push_back(fin[size_t(j)]);
    out.scores.push_back(fin_s[size_t(j)]);
  }
  return out;
}

HfResult run_beam_search(const BeamConfig& c, uint64_t salt) {
  BeamSearch b(c);
  while (!b.done()) {
    std::vector<std::vector<BeamToken>> cs;
    for (const LiveBeam& l : b.live()) {
      std::vector<double> lp = toy_logprobs(l.tokens, salt);
      std::vector<BeamToken> one;
      for (int32_t v = 0; v < kSmallVocab; ++v) one.push_back({v, float(lp[size_t(v)])});
      std::shuffle(one.begin(), one.end(), std::mt19937(uint32_t(salt)));  // any order
      cs.push_back(std::move(one));
    }
    if (!b.step(cs).ok()) break;
  }
  HfResult out;
  for (const BeamResult& r : b.finished()) {
    out.seqs.push_back(r.tokens);
    out.scores.push_back(r.score);
  }
  return out;
}

TEST(BeamSearch, MatchesTransformersAlgorithmOnRandomToyModels) {
  std::mt19937 rng(7);
  int early_ends = 0, eos_hyps = 0;
  for (int trial = 0; trial < 400; ++trial) {
    BeamConfig c;
    c.beam_width = 1 + int32_t(rng() % 4);
    const float lps[] = {1.0f, 0.5f, 2.0f, 0.0f, -0.5f};
    c.length_penalty = lps[rng() % 5];
    c.early_stopping = rng() % 2 == 0;
    c.max_new_tokens = 1 + int32_t(rng() % 10);
    c.min_new_tokens = int32_t(rng() % 3);
    const int32_t neos = int32_t(rng() % 3);
    for (int32_t e = 0; e < neos; ++e) c.stop_tokens.push_back(TokenId(e * 5));
    const uint64_t salt = rng();
    const HfResult want = hf_beam_search(c, salt);
    const HfResult got = run_beam_search(c, salt);
    ASSERT_EQ(got.seqs, want.seqs) << "trial " << trial;
    ASSERT_EQ(got.scores.size(), want.scores.size());
    for (size_t i = 0; i < got.scores.size(); ++i) EXPECT_NEAR(got.scores[i], want.scores[i], 1e-9);
    for (const auto& s : want.seqs) {
      early_ends += int32_t(s.size()) < c.max_new_tokens;
      eos_hyps += !s.empty() && std::find(c.stop_tokens.begin(), c.stop_tokens.end(), s.back()) !=
                                    c.stop_tokens.end();
    }
  }
  EXPECT_GT(early_ends, 50);  // the trials exercise EOS endings, not only max length
  EXPECT_GT(eos_hyps, 50);
}


}  // namespace
}  // namespace pagoda::actors
