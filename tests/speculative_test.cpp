// The plain-C++ cores of speculative decoding (issue 24):
//  - NgramProposer against a brute-force search written here, on random
//    token streams small enough to repeat;
//  - verify_drafts with the CPU sampler on a Markov-chain "model": a seeded
//    sequence yields the same tokens with and without speculation, for any
//    drafts (greedy, temperature, top-k/top-p), and the output distribution
//    passes a chi-squared test that a biased verifier (written here as a
//    control) fails;
//  - BlockManager::rollback: drafted slots booked as pending, the rejected
//    ones dropped, empty blocks back in the pool, prefix-cache entries only
//    for committed full blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "actors/block_manager.hpp"
#include "actors/ngram_proposer.hpp"
#include "actors/scheduler_core.hpp"
#include "actors/speculative_verify.hpp"
#include "gpu/backend.hpp"

namespace pagoda::actors {
namespace {

// ---- n-gram proposer ----------------------------------------------------------

// The rule of ngram_proposer.hpp, by exhaustive search.
std::vector<int32_t> brute_propose(const std::vector<int32_t>& t, const NgramConfig& c) {
  const int32_t len = int32_t(t.size());
  for (int32_t n = std::min(c.max_n, len - 1); n >= c.min_n; --n) {
    for (int32_t e = len - 1; e >= n; --e) {  // most recent occurrence first
      if (std::equal(t.end() - n, t.end(), t.begin() + (e - n))) {
        return std::vector<int32_t>(t.begin() + e, t.begin() + std::min(e + c.k, len));
      }
    }
  }
  return {};
}

TEST(NgramProposer, MatchesBruteForceOnRandomStreams) {
  std::mt19937 rng(7);
  int matched = 0;
  for (int trial = 0; trial < 60; ++trial) {
    NgramConfig c;
    c.min_n = 1 + int32_t(rng() % 3);
    c.max_n = c.min_n + int32_t(rng() % 4);
    c.k = 1 + int32_t(rng() % 6);
    ASSERT_TRUE(c.validate().ok());
    const int32_t alphabet = 2 + int32_t(rng() % 5);
    NgramProposer p(c);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 120; ++i) {
      const int32_t tok = int32_t(rng() % uint32_t(alphabet));
      tokens.push_back(tok);
      p.append(tok);
      const auto want = brute_propose(tokens, c);
      ASSERT_EQ(p.propose(), want) << "trial " << trial << " length " << tokens.size();
      matched += want.empty() ? 0 : 1;
    }
  }
  EXPECT_GT(matched, 3000);  // the streams do repeat: most positions have a match
}

TEST(NgramProposer, PrefersTheLongestThenTheMostRecentMatch) {
  NgramConfig c{.min_n = 1, .max_n = 3, .k = 3};
  NgramProposer p(c);
  // "5 6 7 8 ... 9 6 7 1 ... 5 6 7": the 3-gram 5 6 7 occurred first, the
  // 2-gram 6 7 more recently; the longer match wins.
  p.append(std::vector<int32_t>{5, 6, 7, 8, 8, 9, 6, 7, 1, 2, 5, 6, 7});
  EXPECT_EQ(p.propose(), (std::vector<int32_t>{8, 8, 9}));
  EXPECT_EQ(p.propose(2), (std::vector<int32_t>{8, 8}));
  p.append(4);  // "7 4" never occurred, "4" neither
  EXPECT_TRUE(p.propose().empty());
  p.reset();
  EXPECT_EQ(p.size(), 0);
  p.append(std::vector<int32_t>{1, 2, 3, 1, 2, 3, 9, 1, 2, 3});
  EXPECT_EQ(p.propose(), (std::vector<int32_t>{9, 1, 2}));  // most recent 1 2 3
}

TEST(NgramProposer, ValidatesItsConfig) {
  EXPECT_FALSE((NgramConfig{.min_n = 0, .max_n = 2, .k = 2}).validate().ok());
  EXPECT_FALSE((NgramConfig{.min_n = 3, .max_n = 2, .k = 2}).validate().ok());
  EXPECT_FALSE((NgramConfig{.min_n = 1, .max_n = 17, .k = 2}).validate().ok());
  EXPECT_FALSE((NgramConfig{.min_n = 1, .max_n = 2, .k = 0}).validate().ok());
  EXPECT_FALSE((NgramConfig{.min_n = 1, .max_n = 2, .k = 33}).validate().ok());
  EXPECT_TRUE((NgramConfig{.min_n = 2, .max_n = 2, .k = 32}).validate().ok());
}

// ---- verification with the sampler ------------------------------------------

TEST(VerifyDrafts, CommitsTheAcceptedPrefixAndOneMore) {
  const std::vector<int32_t> d{4, 5, 6};
  auto all = verify_drafts(d, std::vector<int32_t>{4, 5, 6, 7});
  EXPECT_EQ(all.accepted, 3);
  EXPECT_EQ(all.tokens, (std::vector<int32_t>{4, 5, 6, 7}));
  auto one = verify_drafts(d, std::vector<int32_t>{4, 9, 6, 7});
  EXPECT_EQ(one.accepted, 1);
  EXPECT_EQ(one.tokens, (std::vector<int32_t>{4, 9}));
  auto none = verify_drafts(d, std::vector<int32_t>{1, 5, 6, 7});
  EXPECT_EQ(none.accepted, 0);
  EXPECT_EQ(none.tokens, (std::vector<int32_t>{1}));
  auto empty = verify_drafts({}, std::vector<int32_t>{3});
  EXPECT_EQ(empty.tokens, (std::vector<int32_t>{3}));
}

// A "model" whose next-token logits depend on the previous token only.
struct Chain {
  int32_t V = 5;
  std::vector<float> logits;  // [V, V]: row = previous token
  explicit Chain(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.2f);
    logits.resize(size_t(V * V));
    for (float& x : logits) x = d(rng);
  }
  double prob(int32_t prev, int32_t next) const {
    double z = 0;
    for (int32_t t = 0; t < V; ++t) z += std::exp(double(logits[size_t(prev * V + t)]));
    return std::exp(double(logits[size_t(prev * V + next)])) / z;
  }
};

struct Sampler {
  std::unique_ptr<gpu::Backend> be =
      std::move(gpu::make_backend(gpu::BackendKind::kCpu, gpu::BackendOptions{0, 1})).value();
  // One draw per row: row r continues `prevs[r]` at output index step0 + r.
  std::vector<int32_t> draw(const Chain& m, const std::vector<int32_t>& prevs, uint64_t step0,
                            gpu::SamplingRowParams rp) {
    const size_t R = prevs.size();
    std::vector<float> logits;
    std::vector<gpu::SamplingRowParams> rows(R, rp);
    for (size_t r = 0; r < R; ++r) {
      logits.insert(logits.end(), m.logits.begin() + prevs[r] * m.V,
                    m.logits.begin() + (prevs[r] + 1) * m.V);
      rows[r].step = step0 + r;
    }
    std::vector<int32_t> tokens(R);
    std::vector<float> lp(R);
    gpu::SamplingParams p;
    p.logits = logits.data();
    p.rows = rows.data();
    p.num_rows = int32_t(R);
    p.vocab_size = m.V;
    p.tokens = tokens.data();
    p.logprobs = lp.data();
    be->sample(p);
    return tokens;
  }
};

// Generates n tokens after token 0: one draw per token (speculation off).
std::vector<int32_t> plain(Sampler& s, const Chain& m, int n, gpu::SamplingRowParams rp) {
  std::vector<int32_t> out;
  int32_t prev = 0;
  while (int(out.size()) < n) {
    prev = s.draw(m, {prev}, out.size(), rp)[0];
    out.push_back(prev);
  }
  return out;
}

// The same with k drafts per pass from `drafter` (prev, j) -> token, verified
// by verify_drafts; `biased` swaps in a wrong verifier (the control).
template <class Drafter>
std::vector<int32_t> speculative(Sampler& s, const Chain& m, int n, gpu::SamplingRowParams rp,
                                 int k, Drafter drafter, bool biased = false) {
  std::vector<int32_t> out;
  int32_t prev = 0;
  while (int(out.size()) < n) {
    std::vector<int32_t> drafts, prevs{prev};
    for (int j = 0; j < k; ++j) {
      drafts.push_back(drafter(prevs.back(), j));
      prevs.push_back(drafts.back());
    }
    const auto samples = s.draw(m, prevs, out.size(), rp);
    VerifyOutcome v = verify_drafts(drafts, samples);
    if (biased && v.accepted == 0 && m.prob(prev, drafts[0]) > 0.15) v.tokens = {drafts[0]};
    for (int32_t t : v.tokens) {
      if (int(out.size()) < n) out.push_back(t);
    }
    prev = out.back();
  }
  return out;
}

TEST(VerifyDrafts, SeededOutputIsTheSameWithAndWithoutSpeculation) {
  Sampler s;
  const Chain m(11);
  std::mt19937 rng(3);
  auto random_drafter = [&](int32_t, int) { return int32_t(rng() % 5); };
  auto copy_drafter = [&](int32_t prev, int) { return prev; };
  for (float temperature : {0.0f, 0.7f, 1.0f}) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      gpu::SamplingRowParams rp{.temperature = temperature, .top_k = seed % 3 == 0 ? 3 : 0,
                                .top_p = seed % 4 == 0 ? 0.8f : 1.0f, .seed = seed};
      const auto want = plain(s, m, 24, rp);
      EXPECT_EQ(speculative(s, m, 24, rp, 4, random_drafter), want) << seed;
      EXPECT_EQ(speculative(s, m, 24, rp, 2, copy_drafter), want) << seed;
    }
  }
}

// Chi-squared statistic of the first two tokens (V * V cells) over `trials`
// seeds against the chain's exact probabilities.
template <class Gen>
double chi_squared_two_tokens(const Chain& m, int trials, Gen gen) {
  std::map<std::pair<int32_t, int32_t>, int> counts;
  for (int i = 0; i < trials; ++i) {
    const auto t = gen(uint64_t(1000 + i));
    counts[{t[0], t[1]}]++;
  }
  double chi2 = 0;
  for (int32_t a = 0; a < m.V; ++a) {
    for (int32_t b = 0; b < m.V; ++b) {
      const double expect = trials * m.prob(0, a) * m.prob(a, b);
      const double got = counts[{a, b}];
      chi2 += (got - expect) * (got - expect) / expect;
    }
  }
  return chi2;
}

TEST(VerifyDrafts, FollowsTheTargetDistributionAndABiasedVerifierDoesNot) {
  Sampler s;
  const Chain m(5);
  // Drafts that are often wrong: "the next token is the previous one + 1".
  auto drafter = [](int32_t prev, int) { return (prev + 1) % 5; };
  const int trials = 12000;
  const double fair = chi_squared_two_tokens(m, trials, [&](uint64_t seed) {
    return speculative(s, m, 2, gpu::SamplingRowParams{.seed = seed}, 3, drafter);
  });
  const double biased = chi_squared_two_tokens(m, trials, [&](uint64_t seed) {
    return speculative(s, m, 2, gpu::SamplingRowParams{.seed = seed}, 3, drafter, true);
  });
  // 24 degrees of freedom: the 0.999 quantile is 51.2.
  std::printf("chi-squared: fair %.1f, biased control %.1f\n", fair, biased);
  EXPECT_LT(fair, 51.2);
  EXPECT_GT(biased, 51.2);
}

// ---- rollback in the block manager -------------------------------------------

BlockManager make_manager(int32_t blocks, bool caching = true) {
  BlockManagerConfig c;
  c.num_blocks = blocks;
  c.block_size = 4;
  c.watermark = 0.0;
  c.enable_prefix_caching = caching;
  return std::move(BlockManager::create(c)).value();
}

TEST(BlockManagerRollback, DropsRejectedDraftsAndReturnsTheirBlocks) {
  BlockManager bm = make_manager(8);
  const std::vector<TokenId> prompt{1, 2, 3, 4, 5, 6};  // 2 blocks, the 2nd half full
  ASSERT_TRUE(bm.allocate(1, prompt).ok());
  AppendResult r;
  ASSERT_TRUE(bm.append_pending(1, 5, r).ok());  // last token + 4 drafts: 11 tokens, 3 blocks
  EXPECT_EQ(bm.num_tokens(1), 11);
  EXPECT_EQ(bm.num_free_blocks(), 5);
  ASSERT_TRUE(bm.commit(1, 6, 7).ok());  // the input token and one accepted draft
  ASSERT_TRUE(bm.commit(1, 7, 8).ok());
  ASSERT_TRUE(bm.rollback(1, 8).ok());   // drafts at 8, 9, 10 rejected
  EXPECT_EQ(bm.num_tokens(1), 8);
  EXPECT_EQ(bm.num_pending(1), 0);
  EXPECT_EQ(bm.block_table(1).size(), 2u);
  EXPECT_EQ(bm.num_free_blocks(), 6);  // the third block went back
  EXPECT_EQ(bm.stored_tokens(), 8);
  EXPECT_TRUE(bm.check_invariants().ok()) << bm.check_invariants().error().message;
  // The committed full blocks are in the prefix cache: a new sequence with
  // the same 8 tokens + 1 hits 8 of them.
  ASSERT_TRUE(bm.free(1).ok());
  auto hit = bm.allocate(2, std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit.value().num_cached_tokens, 8);
}

TEST(BlockManagerRollback, NeverRegistersRejectedDraftsAndRefusesCommittedTokens) {
  BlockManager bm = make_manager(8);
  ASSERT_TRUE(bm.allocate(1, std::vector<TokenId>{1, 2, 3}).ok());
  AppendResult r;
  ASSERT_TRUE(bm.append_pending(1, 5, r).ok());  // positions 3..7: fills block 1 with drafts
  EXPECT_FALSE(bm.rollback(1, 2).ok());          // position 2 is a committed prompt token
  EXPECT_FALSE(bm.rollback(1, 9).ok());
  EXPECT_FALSE(bm.rollback(99, 0).ok());
  EXPECT_EQ(bm.num_tokens(1), 8);  // the failed calls changed nothing
  ASSERT_TRUE(bm.commit(1, 3, 4).ok());
  ASSERT_TRUE(bm.rollback(1, 4).ok());
  EXPECT_TRUE(bm.take_registered().size() == 1u);  // block 0 only: 1 2 3 4
  // Appending after the rollback takes a fresh block (block 1 went back).
  ASSERT_TRUE(bm.append_slots(1, std::vector<TokenId>{50}).ok());
  EXPECT_EQ(bm.num_tokens(1), 5);
  EXPECT_EQ(bm.block_table(1).size(), 2u);
  EXPECT_TRUE(bm.check_invariants().ok()) << bm.check_invariants().error().message;
}

TEST(BlockManagerRollback, AForkedSiblingKeepsItsSharedBlock) {
  BlockManager bm = make_manager(8);
  ASSERT_TRUE(bm.allocate(1, std::vector<TokenId>{1, 2, 3, 4, 5, 6}).ok());
  ASSERT_TRUE(bm.fork(1, 2).ok());
  AppendResult r;
  ASSERT_TRUE(bm.append_pending(1, 4, r).ok());  // copy-on-write of the shared block
  ASSERT_EQ(r.copies.size(), 1u);
  ASSERT_TRUE(bm.rollback(1, 6).ok());  // every draft rejected
  EXPECT_EQ(bm.num_tokens(1), 6);
  EXPECT_EQ(bm.num_tokens(2), 6);
  EXPECT_NE(bm.block_table(1)[1], bm.block_table(2)[1]);  // 1 keeps its own copy
  EXPECT_TRUE(bm.check_invariants().ok()) << bm.check_invariants().error().message;
  ASSERT_TRUE(bm.free(1).ok());
  ASSERT_TRUE(bm.free(2).ok());
  EXPECT_EQ(bm.num_free_blocks() + bm.num_cached_blocks(), 8);
}

// ---- the scheduler core's drafting and turn-down -------------------------------

struct SpecRun {
  int steps = 0;
  std::vector<TokenId> out;
  std::vector<int> rows_per_step;
};

// Runs one speculating greedy group to the end on a fake model: `next`
// maps (previous token, call count) to the sampled token.
template <class Next>
SpecRun run_spec_group(std::vector<TokenId> prompt, int32_t max_tokens, Next next,
                       NgramConfig request = {.min_n = 1, .max_n = 3, .k = 3},
                       NgramConfig server = {}) {
  SchedulerConfig c;
  c.speculative.config = server;
  c.max_model_len = 512;
  BlockManagerConfig bc;
  bc.num_blocks = 128;
  bc.block_size = 4;
  SchedulerCore core(c, std::move(BlockManager::create(bc)).value());
  SamplingOptions o;
  o.temperature = 0.0f;
  o.max_tokens = max_tokens;
  o.seed = 1;
  o.speculative = SpeculativeOptions{.set = true, .ngram = true, .config = request};
  EXPECT_TRUE(core.add_group(1, std::move(prompt), o).ok());
  SpecRun run;
  int calls = 0;
  while (core.has_unfinished() && run.steps < 500) {
    StepPlan plan = core.schedule();
    if (plan.empty()) break;
    ++run.steps;
    run.rows_per_step.push_back(int(plan.samples.size()));
    StepResult r;
    r.step_id = plan.step_id;
    for (const PlanSample& ps : plan.samples) {
      const PlanEntry& e = plan.entries[size_t(ps.entry)];
      const TokenId prev = e.tokens[e.tokens.size() - 1 - size_t(ps.row_back)];
      r.samples.push_back(SampleOutput{.seq = ps.seq, .token = next(prev, calls++)});
    }
    EXPECT_TRUE(core.apply(r).ok());
    for (const SeqEvent& ev : core.take_events()) {
      if (ev.has_token) run.out.push_back(ev.sample.token);
    }
  }
  EXPECT_EQ(core.block_manager().num_used_blocks(), 0);
  return run;
}

TEST(SpeculativeScheduling, AcceptedDraftsCutTheSteps) {
  auto cycle = [](TokenId prev, int) { return prev % 3 + 1; };  // 1 2 3 1 2 3 ...
  const SpecRun run = run_spec_group({1, 2, 3, 1, 2, 3, 1}, 40, cycle);
  std::vector<TokenId> want;
  for (int i = 0; i < 40; ++i) want.push_back(TokenId(i % 3 + 2 > 3 ? 1 : i % 3 + 2));
  EXPECT_EQ(run.out, want);
  EXPECT_EQ(run.steps, 1 + 10);  // the prefill's token, then 39 tokens at 4 per step
}

TEST(SpeculativeScheduling, ARequestsUnsetFieldsAreTheServers) {
  // The API's "speculative": "ngram" leaves k and the lookup range 0: the
  // server's --num-speculative-tokens 6 and --prompt-lookup-min/max apply.
  auto cycle = [](TokenId prev, int) { return prev % 8 + 1; };  // 1 2 ... 8 1 2 ...
  const NgramConfig unset{.min_n = 0, .max_n = 0, .k = 0};
  const SpecRun run = run_spec_group({1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3}, 29, cycle, unset,
                                     {.min_n = 1, .max_n = 3, .k = 6});
  int widest = 0;
  for (int rows : run.rows_per_step) widest = std::max(widest, rows);
  EXPECT_EQ(widest, 7);  // 6 drafts + 1
  EXPECT_EQ(run.steps, 1 + 4);  // the prefill's token, then 28 tokens at 7 per step
  // A request's own k wins over the server's.
  const SpecRun own = run_spec_group({1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3}, 29, cycle,
                                     {.min_n = 0, .max_n = 0, .k = 2}, {.min_n = 1, .max_n = 3, .k = 6});
  widest = 0;
  for (int rows : own.rows_per_step) widest = std::max(widest, rows);
  EXPECT_EQ(widest, 3);
}

TEST(SpeculativeScheduling, ASequenceWhoseDraftsFailCoolsDown) {
  // A "model" over 4 tokens that the prompt's n-grams cannot predict: drafts
  // are found at almost every step and about a quarter of each is accepted.
  auto noisy = [](TokenId, int call) { return TokenId((uint32_t(call) * 2654435761u >> 7) % 4 + 1); };
  const SpecRun run = run_spec_group({1, 2, 3, 4, 1, 2, 3, 4}, 300, noisy);
  ASSERT_EQ(run.out.size(), 300u);
  int speculative_steps = 0;
  for (int rows : run.rows_per_step) speculative_steps += rows > 1 ? 1 : 0;
  // Without the turn-down every step drafts; with it,
  // windows of 8 drafted tokens alternate with cool-downs of 16, 32, 64, ...
  EXPECT_GE(speculative_steps, 5);
  EXPECT_LE(speculative_steps, 60);  // 191 of 192 with the turn-down switched off
  std::printf("noisy model: %d steps, %d of them speculative\n", run.steps, speculative_steps);
}

}  // namespace
}  // namespace pagoda::actors
