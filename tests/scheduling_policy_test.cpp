// The scheduling policies through SchedulerCore (local booker, an executor
// that always samples token 1): the order in which groups get their first
// token and finish under fcfs, fair and priority; priority preemption; and
// the fair policy's charges (scenarios of the served bench: fair_scenarios_test).
// Outputs under preemption are checked against the
// reference in scheduler_core_test.cpp (SchedulerCore.PoliciesRecompute...).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "actors/scheduler_core.hpp"
#include "scheduling_rig.hpp"

namespace pagoda::actors {
namespace {

using test::Rig;


// One client floods 10 requests, two run at a time; a second client's single
// request arrives once the flood runs. fair: it is admitted at the first free
// slot; fcfs: after every queued flood request.
int light_rank(SchedulingPolicy policy) {
  Rig rig(policy, 256, 4, 2);
  for (RequestId id = 1; id <= 10; ++id) rig.add(id, 8, 6, "flood");
  rig.step();
  rig.step();
  rig.add(100, 8, 6, "light");
  rig.run_all();
  int rank = 0;  // flood requests whose first token came before the light one's
  for (RequestId id = 1; id <= 10; ++id) rank += rig.first_token.at(id) < rig.first_token.at(100);
  EXPECT_EQ(rig.tokens.at(100), 6);
  return rank;
}

TEST(SchedulingPolicy, FairAdmitsALightClientBeforeAFloodsQueue) {
  EXPECT_EQ(light_rank(SchedulingPolicy::fcfs), 10);
  EXPECT_EQ(light_rank(SchedulingPolicy::fair), 2);  // only the two already running
}

TEST(SchedulingPolicy, FairAlternatesBetweenTwoBackloggedClients) {
  Rig rig(SchedulingPolicy::fair, 256, 4, 1);
  for (RequestId id = 1; id <= 4; ++id) rig.add(id, 8, 4, "a");
  for (RequestId id = 11; id <= 14; ++id) rig.add(id, 8, 4, "b");
  rig.run_all();
  std::vector<std::pair<int, RequestId>> order;
  for (auto [id, step] : rig.first_token) order.push_back({step, id});
  std::sort(order.begin(), order.end());
  std::vector<RequestId> ids;
  for (auto [step, id] : order) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<RequestId>{1, 11, 2, 12, 3, 13, 4, 14}));
  // Each client: 4 x (8 prompt + 2 x 4 output) = 64.
  EXPECT_DOUBLE_EQ(rig.core->fair_share().counter("a"), 64.0);
  EXPECT_DOUBLE_EQ(rig.core->fair_share().counter("b"), 64.0);
}

TEST(SchedulingPolicy, PriorityRunsTheLowerValueFirstFcfsWithinAValue) {
  Rig rig(SchedulingPolicy::priority, 256, 4, 1);
  rig.add(1, 4, 3, "x", 5);
  rig.add(2, 4, 3, "x", 1);
  rig.add(3, 4, 3, "x", 3);
  rig.add(4, 4, 3, "x", 1);
  rig.add(5, 4, 3, "x", -2);
  rig.run_all();
  std::vector<std::pair<int, RequestId>> order;
  for (auto [id, step] : rig.done) order.push_back({step, id});
  std::sort(order.begin(), order.end());
  std::vector<RequestId> ids;
  for (auto [step, id] : order) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<RequestId>{5, 2, 4, 3, 1}));
}

// 16 blocks of 4: a low-priority group (value 10) holds 11 blocks when an
// urgent one (value 0) arrives that needs 6. priority: the low one is
// preempted and the urgent one finishes first; fcfs: it waits.
struct PreemptOutcome {
  uint64_t preemptions = 0;
  bool urgent_first = false;
};
PreemptOutcome urgent_arrives(SchedulingPolicy policy) {
  Rig rig(policy, 16, 4, 8);
  rig.add(1, 40, 16, "x", 10);
  rig.step();
  rig.step();
  rig.add(2, 24, 4, "x", 0);  // 6 blocks; 5 are free
  rig.run_all();
  EXPECT_EQ(rig.tokens.at(1), 16);  // the victim still produces all its tokens
  EXPECT_EQ(rig.tokens.at(2), 4);
  const BlockManager& bm = rig.core->block_manager();
  EXPECT_EQ(bm.num_free_blocks() + bm.num_cached_blocks(), bm.total_blocks());
  return {rig.core->stats().preemptions, rig.done.at(2) < rig.done.at(1)};
}

TEST(SchedulingPolicy, PriorityPreemptsALargerValueWhenBlocksRunOut) {
  const PreemptOutcome fcfs = urgent_arrives(SchedulingPolicy::fcfs);
  EXPECT_EQ(fcfs.preemptions, 0u);
  EXPECT_FALSE(fcfs.urgent_first);
  const PreemptOutcome prio = urgent_arrives(SchedulingPolicy::priority);
  EXPECT_GE(prio.preemptions, 1u);
  EXPECT_TRUE(prio.urgent_first);
}

TEST(SchedulingPolicy, PriorityNeverPreemptsAnEqualOrSmallerValue) {
  Rig rig(SchedulingPolicy::priority, 16, 4, 8);
  rig.add(1, 40, 16, "x", 0);
  rig.step();
  rig.step();                 // 1 holds 11 blocks
  rig.add(2, 24, 4, "x", 0);  // same value: waits (6 blocks; 5 are free)
  rig.add(3, 24, 8, "x", 7);  // larger value: waits
  rig.run_all();
  EXPECT_EQ(rig.core->stats().preemptions, 0u);
  EXPECT_LT(rig.done.at(1), rig.done.at(2));
  EXPECT_LT(rig.done.at(2), rig.done.at(3));
}

TEST(SchedulingPolicy, FairChargesThePromptOnceEvenWhenRecomputed) {
  Rig rig(SchedulingPolicy::fair, 12, 4, 8);
  rig.add(1, 20, 20, "a");
  rig.add(2, 20, 20, "b");
  rig.run_all();
  ASSERT_GE(rig.core->stats().preemptions, 1u) << "the pool was meant to force a preemption";
  EXPECT_DOUBLE_EQ(rig.core->fair_share().counter("a"), 20.0 + 2.0 * 20);
  EXPECT_DOUBLE_EQ(rig.core->fair_share().counter("b"), 20.0 + 2.0 * 20);
}

// The throughput half of the bench scenario, free of machine noise: the same
// arrivals (a heavy client at 10x a light one's rate, more work than the
// steps can take) need about as many steps under fair as under fcfs, and the
// light client's first tokens come much sooner.
struct FloodRun {
  int steps = 0;
  double light_wait = 0.0;  // mean steps from arrival to first token
  uint64_t preemptions = 0;
};
FloodRun flood(SchedulingPolicy policy, int32_t blocks = 64) {
  Rig rig(policy, blocks, 4, 8, 64);
  std::map<RequestId, int> arrived;
  RequestId heavy = 1, light = 1000;
  for (int t = 0; t < 200; ++t) {
    arrived[heavy] = rig.steps;  // one a step: 8 slots of 10-token requests take 0.8
    rig.add(heavy++, 12, 10, "heavy");
    if (t % 10 == 0) {
      arrived[light] = rig.steps;
      rig.add(light++, 12, 10, "light");
    }
    rig.step();
  }
  rig.run_all();
  FloodRun out;
  out.steps = rig.steps;
  for (RequestId id = 1000; id < light; ++id) out.light_wait += rig.first_token.at(id) - arrived.at(id);
  out.light_wait /= double(light - 1000);
  out.preemptions = rig.core->stats().preemptions;
  return out;
}

TEST(SchedulingPolicy, FairNeedsAsManyStepsAsFcfsUnderAFlood) {
  const FloodRun fcfs = flood(SchedulingPolicy::fcfs), fair = flood(SchedulingPolicy::fair);
  EXPECT_NEAR(double(fair.steps), double(fcfs.steps), 0.03 * fcfs.steps);
  EXPECT_LT(fair.light_wait * 5, fcfs.light_wait) << "fair " << fair.light_wait << " fcfs " << fcfs.light_wait;
  EXPECT_LE(fair.preemptions, fcfs.preemptions + 2);
  // The same with a pool too small for 8 running requests: preemptions.
  const FloodRun tight_fcfs = flood(SchedulingPolicy::fcfs, 36), tight_fair = flood(SchedulingPolicy::fair, 36);
  EXPECT_GT(tight_fcfs.preemptions, 0u);
  EXPECT_NEAR(double(tight_fair.steps), double(tight_fcfs.steps), 0.03 * tight_fcfs.steps);
  EXPECT_LT(tight_fair.light_wait * 5, tight_fcfs.light_wait);
  for (const auto& [name, a, b] : {std::tuple{"64 blocks", fcfs, fair}, std::tuple{"36 blocks", tight_fcfs, tight_fair}}) {
    std::printf("%s: steps fcfs %d fair %d; light wait (steps) fcfs %.1f fair %.1f; preemptions %lu %lu\n", name,
                a.steps, b.steps, a.light_wait, b.light_wait, (unsigned long)a.preemptions,
                (unsigned long)b.preemptions);
  }
}

// Every sequence slot taken: a heavy client keeps 4 slots busy with long
// requests and a queue behind them; a light client sends a short request
// every 25 steps. Without preemption the light request waits for a slot to
// free (fcfs: for the whole queue); fair preempts the newest heavy group.
struct SaturatedRun {
  int steps = 0;
  int light_max_wait = 0;  // steps from arrival to first token, worst
  double light_wait = 0.0;  // mean
  int lights = 0;
  uint64_t preemptions = 0;
  int64_t computed = 0;      // tokens computed, recomputes included
  bool all_finished = true;  // every request produced all its tokens and ended
  bool blocks_back = false;  // every block free or cached at the end
};
SaturatedRun saturated(SchedulingPolicy policy, int32_t blocks) {
  Rig rig(policy, blocks, 4, 4, 64);
  std::map<RequestId, int> arrived, max_tokens;
  RequestId heavy = 1, light = 1000;
  auto add = [&](RequestId id, int32_t prompt, int32_t out, const char* client) {
    arrived[id] = rig.steps;
    max_tokens[id] = out;
    rig.add(id, prompt, out, client);
  };
  for (int i = 0; i < 8; ++i) add(heavy++, 12, 30, "heavy");
  for (int t = 0; t < 300; ++t) {
    if (t % 6 == 0) add(heavy++, 12, 30, "heavy");  // 4 slots x 30 tokens: one per 7.5 steps
    if (t % 25 == 12) add(light++, 12, 6, "light");
    rig.step();
  }
  rig.run_all();
  SaturatedRun out;
  out.steps = rig.steps;
  for (auto [id, n] : max_tokens) {
    out.all_finished &= rig.done.contains(id) && rig.tokens[id] == n;
  }
  for (RequestId id = 1000; id < light; ++id) {
    if (!rig.first_token.contains(id)) continue;
    const int w = rig.first_token.at(id) - arrived.at(id);
    out.light_max_wait = std::max(out.light_max_wait, w);
    out.light_wait += w;
  }
  out.lights = int(light - 1000);
  out.light_wait /= out.lights;
  out.preemptions = rig.core->stats().preemptions;
  out.computed = rig.computed;
  const BlockManager& bm = rig.core->block_manager();
  out.blocks_back = bm.num_free_blocks() + bm.num_cached_blocks() == bm.total_blocks() &&
                    !rig.core->has_unfinished();
  std::printf("%s %d blocks: steps %d, tokens computed %ld; light wait mean %.2f max %d; preemptions %lu\n",
              std::string(scheduling_policy_name(policy)).c_str(), blocks, out.steps, long(out.computed),
              out.light_wait, out.light_max_wait, (unsigned long)out.preemptions);
  return out;
}

TEST(SchedulingPolicy, FairPreemptsTheFloodForALightClientWhenEverySlotIsTaken) {
  // 256 blocks: the slots bind; 40 blocks: the KV cache binds too (4 heavy
  // groups of 42 tokens need 44 blocks).
  for (int32_t blocks : {256, 40}) {
    SCOPED_TRACE(blocks);
    const SaturatedRun fcfs = saturated(SchedulingPolicy::fcfs, blocks);
    const SaturatedRun fair = saturated(SchedulingPolicy::fair, blocks);
    EXPECT_TRUE(fcfs.all_finished && fair.all_finished);
    EXPECT_TRUE(fcfs.blocks_back && fair.blocks_back);
    EXPECT_GT(fcfs.light_max_wait, 20);   // the scenario keeps every slot taken
    EXPECT_LE(fair.light_max_wait, 1);    // admitted at the next step (the lift's tie preempts)
    EXPECT_NEAR(double(fair.steps), double(fcfs.steps), 0.03 * fcfs.steps);
    // The victims' recompute is mostly prefix hits: fair computes at most 1%
    // more tokens than fcfs (measured: +0.2% with 256 blocks, -0.2% with 40).
    EXPECT_LE(double(fair.computed), 1.01 * double(fcfs.computed));
    // One victim per light admission (two when the blocks bind too) beyond fcfs's own.
    EXPECT_LE(fair.preemptions, fcfs.preemptions + uint64_t(fair.lights) * (blocks < 256 ? 2 : 1));
  }
}

// (b): a waiting client with nothing running but a counter above the
// running client's preempts nobody. b's long prompt (600) runs beside a's
// two groups; once it is done, a third a group fills the slots and b's
// next request waits for one to free (a's counter, 6 a step, stays below).
TEST(SchedulingPolicy, FairNeverPreemptsForAClientWithAHigherCounter) {
  Rig rig(SchedulingPolicy::fair, 256, 4, 3);
  rig.add(1, 8, 40, "a");
  rig.add(2, 600, 1, "b");
  rig.add(3, 8, 40, "a");
  for (int i = 0; i < 5 && !rig.done.contains(2); ++i) rig.step();
  ASSERT_TRUE(rig.done.contains(2));
  rig.add(4, 8, 40, "a");
  rig.step();
  rig.add(5, 8, 4, "b");
  ASSERT_GT(rig.core->fair_share().counter("b"), rig.core->fair_share().counter("a"));
  rig.run_all();
  EXPECT_EQ(rig.core->stats().preemptions, 0u);
  EXPECT_GT(rig.first_token.at(5), rig.done.at(1));  // it waited for a slot
  EXPECT_EQ(rig.tokens.at(5), 4);
}

// (a): a light client whose first request still runs (1 slot of 4) preempts
// again for its second, since the flood holds 3 >= 2; a third would not
// (2 + 1 > 2 left to the flood).
TEST(SchedulingPolicy, FairPreemptsWhileTheLightClientHoldsFewerSlots) {
  Rig rig(SchedulingPolicy::fair, 256, 4, 4);
  for (RequestId id = 1; id <= 8; ++id) rig.add(id, 8, 40, "heavy");
  for (int i = 0; i < 3; ++i) rig.step();
  rig.add(100, 8, 40, "light");
  for (int i = 0; i < 4; ++i) rig.step();
  ASSERT_TRUE(rig.first_token.contains(100));
  EXPECT_EQ(rig.core->stats().preemptions, 1u);
  const int at = rig.steps;
  rig.add(101, 8, 40, "light");
  for (int i = 0; i < 4; ++i) rig.step();
  ASSERT_TRUE(rig.first_token.contains(101));
  EXPECT_LE(rig.first_token.at(101) - at, 2);
  EXPECT_EQ(rig.core->stats().preemptions, 2u);
  rig.add(102, 8, 4, "light");
  for (int i = 0; i < 4; ++i) rig.step();
  EXPECT_EQ(rig.core->stats().preemptions, 2u);
  EXPECT_FALSE(rig.first_token.contains(102));  // it waits for a slot
  rig.run_all();
  for (RequestId id : {1, 2, 3, 4, 5, 6, 7, 8, 100, 101}) EXPECT_EQ(rig.tokens.at(id), 40) << id;
  EXPECT_EQ(rig.tokens.at(102), 4);
}

TEST(SchedulingPolicy, PolicyNamesRoundTrip) {
  for (SchedulingPolicy p : {SchedulingPolicy::fcfs, SchedulingPolicy::fair, SchedulingPolicy::priority}) {
    EXPECT_EQ(parse_scheduling_policy(scheduling_policy_name(p)), p);
  }
  EXPECT_FALSE(parse_scheduling_policy("lifo").has_value());
}

}  // namespace
}  // namespace pagoda::actors
