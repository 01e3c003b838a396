// Rig: a SchedulerCore with a local booker and an executor that always
// samples token 1, for the scheduling-policy suites (scheduling_policy_test,
// fair_scenarios_test). Records the step of each request's first token and
// finish, the tokens computed and every fresh plan entry; plans up to
// max_in_flight steps ahead as the engine does. Single-threaded.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/scheduler_core.hpp"

namespace pagoda::actors::test {

struct Rig {
  std::unique_ptr<SchedulerCore> core;
  std::map<RequestId, int> first_token, done;  // step index of each
  std::map<RequestId, int> tokens;
  int steps = 0;
  int64_t computed = 0;            // tokens the executor computed (recomputes included)
  std::deque<StepPlan> queued;     // planned, not yet run (in_flight 2: one step ahead)
  std::vector<PlanEntry> fresh;    // every entry that started a sequence (admissions)
  std::vector<StepPlan> plans;     // every plan that ran, in order

  Rig(SchedulingPolicy policy, int32_t blocks, int32_t bs, int32_t max_seqs, int32_t budget = 256,
      int32_t in_flight = 1, bool prompt_credit = true,
      const std::function<void(SchedulerConfig&)>& tweak = {}) {
    SchedulerConfig c;
    c.max_num_seqs = max_seqs;
    c.max_num_batched_tokens = budget;
    c.max_model_len = 1024;
    c.eos_token_ids = {0};
    c.policy = policy;
    c.max_in_flight = in_flight;
    c.fair.prompt_credit = prompt_credit;
    if (tweak) tweak(c);
    BlockManagerConfig bc;
    bc.num_blocks = blocks;
    bc.block_size = bs;
    core = std::make_unique<SchedulerCore>(c, BlockManager::create(bc).value());
  }

  void add(RequestId id, int32_t prompt_len, int32_t max_tokens, const std::string& client, int32_t priority = 0) {
    SamplingOptions o;
    o.seed = id;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    o.client = client;
    o.priority = priority;
    ASSERT_TRUE(core->add_group(id, std::vector<TokenId>(size_t(prompt_len), TokenId(2 + id % 50)), o).ok());
  }

  // Plans up to max_in_flight steps (the engine's pipeline), then runs and
  // applies the oldest.
  bool step() {
    while (int32_t(queued.size()) < core->config().max_in_flight) {
      StepPlan plan = core->schedule();
      collect();
      if (plan.empty()) break;
      for (const PlanEntry& e : plan.entries) {
        if (e.fresh) fresh.push_back(e);
      }
      queued.push_back(std::move(plan));
    }
    if (queued.empty()) return false;
    StepPlan plan = std::move(queued.front());
    queued.pop_front();
    computed += plan.num_tokens();
    plans.push_back(plan);
    StepResult r;
    r.step_id = plan.step_id;
    for (const PlanSample& s : plan.samples) {
      SampleOutput o;
      o.seq = s.seq;
      o.token = 1;
      r.samples.push_back(o);
    }
    EXPECT_TRUE(core->apply(r).ok());
    ++steps;
    collect();
    return true;
  }
  void run_all() {
    for (int guard = 0; core->has_unfinished() && guard < 10000; ++guard) {
      if (!step() && core->has_unfinished()) {
        ADD_FAILURE() << "stalled";
        return;
      }
    }
  }
  void collect() {
    for (const SeqEvent& e : core->take_events()) {
      if (e.group_done) done.emplace(e.request, steps);
      if (e.has_token) {
        first_token.emplace(e.request, steps);
        ++tokens[e.request];
      }
    }
  }
};

}  // namespace pagoda::actors::test
