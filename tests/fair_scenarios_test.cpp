// The fair policy in scenarios of the served benchmark's shape, through
// SchedulerCore with the Rig (a local booker, an executor that samples token
// 1; one step ahead where the engine would be): the lift's credit for a light
// client whose requests overlap, the victims' recompute from the prefix
// cache, and run E's Poisson shape in steps (docs/benchmarks.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "actors/scheduler_core.hpp"
#include "scheduling_rig.hpp"

namespace pagoda::actors {
namespace {

using test::Rig;

// A light client that sends two requests two steps apart every 40 steps
// (long prompts; its requests overlap: it is rarely idle, only not
// backlogged) against a flood that keeps every slot taken and a queue. The
// lift puts the light client at the flood's counter at its first arrival;
// with the plain lift its admission then charges it the prompt, and its
// second request waits behind the flood until the flood's output catches up. With the lift's credit (the default) each light
// request is admitted at the next step. Both policies need the same steps.
struct OverlapRun {
  int steps = 0, max_wait = 0;
  int64_t computed = 0;
  double mean_wait = 0.0;
  uint64_t preemptions = 0;
  bool all_finished = true;
};
OverlapRun overlapping_light(bool credit, int32_t in_flight) {
  Rig rig(SchedulingPolicy::fair, 512, 4, 8, 256, in_flight, credit);
  std::map<RequestId, int> arrived, max_tokens;
  RequestId heavy = 1, light = 1000;
  auto add = [&](RequestId id, int32_t prompt, int32_t out, const char* client) {
    arrived[id] = rig.steps;
    max_tokens[id] = out;
    rig.add(id, prompt, out, client);
  };
  for (int i = 0; i < 16; ++i) add(heavy++, 12, 40, "heavy");
  for (int t = 0; t < 360; ++t) {
    if (t % 5 == 0) add(heavy++, 12, 40, "heavy");  // 8 slots x 40 tokens: one per 5 steps
    if (t % 40 == 3 || t % 40 == 5) add(light++, 100, 24, "light");
    rig.step();
  }
  rig.run_all();
  OverlapRun out;
  out.steps = rig.steps;
  out.computed = rig.computed;
  for (auto [id, n] : max_tokens) out.all_finished &= rig.done.contains(id) && rig.tokens[id] == n;
  for (RequestId id = 1000; id < light; ++id) {
    const int w = rig.first_token.at(id) - arrived.at(id);
    out.max_wait = std::max(out.max_wait, w);
    out.mean_wait += w;
  }
  out.mean_wait /= double(light - 1000);
  out.preemptions = rig.core->stats().preemptions;
  std::printf("credit %d, %d in flight: steps %d, tokens computed %ld; light wait mean %.2f max %d; preemptions %lu\n",
              int(credit), in_flight, out.steps, long(out.computed), out.mean_wait, out.max_wait,
              (unsigned long)out.preemptions);
  return out;
}

TEST(SchedulingPolicy, FairAdmitsAnOverlappingLightClientAtTheNextStep) {
  for (int32_t in_flight : {1, 2}) {
    SCOPED_TRACE(in_flight);
    const OverlapRun plain = overlapping_light(false, in_flight);
    const OverlapRun credit = overlapping_light(true, in_flight);
    EXPECT_TRUE(plain.all_finished && credit.all_finished);
    EXPECT_GT(plain.max_wait, 4);              // behind the flood for several steps
    EXPECT_LE(credit.max_wait, in_flight);     // the next step it can enter
    EXPECT_NEAR(double(credit.steps), double(plain.steps), 0.03 * plain.steps);
    // The victims' recompute is mostly prefix hits: the tokens computed
    // stay within 1% of the plain lift's (fewer preemptions).
    EXPECT_LE(double(credit.computed), 1.01 * double(plain.computed));
  }
}

// A fairness victim is recomputed from the prefix cache: its full blocks,
// prompt and generated tokens alike (registered as they fill, the pending
// ones once their token is committed), stay cached after the preemption, so
// its readmission computes only the tokens of its last, partly filled block
// (at most a block: a prompt always computes its last token). Scheduling one
// step ahead, as the engine does.
TEST(SchedulingPolicy, FairVictimsRecomputeOnlyTheirLastBlock) {
  constexpr int32_t kBlock = 4;
  Rig rig(SchedulingPolicy::fair, 256, kBlock, 2, 256, /*in_flight=*/2);
  rig.add(1, 10, 40, "heavy");
  rig.add(2, 11, 40, "heavy");
  rig.add(3, 9, 40, "heavy");
  for (int i = 0; i < 17; ++i) rig.step();  // 1 and 2 hold 10 + 17 and 11 + 17 tokens or so
  const size_t before = rig.fresh.size();
  rig.add(100, 6, 4, "light");
  for (int i = 0; i < 3; ++i) rig.step();
  ASSERT_TRUE(rig.first_token.contains(100));
  ASSERT_EQ(rig.core->stats().preemptions, 1u);
  rig.run_all();
  int recomputed = 0;
  for (size_t i = before; i < rig.fresh.size(); ++i) {
    const PlanEntry& e = rig.fresh[i];
    const int32_t total = e.num_cached + e.num_new();
    if (total <= e.prompt_len) continue;  // a first admission (its prompt only)
    ++recomputed;  // prompt + output: the victim
    EXPECT_GT(total, 20);
    EXPECT_LE(e.num_new(), kBlock) << "of " << total << " tokens, " << e.num_cached << " from the cache";
    EXPECT_GE(e.num_cached, total - kBlock);
  }
  EXPECT_EQ(recomputed, 1);
  for (RequestId id : {1, 2, 3}) EXPECT_EQ(rig.tokens.at(id), 40) << id;
  const BlockManager& bm = rig.core->block_manager();
  EXPECT_EQ(bm.num_free_blocks() + bm.num_cached_blocks(), bm.total_blocks());
}

// Run E's shape in steps (docs/benchmarks.md): Poisson arrivals, the heavy
// client at 10x the light one's rate, 64-token prompts and outputs, 8 slots,
// one step ahead; the light client's wait from arrival to first token.
struct PoissonRun {
  int p50 = 0, p90 = 0, lights = 0;
};
PoissonRun poisson_light(int mean_gap, bool credit) {
  Rig rig(SchedulingPolicy::fair, 1024, 16, 8, 2048, 2, credit);
  std::mt19937 rng(7);
  std::exponential_distribution<double> light_gap(1.0 / mean_gap), heavy_gap(10.0 / mean_gap);
  std::map<RequestId, int> arrived;
  RequestId heavy = 1, light = 100000;
  double next_light = light_gap(rng), next_heavy = heavy_gap(rng);
  for (int t = 0; t < 2000; ++t) {
    for (; next_heavy <= t; next_heavy += heavy_gap(rng)) {
      arrived[heavy] = rig.steps;
      rig.add(heavy++, 64, 64, "heavy");
    }
    for (; next_light <= t; next_light += light_gap(rng)) {
      arrived[light] = rig.steps;
      rig.add(light++, 64, 64, "light");
    }
    rig.step();
  }
  std::vector<int> waits;
  for (RequestId id = 100000; id < light; ++id) {
    if (rig.first_token.contains(id)) waits.push_back(rig.first_token.at(id) - arrived.at(id));
  }
  std::sort(waits.begin(), waits.end());
  PoissonRun out;
  out.lights = int(waits.size());
  if (!waits.empty()) {
    out.p50 = waits[waits.size() / 2];
    out.p90 = waits[waits.size() * 9 / 10];
  }
  std::printf("light every %d steps, credit %d: %d light requests, wait p50 %d p90 %d steps\n", mean_gap, int(credit),
              out.lights, out.p50, out.p90);
  return out;
}

// With a light request every 30 or 45 steps the light client's median
// request waits only for the pipeline (2 steps, one step ahead), and the
// lift's credit shortens its tail (p90 8 and 3 steps; without: 17 and 8).
// At one every 22 steps its requests often hold 4 of the 8 slots, VTC's
// share against the flood, and the median waits 8 steps: printed, not
// asserted (docs/benchmarks.md, the limit for run E).
TEST(SchedulingPolicy, FairLightClientUnderPoissonArrivals) {
  for (int gap : {30, 45}) {
    const PoissonRun credit = poisson_light(gap, true);
    const PoissonRun plain = poisson_light(gap, false);
    EXPECT_GT(credit.lights, 30);
    EXPECT_LE(credit.p50, 2) << gap;
    EXPECT_LT(credit.p90, plain.p90) << gap;
  }
  (void)poisson_light(22, true);
}

}  // namespace
}  // namespace pagoda::actors
