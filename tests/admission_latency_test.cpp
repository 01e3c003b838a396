// How soon a request that arrives while steps run gets its first step,
// through SchedulerCore with a local booker: booking on progress (the next
// step is booked when the executor reports that the step in flight has only
// its sampling left, not when it is sent) and the fair policy's urgent
// prefill (a client's single waiting request runs its prompt in a step of
// its own while another client has a queue). The served figures:
// docs/benchmarks.md (issue 22).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "actors/scheduler_core.hpp"
#include "scheduling_rig.hpp"

namespace pagoda::actors {
namespace {

using test::Rig;

SchedulerConfig ahead_config(bool on_progress) {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 256;
  c.max_model_len = 512;
  c.eos_token_ids = {0};
  c.max_in_flight = 2;
  c.book_on_progress = on_progress;
  return c;
}

std::unique_ptr<SchedulerCore> make_core(const SchedulerConfig& c) {
  BlockManagerConfig bc;
  bc.num_blocks = 64;
  bc.block_size = 4;
  return std::make_unique<SchedulerCore>(c, BlockManager::create(bc).value());
}

void add(SchedulerCore& core, RequestId id, int32_t prompt_len) {
  SamplingOptions o;
  o.seed = id;
  o.max_tokens = 6;
  o.ignore_eos = true;
  ASSERT_TRUE(core.add_group(id, std::vector<TokenId>(size_t(prompt_len), TokenId(5)), o).ok());
}

int fresh_entries(const StepPlan& p) {
  return int(std::count_if(p.entries.begin(), p.entries.end(), [](const PlanEntry& e) { return e.fresh; }));
}

void answer(SchedulerCore& core, const StepPlan& plan) {
  StepResult r;
  r.step_id = plan.step_id;
  for (const PlanSample& s : plan.samples) r.samples.push_back(SampleOutput{.seq = s.seq, .token = 1});
  ASSERT_TRUE(core.apply(r).ok());
}

// Request 2 arrives while step 1 runs. Booked at send, step 2 was decided
// before it came (it enters step 3); booked on progress, step 2 takes it.
TEST(AdmissionLatency, BookingOnProgressAdmitsAnArrivalIntoTheNextStep) {
  for (bool on_progress : {false, true}) {
    SCOPED_TRACE(on_progress);
    auto core = make_core(ahead_config(on_progress));
    add(*core, 1, 8);
    const StepPlan p1 = core->schedule();
    ASSERT_EQ(fresh_entries(p1), 1);
    StepPlan p2 = core->schedule();  // at send: step 2 now
    EXPECT_EQ(p2.empty(), on_progress);
    EXPECT_EQ(core->can_prepare(), false);
    add(*core, 2, 8);  // arrives during step 1
    if (on_progress) {
      EXPECT_FALSE(core->note_progress(p1.step_id + 7));  // not in flight
      EXPECT_TRUE(core->note_progress(p1.step_id));
      EXPECT_FALSE(core->note_progress(p1.step_id));      // once
      EXPECT_TRUE(core->can_prepare());
      p2 = core->schedule();
      EXPECT_FALSE(core->can_prepare());                  // two in flight
    }
    ASSERT_FALSE(p2.empty());
    EXPECT_EQ(fresh_entries(p2), on_progress ? 1 : 0);  // request 2's prompt
    EXPECT_EQ(p2.entries.size(), on_progress ? 2u : 1u);  // and request 1's decode
    answer(*core, p1);
    // One in flight that has not reported: nothing is booked until it does
    // (or its result comes).
    EXPECT_EQ(core->can_prepare(), !on_progress);
    if (on_progress) {
      answer(*core, p2);
      EXPECT_TRUE(core->can_prepare());
    }
  }
}

// A heavy client holds every slot and keeps a queue; a light client's
// request arrives. Urgent prefill: the step that admits it runs its prompt
// alone and the heavy rows go on in the next step; without it they share
// the step. Every request ends with all its tokens either way.
struct UrgentRun {
  std::vector<size_t> light_step_entries;  // entries of each step that admitted a light request
  std::vector<size_t> next_step_entries;   // entries of the step after it
  bool all_done = true;
};
UrgentRun light_among_heavy(bool urgent, int32_t in_flight) {
  Rig rig(SchedulingPolicy::fair, 256, 4, 4, 256, in_flight, true,
          [urgent](SchedulerConfig& c) { c.urgent_prefill_alone = urgent; });
  RequestId heavy = 1, light = 1000;
  for (int i = 0; i < 8; ++i) rig.add(heavy++, 12, 20, "heavy");
  for (int t = 0; t < 60; ++t) {
    if (t % 4 == 0) rig.add(heavy++, 12, 20, "heavy");
    if (t % 20 == 7) rig.add(light++, 16, 4, "light");
    rig.step();
  }
  rig.run_all();
  UrgentRun out;
  for (RequestId id = 1; id < heavy; ++id) out.all_done &= rig.tokens[id] == 20;
  for (RequestId id = 1000; id < light; ++id) out.all_done &= rig.tokens[id] == 4;
  for (size_t i = 0; i < rig.plans.size(); ++i) {
    const StepPlan& p = rig.plans[i];
    const bool light_fresh = std::any_of(p.entries.begin(), p.entries.end(), [&](const PlanEntry& e) {
      return e.fresh && e.prompt_len == 16;
    });
    if (!light_fresh || i + 1 == rig.plans.size()) continue;
    out.light_step_entries.push_back(p.entries.size());
    out.next_step_entries.push_back(rig.plans[i + 1].entries.size());
  }
  return out;
}

TEST(AdmissionLatency, UrgentPrefillRunsALightClientsPromptAlone) {
  for (int32_t in_flight : {1, 2}) {
    SCOPED_TRACE(in_flight);
    const UrgentRun on = light_among_heavy(true, in_flight), off = light_among_heavy(false, in_flight);
    EXPECT_TRUE(on.all_done && off.all_done);
    ASSERT_EQ(on.light_step_entries.size(), 3u);
    ASSERT_EQ(off.light_step_entries.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(on.light_step_entries[i], 1u);   // the light prompt alone
      EXPECT_GE(on.next_step_entries[i], 3u);    // the heavy rows again
      EXPECT_GE(off.light_step_entries[i], 4u);  // beside the heavy rows
    }
  }
}

// The pool is full of the heavy client's rows, so a light request fits only
// after a fairness preemption, whose frees the same booking applies: that
// step is still urgent (the candidate fits once the victim's blocks are
// counted), so the light prompt runs alone.
TEST(AdmissionLatency, AnUrgentPromptThatFitsAfterAFairnessPreemptionStillRunsAlone) {
  Rig rig(SchedulingPolicy::fair, 48, 4, 8, 256, 1, true,
          [](SchedulerConfig& c) { c.urgent_prefill_alone = true; });
  RequestId heavy = 1, light = 1000;
  for (int i = 0; i < 6; ++i) rig.add(heavy++, 28, 16, "heavy");  // 11 blocks each at the end
  std::vector<size_t> light_steps;
  uint64_t preempted_before_light = 0;
  for (int t = 0; t < 80; ++t) {
    if (t % 3 == 0) rig.add(heavy++, 28, 16, "heavy");
    if (t % 20 == 9) {
      preempted_before_light = rig.core->stats().preemptions;
      rig.add(light++, 16, 4, "light");
    }
    const size_t before = rig.plans.size();
    rig.step();
    for (size_t i = before; i < rig.plans.size(); ++i) {
      const StepPlan& p = rig.plans[i];
      if (std::any_of(p.entries.begin(), p.entries.end(), [](const PlanEntry& e) { return e.fresh && e.prompt_len == 16; })) {
        light_steps.push_back(p.entries.size());
      }
    }
  }
  rig.run_all();
  EXPECT_GT(rig.core->stats().preemptions, preempted_before_light);  // the last light request made room
  ASSERT_EQ(light_steps.size(), 4u);
  for (size_t n : light_steps) EXPECT_EQ(n, 1u);
  for (RequestId id = 1000; id < light; ++id) EXPECT_EQ(rig.tokens[id], 4) << id;
  for (RequestId id = 1; id < heavy; ++id) EXPECT_EQ(rig.tokens[id], 16) << id;
}

// With a single client the option changes no step (batching as usual); a
// client's request while another of its own waits is not urgent either: that
// admission shares its step with the running rows.
std::vector<std::pair<size_t, int>> single_client_steps(bool urgent) {
  Rig rig(SchedulingPolicy::fair, 256, 4, 4, 256, 1, true,
          [urgent](SchedulerConfig& c) { c.urgent_prefill_alone = urgent; });
  for (RequestId id = 1; id <= 12; ++id) rig.add(id, 12 + int32_t(id % 3), 8 + int32_t(id % 5), "a");
  rig.run_all();
  std::vector<std::pair<size_t, int>> shape;  // entries, fresh entries per step
  for (const StepPlan& p : rig.plans) shape.push_back({p.entries.size(), fresh_entries(p)});
  return shape;
}

TEST(AdmissionLatency, NoUrgentPrefillForASingleClientOrAClientsQueue) {
  EXPECT_EQ(single_client_steps(true), single_client_steps(false));
  Rig rig(SchedulingPolicy::fair, 256, 4, 4, 256, 1, true,
          [](SchedulerConfig& c) { c.urgent_prefill_alone = true; });
  for (RequestId id = 1; id <= 12; ++id) rig.add(id, 12, 10, "a");
  for (int t = 0; t < 5; ++t) rig.step();
  rig.add(100, 13, 4, "b");  // b: two requests waiting at once
  rig.add(101, 14, 4, "b");
  rig.run_all();
  const StepPlan* b_first = nullptr;
  for (const StepPlan& p : rig.plans) {
    for (const PlanEntry& e : p.entries) {
      if (e.fresh && e.prompt_len == 13) b_first = &p;
    }
  }
  ASSERT_NE(b_first, nullptr);
  EXPECT_GT(int(b_first->entries.size()), fresh_entries(*b_first));  // beside a's rows
  EXPECT_EQ(rig.tokens[100], 4);
  EXPECT_EQ(rig.tokens[101], 4);
}

// A group that would be urgent but does not fit (every slot taken, no victim
// the fair rules allow) waits without stalling: the steps go on with the
// running rows.
TEST(AdmissionLatency, AnUrgentCandidateThatDoesNotFitWaitsBesideTheRunningRows) {
  Rig rig(SchedulingPolicy::fair, 256, 4, 2, 256, 1, true,
          [](SchedulerConfig& c) { c.urgent_prefill_alone = true; });
  rig.add(1, 8, 30, "light");    // light's long request: one slot
  rig.add(2, 200, 30, "heavy");  // heavy: the other slot, a large prompt charged
  rig.add(3, 8, 5, "heavy");     // heavy backlogged
  rig.step();
  rig.step();
  rig.add(4, 8, 5, "light");  // light would hold 2 slots > heavy's 1: no victim
  const size_t before = rig.plans.size();
  rig.step();
  ASSERT_GT(rig.plans.size(), before);
  EXPECT_EQ(rig.plans.back().entries.size(), 2u);  // the running rows, not an empty step
  rig.run_all();
  for (RequestId id : {1, 2, 3, 4}) EXPECT_TRUE(rig.done.contains(id)) << id;
}

}  // namespace
}  // namespace pagoda::actors
