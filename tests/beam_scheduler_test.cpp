// SchedulerCore with beam groups (actors/scheduler_core_beam.cpp) and a fake
// executor that simulates the paged KV cache: it writes each planned token
// into its slot (after the plan's copies) and answers each row with the toy
// model's best tokens for the context READ BACK through the block table. The
// reference is BeamSearch run directly on the true token sequences, so a
// wrong fork, a missed copy-on-write, a block freed too early or a lost
// recompute changes a beam. Also: beams share the prompt's blocks, count
// toward max_num_seqs, and every block returns after cancels at random points.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include "actors/beam_search.hpp"
#include "actors/scheduler_core.hpp"
#include "beam_toy_model.hpp"
#include "fake_kv_cache.hpp"
#include "scheduling_mode.hpp"

namespace pagoda::actors {
namespace {

using beam_test::kSmallVocab;
using beam_test::toy_top;

constexpr TokenId kEos = 2;

// Writes every planned token into its slot (after the plan's copies) and
// answers each sample from the context READ BACK through the block table.
class FakeExecutor {
 public:
  FakeExecutor(int32_t num_blocks, int32_t block_size, uint64_t salt)
      : salt_(salt), kv_(num_blocks, block_size) {}

  StepResult run(const StepPlan& plan) {
    kv_.write(plan);
    StepResult r;
    r.step_id = plan.step_id;
    for (const PlanSample& s : plan.samples) {
      const std::vector<TokenId> ctx = kv_.context(plan, s);
      std::vector<BeamToken> top = toy_top(ctx, salt_, std::max(1, s.params.num_top_logprobs));
      SampleOutput o;
      o.seq = s.seq;
      o.token = top[0].token;  // every row of these tests is greedy
      o.logprob = top[0].logprob;
      for (int32_t i = 0; i < s.params.num_top_logprobs; ++i) {
        o.top_tokens.push_back(top[size_t(i)].token);
        o.top_logprobs.push_back(top[size_t(i)].logprob);
      }
      r.samples.push_back(std::move(o));
    }
    kv_.record(plan, r);
    return r;
  }

 private:
  uint64_t salt_;
  test::FakeKvCache kv_;
};

constexpr int32_t kMaxModelLen = 128;

SamplingOptions beam_options(int32_t k, float lp, bool es, int32_t max_tokens) {
  SamplingOptions o;
  o.seed = 1;
  o.beam_width = k;
  o.n = k;
  o.length_penalty = lp;
  o.early_stopping = es;
  o.max_tokens = max_tokens;
  return o;
}

// The expected finished beams: BeamSearch run directly on the true contexts.
std::vector<BeamResult> direct_search(const std::vector<TokenId>& prompt, const SamplingOptions& o,
                                      uint64_t salt) {
  BeamConfig c;
  c.beam_width = o.beam_width;
  c.length_penalty = o.length_penalty;
  c.early_stopping = o.early_stopping;
  c.max_new_tokens = std::min(o.max_tokens, kMaxModelLen - int32_t(prompt.size()));
  c.stop_tokens = {kEos};
  const int32_t n = BeamSearch::candidates_per_beam(c);
  BeamSearch b(c);
  while (!b.done()) {
    std::vector<std::vector<BeamToken>> cs;
    for (const LiveBeam& l : b.live()) {
      std::vector<TokenId> ctx = prompt;
      ctx.insert(ctx.end(), l.tokens.begin(), l.tokens.end());
      cs.push_back(toy_top(ctx, salt, n));
    }
    EXPECT_TRUE(b.step(cs).ok());
  }
  return b.finished();
}

struct BeamHarness {
  std::unique_ptr<SchedulerCore> core;
  std::unique_ptr<FakeExecutor> exec;
  std::map<RequestId, std::vector<BeamResult>> final_beams;
  std::map<RequestId, std::vector<TokenId>> greedy_out;
  std::map<RequestId, int> done, updates;
  int32_t peak_used = 0;
  int32_t max_in_flight = 1;
  std::deque<StepPlan> queued;  // planned, not yet run

  BeamHarness(int32_t blocks, int32_t bs, int32_t max_seqs, int32_t budget, uint64_t salt,
              bool caching = true, KvLayout layout = KvLayout::paged) {
    SchedulerConfig cfg;
    cfg.max_num_seqs = max_seqs;
    cfg.max_num_batched_tokens = budget;
    cfg.max_model_len = kMaxModelLen;
    cfg.eos_token_ids = {kEos};
    cfg.max_in_flight = max_in_flight = pagoda::test::async_scheduling_under_test() ? 2 : 1;
    BlockManagerConfig bc;
    bc.num_blocks = blocks;
    bc.block_size = bs;
    bc.enable_prefix_caching = caching;
    bc.layout = layout;
    bc.max_model_len = kMaxModelLen;
    core = std::make_unique<SchedulerCore>(cfg, BlockManager::create(bc).value());
    exec = std::make_unique<FakeExecutor>(blocks, bs, salt);
  }

  void collect() {
    for (SeqEvent& e : core->take_events()) {
      if (e.group_done) ++done[e.request];
      if (e.beam) ++updates[e.request];
      if (e.beam_final) final_beams[e.request] = e.beams;
      if (!e.beam && e.has_token) greedy_out[e.request].push_back(e.sample.token);
    }
  }

  // Scheduling ahead: up to max_in_flight plans are planned before the
  // oldest runs (beam groups themselves stay lockstep).
  bool step() {
    while (int32_t(queued.size()) < max_in_flight) {
      StepPlan plan = core->schedule();
      collect();
      if (plan.empty()) break;
      queued.push_back(std::move(plan));
    }
    if (queued.empty()) return false;
    StepPlan plan = std::move(queued.front());
    queued.pop_front();
    EXPECT_TRUE(core->apply(exec->run(plan)).ok());
    auto inv = core->block_manager().check_invariants();
    EXPECT_TRUE(inv.ok()) << (inv.ok() ? "" : inv.error().message);
    peak_used = std::max(peak_used, core->block_manager().num_used_blocks());
    collect();
    return true;
  }

  void run_all() {
    for (int guard = 0; core->has_unfinished() && guard < 100000; ++guard) {
      if (!step()) {
        ADD_FAILURE() << "scheduler stalled";
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

std::vector<TokenId> toy_prompt(std::mt19937& rng, int32_t len) {
  std::vector<TokenId> p(size_t(len), 0);
  for (TokenId& t : p) t = TokenId(3 + rng() % (kSmallVocab - 3));
  return p;
}

void expect_same(const std::vector<BeamResult>& got, const std::vector<BeamResult>& want,
                 RequestId r) {
  ASSERT_EQ(got.size(), want.size()) << "request " << r;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << r << " beam " << i;
    EXPECT_NEAR(got[i].score, want[i].score, 1e-9);
    EXPECT_EQ(got[i].finish, want[i].finish);
  }
}

// Beam groups of every width among greedy requests: each equals the direct
// search; the plain requests their greedy chains.
void run_beam_mix(BeamHarness& h, int count, uint64_t salt, uint32_t seed) {
  std::mt19937 rng(seed);
  std::map<RequestId, std::pair<std::vector<TokenId>, SamplingOptions>> reqs;
  for (int r = 0; r < count; ++r) {
    auto p = toy_prompt(rng, 1 + int32_t(rng() % 40));
    SamplingOptions o = beam_options(1 + int32_t(rng() % 4), (rng() % 2) ? 1.0f : 0.5f,
                                     rng() % 3 != 0, 3 + int32_t(rng() % 14));
    if (r % 4 == 3) {  // a plain greedy request
      o = SamplingOptions{};
      o.seed = 1;
      o.temperature = 0.0f;
      o.max_tokens = 10;
      o.ignore_eos = true;
    }
    ASSERT_TRUE(h.core->add_group(RequestId(r), p, o).ok());
    reqs[RequestId(r)] = {p, o};
  }
  h.run_all();
  for (auto& [r, req] : reqs) {
    EXPECT_EQ(h.done[r], 1) << "request " << r;
    if (req.second.beam_width == 0) {
      std::vector<TokenId> ctx = req.first, want;
      for (int i = 0; i < 10; ++i) {
        want.push_back(toy_top(ctx, salt, 1)[0].token);
        ctx.push_back(want.back());
      }
      EXPECT_EQ(h.greedy_out[r], want) << "request " << r;
      continue;
    }
    EXPECT_GE(h.updates[r], 1);
    expect_same(h.final_beams[r], direct_search(req.first, req.second, salt), r);
  }
  h.expect_all_blocks_back();
}

TEST(SchedulerBeams, BeamGroupsMatchTheDirectSearch) {
  BeamHarness h(256, 4, 32, 64, 99);
  run_beam_mix(h, 12, 99, 1);
  EXPECT_EQ(h.core->stats().preemptions, 0u);
}

TEST(SchedulerBeams, PreemptionAndChunkingRecomputeToTheSameBeams) {
  for (bool caching : {true, false}) {
    BeamHarness h(24, 4, 12, 16, 5, caching);
    run_beam_mix(h, 10, 5, 2);
    EXPECT_GT(h.core->stats().preemptions, 0u) << "the budget did not force preemption";
  }
}

TEST(SchedulerBeams, ContiguousLayoutForksWithCopies) {
  BeamHarness h(4 * 32 * 2, 4, 8, 64, 17, false, KvLayout::contiguous);
  run_beam_mix(h, 4, 17, 3);
}

// A 64-token prompt (16 blocks of 4) and 4 beams of 8 new tokens: the prompt
// is held once; each beam adds at most its own 3 blocks (2 full + a copy).
TEST(SchedulerBeams, BeamsShareThePromptBlocks) {
  BeamHarness h(256, 4, 8, 256, 23);
  std::mt19937 rng(4);
  SamplingOptions o = beam_options(4, 1.0f, true, 8);
  o.ignore_eos = true;
  ASSERT_TRUE(h.core->add_group(1, toy_prompt(rng, 64), o).ok());
  h.run_all();
  EXPECT_EQ(h.done[1], 1);
  EXPECT_GT(h.peak_used, 16);
  EXPECT_LE(h.peak_used, 16 + 4 * 3);
  EXPECT_EQ(h.core->stats().running_seqs, 0);
  h.expect_all_blocks_back();
}

TEST(SchedulerBeams, BeamsCountTowardMaxNumSeqs) {
  BeamHarness h(256, 4, 4, 256, 29);
  std::mt19937 rng(6);
  SamplingOptions o = beam_options(3, 1.0f, true, 6);
  ASSERT_TRUE(h.core->add_group(1, toy_prompt(rng, 8), o).ok());
  ASSERT_TRUE(h.core->add_group(2, toy_prompt(rng, 8), o).ok());
  ASSERT_TRUE(h.step());
  EXPECT_EQ(h.core->stats().running_groups, 1);  // 3 + 3 > 4
  EXPECT_EQ(h.core->stats().running_seqs, 3);
  h.run_all();
  EXPECT_EQ(h.done[2], 1);
  h.expect_all_blocks_back();
}

TEST(SchedulerBeams, CancelAtRandomPointsReturnsEveryBlock) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    BeamHarness h(48, 4, 16, 24, seed);
    std::mt19937 rng(seed);
    for (RequestId r = 0; r < 6; ++r) {
      SamplingOptions o = beam_options(1 + int32_t(rng() % 4), 1.0f, rng() % 2, 5 + int32_t(rng() % 10));
      ASSERT_TRUE(h.core->add_group(r, toy_prompt(rng, 1 + int32_t(rng() % 30)), o).ok());
    }
    for (int guard = 0; h.core->has_unfinished() && guard < 10000; ++guard) {
      StepPlan plan = h.core->schedule();
      h.collect();
      if (rng() % 3 == 0) h.core->cancel_group(RequestId(rng() % 6));  // in flight: marked
      if (plan.empty()) break;
      ASSERT_TRUE(h.core->apply(h.exec->run(plan)).ok());
      ASSERT_TRUE(h.core->block_manager().check_invariants().ok());
      if (rng() % 4 == 0) h.core->cancel_group(RequestId(rng() % 6));  // between steps
      h.collect();
    }
    EXPECT_FALSE(h.core->has_unfinished());
    for (RequestId r = 0; r < 6; ++r) EXPECT_EQ(h.done[r], 1) << "seed " << seed << " request " << r;
    h.expect_all_blocks_back();
  }
}


}  // namespace
}  // namespace pagoda::actors
