// SchedulerCore with a fake executor that simulates the paged KV cache: it
// writes each planned token into its slot (after the plan's CoW copies) and
// draws the next token from a hash of the context READ BACK through the block
// table, the seed and the step. The reference is the same hash over the true
// token sequence, computed without any scheduler, so any wrong block table,
// missed copy, stale prefix-cache block or lost recompute changes an output.
#include <gtest/gtest.h>

#include <algorithm>

#include <deque>
#include <map>
#include <random>

#include "actors/scheduler_core.hpp"
#include "fake_kv_cache.hpp"
#include "scheduling_mode.hpp"

namespace pagoda::actors {
namespace {

constexpr int32_t kVocab = 60;
constexpr TokenId kEos = 0;

TokenId next_token(std::span<const TokenId> ctx, uint64_t seed, uint64_t step) {
  uint64_t h = seed * 0x9e3779b97f4a7c15ULL + step;
  for (TokenId t : ctx) h = (h ^ uint64_t(t)) * 0x100000001b3ULL + 7;
  h ^= h >> 29;
  return TokenId(h % kVocab);
}

// next_token, redrawn (same context, another step) while it is banned: the
// fake executor's stand-in for masking banned logits.
TokenId draw(std::span<const TokenId> ctx, uint64_t seed, uint64_t step,
             const std::vector<TokenId>& banned) {
  TokenId t = next_token(ctx, seed, step);
  for (uint64_t k = 1; std::find(banned.begin(), banned.end(), t) != banned.end(); ++k) {
    t = next_token(ctx, seed, step + (k << 40));
  }
  return t;
}

class FakeExecutor {
 public:
  FakeExecutor(int32_t num_blocks, int32_t block_size) : kv_(num_blocks, block_size) {}

  StepResult run(const StepPlan& plan) {
    kv_.write(plan);
    StepResult r;
    r.step_id = plan.step_id;
    for (const PlanSample& s : plan.samples) {
      SampleOutput o;
      o.seq = s.seq;
      o.token = draw(kv_.context(plan, s), s.params.seed, s.params.step, s.banned);
      r.samples.push_back(o);
    }
    kv_.record(plan, r);
    return r;
  }

 private:
  test::FakeKvCache kv_;
};

// The tokens banned while the output is shorter than min_tokens.
std::vector<TokenId> banned_before_min(const SamplingOptions& o, size_t out_len) {
  std::vector<TokenId> b;
  if (int32_t(out_len) >= o.min_tokens) return b;
  b = o.stop_token_ids;
  if (!o.ignore_eos) b.push_back(kEos);
  return b;
}

// The expected output of one sample, without a scheduler.
std::vector<TokenId> reference(std::vector<TokenId> tokens, const SamplingOptions& o, int32_t index,
                               int32_t max_model_len) {
  const size_t prompt_len = tokens.size();
  std::vector<TokenId> out;
  for (;;) {
    const TokenId t = draw(tokens, o.seed_for(index), out.size(), banned_before_min(o, out.size()));
    tokens.push_back(t);
    out.push_back(t);
    const bool stop_id = std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), t) !=
                         o.stop_token_ids.end();
    const bool stop = int32_t(out.size()) >= o.min_tokens && ((!o.ignore_eos && t == kEos) || stop_id);
    if (stop || int32_t(out.size()) >= o.max_tokens || tokens.size() >= size_t(max_model_len)) break;
  }
  (void)prompt_len;
  return out;
}

struct Harness {
  SchedulerConfig cfg;
  int32_t num_blocks, block_size;
  std::unique_ptr<SchedulerCore> core;
  std::unique_ptr<FakeExecutor> exec;
  std::map<std::pair<RequestId, int32_t>, std::vector<TokenId>> out;
  std::map<std::pair<RequestId, int32_t>, FinishReason> finish;
  std::map<RequestId, int> done;
  int32_t max_seqs_seen = 0, steps = 0, mixed_steps = 0;
  std::deque<StepPlan> queued;  // planned, not yet run

  Harness(int32_t blocks, int32_t bs, int32_t max_seqs, int32_t max_tokens, bool caching = true,
          SchedulingPolicy policy = SchedulingPolicy::fcfs)
      : num_blocks(blocks), block_size(bs) {
    cfg.policy = policy;
    cfg.max_num_seqs = max_seqs;
    cfg.max_num_batched_tokens = max_tokens;
    cfg.max_in_flight = pagoda::test::async_scheduling_under_test() ? 2 : 1;
    cfg.max_model_len = 512;
    cfg.eos_token_ids = {kEos};
    BlockManagerConfig bc;
    bc.num_blocks = blocks;
    bc.block_size = bs;
    bc.enable_prefix_caching = caching;
    core = std::make_unique<SchedulerCore>(cfg, BlockManager::create(bc).value());
    exec = std::make_unique<FakeExecutor>(blocks, bs);
  }

  std::vector<TokenId> got(RequestId r, int32_t i) { return out[std::make_pair(r, i)]; }
  FinishReason fin(RequestId r, int32_t i) { return finish[std::make_pair(r, i)]; }

  void collect() {
    for (SeqEvent& e : core->take_events()) {
      if (e.group_done) {
        ++done[e.request];
        continue;
      }
      if (e.has_token) out[{e.request, e.index}].push_back(e.sample.token);
      if (e.finish != FinishReason::none) finish[{e.request, e.index}] = e.finish;
    }
  }

  // One step with the budget checks; false when nothing could be planned.
  // Scheduling ahead, up to max_in_flight plans are planned before the
  // oldest runs and is applied (the engine's pipeline, in one thread).
  bool step() {
    while (int32_t(queued.size()) < cfg.max_in_flight) {
      StepPlan plan = core->schedule();
      collect();
      if (plan.empty()) break;
      EXPECT_LE(plan.num_tokens(), cfg.max_num_batched_tokens);
      EXPECT_LE(int32_t(plan.entries.size()), cfg.max_num_seqs);
      queued.push_back(std::move(plan));
    }
    if (queued.empty()) return false;
    StepPlan plan = std::move(queued.front());
    queued.pop_front();
    max_seqs_seen = std::max(max_seqs_seen, core->stats().running_seqs);
    bool chunk = false, decode = false;
    for (const PlanEntry& e : plan.entries) (e.num_new() > 1 ? chunk : decode) = true;
    mixed_steps += chunk && decode;
    ++steps;
    EXPECT_TRUE(core->apply(exec->run(plan)).ok());
    auto inv = core->block_manager().check_invariants();
    EXPECT_TRUE(inv.ok()) << (inv.ok() ? "" : inv.error().message);
    collect();
    return true;
  }

  void run_all() {
    for (int guard = 0; core->has_unfinished() && guard < 100000; ++guard) {
      // An empty plan is fine when it ended the last groups (admission
      // refused them); with work left it is a stall.
      if (!step() && core->has_unfinished()) {
        ADD_FAILURE() << "scheduler stalled with unfinished requests";
        return;
      }
    }
  }

  void expect_all_blocks_back() {
    const BlockManager& bm = core->block_manager();
    EXPECT_EQ(bm.num_seqs(), 0);
    EXPECT_EQ(bm.num_free_blocks() + bm.num_cached_blocks(), bm.total_blocks());
  }
};

std::vector<TokenId> make_prompt(std::mt19937& rng, int32_t len) {
  std::vector<TokenId> p(static_cast<size_t>(len));
  for (TokenId& t : p) t = 1 + TokenId(rng() % (kVocab - 1));
  return p;
}

SamplingOptions opts(uint64_t seed, int32_t max_tokens, int32_t n = 1) {
  SamplingOptions o;
  o.seed = seed;
  o.max_tokens = max_tokens;
  o.n = n;
  return o;
}

// Submits `count` requests of random prompt lengths, runs them all, and
// compares every sample with the reference.
void run_mix(Harness& h, int count, int32_t max_prompt, int32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<std::vector<TokenId>, SamplingOptions>> reqs;
  for (int r = 0; r < count; ++r) {
    auto p = make_prompt(rng, 1 + int32_t(rng() % uint32_t(max_prompt)));
    SamplingOptions o = opts(1000 + uint64_t(r), 5 + int32_t(rng() % 30), n);
    ASSERT_TRUE(h.core->add_group(RequestId(r), p, o).ok());
    reqs.push_back({p, o});
  }
  h.run_all();
  for (int r = 0; r < count; ++r) {
    EXPECT_EQ(h.done[RequestId(r)], 1) << "request " << r;
    for (int32_t i = 0; i < n; ++i) {
      EXPECT_EQ(h.got(RequestId(r), i), reference(reqs[size_t(r)].first, reqs[size_t(r)].second, i,
                                                    h.cfg.max_model_len))
          << "request " << r << " sample " << i;
    }
  }
  h.expect_all_blocks_back();
}

TEST(SchedulerCore, SingleRequestMatchesReference) {
  Harness h(64, 4, 8, 64);
  run_mix(h, 1, 20, 1, 1);
}

TEST(SchedulerCore, ManyRequestsUnderBudgetsMatchReference) {
  Harness h(256, 4, 6, 32);
  run_mix(h, 24, 60, 1, 2);
  EXPECT_LE(h.max_seqs_seen, 6);
  EXPECT_GT(h.mixed_steps, 0) << "chunked prefills never shared a step with decodes";
  EXPECT_EQ(h.core->stats().preemptions, 0u);
}

TEST(SchedulerCore, ChunkedPrefillSplitsALongPrompt) {
  Harness h(128, 4, 4, 16);
  std::mt19937 rng(3);
  auto p = make_prompt(rng, 100);
  SamplingOptions o = opts(5, 8);
  o.ignore_eos = true;  // exactly 8 tokens
  ASSERT_TRUE(h.core->add_group(7, p, o).ok());
  StepPlan first = h.core->schedule();
  ASSERT_EQ(first.entries.size(), 1u);
  EXPECT_EQ(first.entries[0].tokens.size(), 16u);
  EXPECT_TRUE(first.samples.empty()) << "sampled before the prompt was complete";
  ASSERT_TRUE(h.core->apply(h.exec->run(first)).ok());
  h.run_all();
  EXPECT_EQ(h.steps, 6 + 7);  // 6 more chunks (100 = 6*16 + 4; the last samples), 7 decodes
  EXPECT_EQ(h.got(7, 0), reference(p, o, 0, 512));
  h.expect_all_blocks_back();
}

TEST(SchedulerCore, PreemptionRecomputesToTheSameOutputs) {
  Harness h(40, 4, 16, 64, /*caching=*/false);
  run_mix(h, 16, 30, 1, 4);
  EXPECT_GT(h.core->stats().preemptions, 0u) << "the test did not force preemption";
}

TEST(SchedulerCore, PreemptionWithPrefixCachingRecomputesToTheSameOutputs) {
  Harness h(40, 4, 16, 64);
  run_mix(h, 16, 30, 1, 5);
  EXPECT_GT(h.core->stats().preemptions, 0u);
}

TEST(SchedulerCore, ParallelSamplingSharesThePromptAndMatchesReference) {
  Harness h(256, 4, 16, 64);
  run_mix(h, 6, 30, 3, 6);
}

TEST(SchedulerCore, ParallelSamplingSurvivesPreemption) {
  Harness h(48, 4, 16, 64);
  run_mix(h, 8, 20, 3, 7);
  EXPECT_GT(h.core->stats().preemptions, 0u);
}

TEST(SchedulerCore, SamePromptTwiceHitsThePrefixCache) {
  Harness h(128, 4, 8, 64);
  std::mt19937 rng(8);
  auto p = make_prompt(rng, 30);
  ASSERT_TRUE(h.core->add_group(1, p, opts(9, 10)).ok());
  h.run_all();
  ASSERT_TRUE(h.core->add_group(2, p, opts(9, 10)).ok());
  h.run_all();
  EXPECT_GE(h.core->stats().prefix.hit_tokens, 28u);
  EXPECT_EQ(h.got(1, 0), h.got(2, 0));
  EXPECT_EQ(h.got(2, 0), reference(p, opts(9, 10), 0, 512));
  h.expect_all_blocks_back();
}

TEST(SchedulerCore, AdmissionRespectsMaxNumSeqs) {
  Harness h(256, 4, 2, 64);
  run_mix(h, 6, 10, 1, 9);
  EXPECT_EQ(h.max_seqs_seen, 2);
}

TEST(SchedulerCore, CancelAtRandomPointsReturnsEveryBlock) {
  Harness h(60, 4, 8, 24);
  std::mt19937 rng(10);
  for (int r = 0; r < 20; ++r) {
    ASSERT_TRUE(h.core->add_group(RequestId(r), make_prompt(rng, 1 + int32_t(rng() % 40)),
                                  opts(uint64_t(r), 40, 1 + r % 3)).ok());
  }
  for (int guard = 0; h.core->has_unfinished() && guard < 10000; ++guard) {
    StepPlan plan = h.core->schedule();
    h.collect();
    if (rng() % 3 == 0) h.core->cancel_group(RequestId(rng() % 20));  // in flight or not
    if (rng() % 5 == 0) h.core->finish_sequence(RequestId(rng() % 20), int32_t(rng() % 3), FinishReason::stop);
    if (plan.empty()) continue;
    ASSERT_TRUE(h.core->apply(h.exec->run(plan)).ok());
    ASSERT_TRUE(h.core->block_manager().check_invariants().ok());
    h.collect();
  }
  EXPECT_FALSE(h.core->has_unfinished());
  for (int r = 0; r < 20; ++r) EXPECT_EQ(h.done[RequestId(r)], 1) << r;
  h.expect_all_blocks_back();
}

TEST(SchedulerCore, FinishRules) {
  Harness h(64, 4, 8, 64);
  SamplingOptions o = opts(1, 50);
  o.ignore_eos = true;
  o.stop_token_ids = {};
  ASSERT_TRUE(h.core->add_group(1, {5, 6, 7}, o).ok());
  h.run_all();
  EXPECT_EQ(h.got(1, 0).size(), 50u);
  EXPECT_EQ(h.fin(1, 0), FinishReason::length);
  // A stop token id ends the sample (kept in the output); before min_tokens
  // it is banned from sampling (the plan carries it), so it cannot appear.
  const std::vector<TokenId> plain = reference({5, 6, 7}, o, 0, 512);
  const TokenId first = plain[2];
  SamplingOptions s = opts(1, 50);
  s.ignore_eos = true;
  s.stop_token_ids = {first};
  s.min_tokens = 3;
  const std::vector<TokenId> want = reference({5, 6, 7}, s, 0, 512);
  ASSERT_NE(std::vector<TokenId>(want.begin(), want.begin() + 3),
            std::vector<TokenId>(plain.begin(), plain.begin() + 3))
      << "the ban must change the third token";
  ASSERT_TRUE(h.core->add_group(2, {5, 6, 7}, s).ok());
  h.run_all();
  EXPECT_EQ(h.got(2, 0), want);
  for (size_t i = 0; i < 3 && i < h.got(2, 0).size(); ++i) EXPECT_NE(h.got(2, 0)[i], first);
  if (h.fin(2, 0) == FinishReason::stop) {
    EXPECT_EQ(h.got(2, 0).back(), first);
  }
  h.expect_all_blocks_back();
}

TEST(SchedulerCore, APromptLargerThanTheCacheFailsAsError) {
  Harness h(8, 4, 8, 64);
  ASSERT_TRUE(h.core->add_group(1, std::vector<TokenId>(40, 3), opts(1, 4)).ok());
  EXPECT_TRUE(h.core->schedule().empty());
  h.collect();
  EXPECT_EQ(h.fin(1, 0), FinishReason::error);
  EXPECT_EQ(h.done[1], 1);
  EXPECT_FALSE(h.core->has_unfinished());
}

TEST(SchedulerCore, RejectsBadGroups) {
  Harness h(8, 4, 8, 64);
  EXPECT_FALSE(h.core->add_group(1, {}, opts(1, 4)).ok());
  SamplingOptions no_seed;
  EXPECT_FALSE(h.core->add_group(2, {1}, no_seed).ok());
  EXPECT_FALSE(h.core->add_group(3, std::vector<TokenId>(600, 1), opts(1, 4)).ok());
  ASSERT_TRUE(h.core->add_group(4, {1}, opts(1, 4)).ok());
  EXPECT_FALSE(h.core->add_group(4, {1}, opts(1, 4)).ok());
}

// KV utilisation against hand-computed fills (block_size 16, a 20-token
// prompt): paged n = 2 shares the prompt blocks (counted once), then the first
// decode copies the shared partial block; contiguous reserves 64 / 16 blocks.
TEST(SchedulerCore, KvUtilisationCountsDistinctStoredTokens) {
  std::mt19937 rng(3);
  const std::vector<TokenId> prompt = make_prompt(rng, 20);
  for (KvLayout layout : {KvLayout::paged, KvLayout::contiguous}) {
    SchedulerConfig cfg;
    cfg.max_model_len = 64;
    BlockManagerConfig bc;
    bc.num_blocks = 32;
    bc.block_size = 16;
    bc.layout = layout;
    bc.max_model_len = 64;
    SchedulerCore core(cfg, BlockManager::create(bc).value());
    FakeExecutor exec(32, 16);
    EXPECT_EQ(core.kv_utilisation(), 0.0);
    ASSERT_TRUE(core.add_group(1, prompt, opts(7, 8, 2)).ok());
    StepPlan plan = core.schedule();
    ASSERT_EQ(plan.num_tokens(), 20);
    const bool paged = layout == KvLayout::paged;
    // paged: 20 tokens in 2 shared blocks; contiguous: 2 x 20 tokens in 2 x 4 blocks.
    EXPECT_DOUBLE_EQ(core.kv_utilisation(), paged ? 20.0 / 32.0 : 40.0 / 128.0);
    ASSERT_TRUE(core.apply(exec.run(plan)).ok());
    plan = core.schedule();
    ASSERT_EQ(plan.num_tokens(), 2);
    // paged: 16 shared + 5 + 5 (the copied partial block) in 3 blocks.
    EXPECT_DOUBLE_EQ(core.kv_utilisation(), paged ? 26.0 / 48.0 : 42.0 / 128.0);
    ASSERT_TRUE(core.apply(exec.run(plan)).ok());
  }
}

// A group that outgrows the whole pool: preempted, it can never be
// re-admitted (all its sequences together need more blocks than exist). It
// must end (error), not wait forever, and give every block back.
TEST(SchedulerCore, AGroupThatOutgrowsThePoolEnds) {
  Harness h(91, 16, 16, 256);
  SamplingOptions o = opts(3, 200, 8);
  o.ignore_eos = true;
  ASSERT_TRUE(h.core->add_group(1, {5, 6, 7, 8, 9, 10}, o).ok());
  h.run_all();  // fails on a step that plans nothing while work is left
  EXPECT_EQ(h.done[1], 1);
  EXPECT_FALSE(h.core->has_unfinished());
  EXPECT_GE(h.core->stats().preemptions, 1u);
  for (int32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(h.fin(1, i), FinishReason::length) << "sample " << i;
    EXPECT_LT(h.got(1, i).size(), 200u);
  }
  h.expect_all_blocks_back();
}

// The fair and priority policies reorder admissions and (priority) preempt
// on their own; every output must still equal the reference, and every block
// come back. Requests carry three clients and random priorities.
TEST(SchedulerCore, PoliciesRecomputeToTheSameOutputs) {
  for (SchedulingPolicy policy : {SchedulingPolicy::fair, SchedulingPolicy::priority}) {
    Harness h(40, 4, 16, 64, /*caching=*/true, policy);
    std::mt19937 rng(11);
    std::vector<std::pair<std::vector<TokenId>, SamplingOptions>> reqs;
    for (int r = 0; r < 16; ++r) {
      auto p = make_prompt(rng, 1 + int32_t(rng() % 30));
      SamplingOptions o = opts(2000 + uint64_t(r), 5 + int32_t(rng() % 30), 1 + r % 2);
      o.client = "c" + std::to_string(rng() % 3);
      o.priority = int32_t(rng() % 4);
      ASSERT_TRUE(h.core->add_group(RequestId(r), p, o).ok());
      reqs.push_back({p, o});
      if (r % 4 == 3) h.step();  // later arrivals meet running groups
    }
    h.run_all();
    for (int r = 0; r < 16; ++r) {
      EXPECT_EQ(h.done[RequestId(r)], 1) << r;
      for (int32_t i = 0; i < reqs[size_t(r)].second.n; ++i) {
        EXPECT_EQ(h.got(RequestId(r), i), reference(reqs[size_t(r)].first, reqs[size_t(r)].second, i, 512))
            << "policy " << scheduling_policy_name(policy) << " request " << r << " sample " << i;
      }
    }
    EXPECT_GT(h.core->stats().preemptions, 0u) << "the pool was meant to force preemption";
    h.expect_all_blocks_back();
  }
}

}  // namespace
}  // namespace pagoda::actors
