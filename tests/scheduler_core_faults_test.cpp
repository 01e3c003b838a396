// SchedulerCore under faults, with a fake executor that tracks which
// sequences the real executor would hold (its SeqMirror, as sets): a plan
// that runs applies its pre-forks, releases, fresh entries and forks; a plan
// that fails applies only its releases (Executor::discard). Every later plan
// must name only sequences the executor holds (else the real executor
// answers "sequence N is unknown"). Checked: a failed step whose plan
// carried a beam group's forks without entries of that group (the group is
// preempted); a row that fails alone ends only its group; reset_actors()
// (supervision) ends the steps in flight and leaves no block held.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "actors/scheduler_core.hpp"

namespace pagoda::actors {
namespace {

struct MirrorSet {
  std::set<SeqId> held;
  // Returns the first sequence the plan names that the executor lacks (0: none).
  SeqId missing(const StepPlan& plan) const {
    std::set<SeqId> h = held;
    for (const SeqForkOp& f : plan.pre_forks) {
      if (!h.contains(f.parent)) return f.parent;
      h.insert(f.child);
    }
    for (SeqId s : plan.releases) h.erase(s);
    for (const PlanEntry& e : plan.entries) {
      if (!e.fresh && !h.contains(e.seq)) return e.seq;
    }
    return 0;
  }
  void run(const StepPlan& plan) {
    for (const SeqForkOp& f : plan.pre_forks) held.insert(f.child);
    for (SeqId s : plan.releases) held.erase(s);
    for (const PlanEntry& e : plan.entries) held.insert(e.seq);
    for (const SeqForkOp& f : plan.forks) held.insert(f.child);
  }
  void discard(const StepPlan& plan) {
    for (SeqId s : plan.releases) held.erase(s);
  }
};

// A result for every sample: a fixed non-EOS token and four candidates.
StepResult fake_result(const StepPlan& plan) {
  StepResult r;
  r.step_id = plan.step_id;
  for (const PlanSample& s : plan.samples) {
    SampleOutput o;
    o.seq = s.seq;
    o.token = 7 + int32_t(s.seq % 5);
    o.logprob = -0.5f;
    o.top_tokens = {3, 4, 5, 6};
    o.top_logprobs = {-0.1f, -0.2f, -0.3f, -0.4f};
    r.samples.push_back(o);
  }
  return r;
}

std::unique_ptr<SchedulerCore> make_core(int32_t budget) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 16;
  cfg.max_num_batched_tokens = budget;
  cfg.max_model_len = 128;
  cfg.max_in_flight = 1;
  BlockManagerConfig bc;
  bc.num_blocks = 96;
  bc.block_size = 4;
  return std::make_unique<SchedulerCore>(cfg, BlockManager::create(bc).value());
}

SamplingOptions sampling(int32_t n, int32_t beams, int32_t max_tokens) {
  SamplingOptions o;
  o.seed = 1;
  o.n = n;
  o.beam_width = beams;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  return o;
}

std::vector<TokenId> prompt(int32_t len, int32_t salt) {
  std::vector<TokenId> p;
  for (int32_t i = 0; i < len; ++i) p.push_back(10 + (i * 7 + salt) % 40);
  return p;
}

struct Ends {
  std::map<RequestId, FinishReason> finish;  // the last finish seen per group
  std::set<RequestId> done;
  void take(SchedulerCore& core) {
    for (const SeqEvent& e : core.take_events()) {
      if (e.finish != FinishReason::none) finish[e.request] = e.finish;
      if (e.group_done) done.insert(e.request);
    }
  }
};

void expect_pool_back(const SchedulerCore& core) {
  const SchedulerStats s = core.stats();
  EXPECT_EQ(s.used_blocks, 0);
  EXPECT_EQ(s.free_blocks + s.cached_blocks, s.total_blocks);
}

// Runs plans to the end with the mirror check on each.
void run_to_end(SchedulerCore& core, MirrorSet& mirror, Ends& ends) {
  for (int step = 0; step < 200 && core.has_unfinished(); ++step) {
    StepPlan plan = core.schedule();
    ends.take(core);
    if (plan.empty()) continue;
    ASSERT_EQ(mirror.missing(plan), SeqId(0)) << "step " << plan.step_id << " names a sequence the executor lacks";
    mirror.run(plan);
    ASSERT_TRUE(core.apply(fake_result(plan)).ok());
    ends.take(core);
  }
  EXPECT_FALSE(core.has_unfinished());
}

// A (n = 8) fills the budget of 8 with its decodes once G (beam width 2) has
// forked its beams: the plan after G's fork carries G's fork (kept from the
// empty plan that booked it) but no entry of G. That plan fails: A ends
// with error, G is preempted and recomputed (never planned on a fork the
// executor did not make), and finishes; every block returns.
TEST(SchedulerCoreFaults, AFailedPlanCarryingForksPreemptsTheirGroup) {
  auto core = make_core(8);
  MirrorSet mirror;
  Ends ends;
  ASSERT_TRUE(core->add_group(1, prompt(10, 1), sampling(8, 0, 20)).ok());
  ASSERT_TRUE(core->add_group(2, prompt(6, 2), sampling(2, 2, 6)).ok());
  bool failed_one = false;
  for (int step = 0; step < 20 && !failed_one; ++step) {
    StepPlan plan = core->schedule();
    ends.take(*core);
    ASSERT_FALSE(plan.empty());
    ASSERT_EQ(mirror.missing(plan), SeqId(0));
    const bool forks_only = !plan.pre_forks.empty() &&
                            std::none_of(plan.entries.begin(), plan.entries.end(), [&](const PlanEntry& e) {
                              for (const SeqForkOp& f : plan.pre_forks) {
                                if (f.child == e.seq || f.parent == e.seq) return true;
                              }
                              return false;
                            });
    if (forks_only) {
      const uint64_t preempted = core->stats().preemptions;
      core->fail_step(plan.step_id, "boom");
      mirror.discard(plan);
      ends.take(*core);
      EXPECT_EQ(core->stats().preemptions, preempted + 1);  // G
      failed_one = true;
      break;
    }
    mirror.run(plan);
    ASSERT_TRUE(core->apply(fake_result(plan)).ok());
    ends.take(*core);
  }
  ASSERT_TRUE(failed_one) << "no plan carried forks without their group's entries";
  EXPECT_EQ(ends.finish[1], FinishReason::error);
  run_to_end(*core, mirror, ends);
  EXPECT_TRUE(ends.done.contains(2));
  EXPECT_NE(ends.finish[2], FinishReason::error);
  expect_pool_back(*core);
}

// A row that failed alone (StepResult::errors) ends its own group with
// error; the other group in the step takes its token and finishes.
TEST(SchedulerCoreFaults, ARowErrorEndsOnlyItsGroup) {
  auto core = make_core(64);
  MirrorSet mirror;
  Ends ends;
  ASSERT_TRUE(core->add_group(1, prompt(9, 1), sampling(1, 0, 6)).ok());
  ASSERT_TRUE(core->add_group(2, prompt(7, 2), sampling(2, 0, 6)).ok());
  StepPlan first = core->schedule();
  ASSERT_EQ(first.samples.size(), 3u);  // 1 + the 2 samples of group 2 (forked)
  mirror.run(first);
  StepResult r = fake_result(first);
  SeqId bad = 0;
  for (size_t i = 0; i < first.samples.size(); ++i) {
    if (first.entries[size_t(first.samples[i].entry)].seq != first.entries[0].seq) {
      bad = r.samples[i].seq;  // a sample of group 2
      r.samples[i].token = -1;
      break;
    }
  }
  ASSERT_NE(bad, SeqId(0));
  r.errors.push_back({bad, "executor: sequence has non-finite logits"});
  ASSERT_TRUE(core->apply(r).ok());
  ends.take(*core);
  EXPECT_EQ(ends.finish[2], FinishReason::error);
  EXPECT_TRUE(ends.done.contains(2));
  EXPECT_FALSE(ends.done.contains(1));
  run_to_end(*core, mirror, ends);
  EXPECT_EQ(ends.finish[1], FinishReason::length);
  expect_pool_back(*core);
}

// Supervision: with a step in flight (and one ahead), reset_actors() ends
// the groups in flight with error, preempts the others, and the pool reads
// empty; a fresh core state then serves the waiting group.
TEST(SchedulerCoreFaults, ResetActorsEndsWhatIsInFlightAndHoldsNoBlock) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 2;
  cfg.max_num_batched_tokens = 64;
  cfg.max_model_len = 128;
  cfg.max_in_flight = 2;
  SchedulerCore core(cfg);  // the booking goes to a block manager we replace below
  BlockManagerConfig bc;
  bc.num_blocks = 64;
  bc.block_size = 4;
  auto booker = std::make_unique<BlockBooker>(BlockManager::create(bc).value());
  Ends ends;
  ASSERT_TRUE(core.add_group(1, prompt(9, 1), sampling(1, 0, 10)).ok());
  ASSERT_TRUE(core.add_group(2, prompt(7, 2), sampling(1, 0, 10)).ok());
  ASSERT_TRUE(core.add_group(3, prompt(5, 3), sampling(1, 0, 10)).ok());  // waits: max_num_seqs 2
  StepPlan p1 = core.commit(booker->book(core.prepare()));
  ASSERT_FALSE(p1.empty());
  ASSERT_TRUE(core.can_prepare());
  StepPlan p2 = core.commit(booker->book(core.prepare()));  // one step ahead
  ASSERT_FALSE(p2.empty());
  ASSERT_EQ(core.num_in_flight(), 2);
  ends.take(core);
  core.reset_actors("the executor stopped");
  ends.take(core);
  EXPECT_EQ(ends.finish[1], FinishReason::error);
  EXPECT_EQ(ends.finish[2], FinishReason::error);
  EXPECT_FALSE(ends.done.contains(3));
  EXPECT_FALSE(core.in_flight());
  EXPECT_FALSE(core.has_outbox());  // nothing to free in the old pool
  EXPECT_EQ(core.stats().used_blocks, 0);
  // A fresh pool (the replaced block manager) serves the waiting group.
  booker = std::make_unique<BlockBooker>(BlockManager::create(bc).value());
  MirrorSet mirror;
  for (int step = 0; step < 100 && core.has_unfinished(); ++step) {
    ASSERT_TRUE(core.can_prepare() || core.in_flight());
    StepPlan plan = core.commit(booker->book(core.prepare()));
    ends.take(core);
    if (plan.empty()) continue;
    ASSERT_EQ(mirror.missing(plan), SeqId(0));
    mirror.run(plan);
    ASSERT_TRUE(core.apply(fake_result(plan)).ok());
    ends.take(core);
  }
  EXPECT_EQ(ends.finish[3], FinishReason::length);
  const BlockStats s = booker->stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.free + s.cached, s.total);
}

}  // namespace
}  // namespace pagoda::actors
