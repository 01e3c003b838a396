// FakeKvCache: the scheduler tests' stand-in for the executor's KV cache. It
// stores token ids instead of K/V: write(plan) runs the plan's copy-on-write
// copies, then writes every planned token into its slot through the block
// table; context(plan, sample) reads the sample's whole context BACK through
// the block table, so a wrong table, a missing copy or a block freed too early
// shows up as a wrong context (and so a wrong next token). Header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "actors/step_plan.hpp"

namespace pagoda::actors::test {

class FakeKvCache {
 public:
  FakeKvCache(int32_t num_blocks, int32_t block_size)
      : bs_(block_size), kv_(size_t(num_blocks) * size_t(block_size), -1) {}

  void write(const StepPlan& plan) {
    for (const BlockCopy& c : plan.copies) {
      std::copy_n(kv_.begin() + c.src * bs_, bs_, kv_.begin() + c.dst * bs_);
    }
    for (const PlanEntry& e : plan.entries) {
      for (size_t i = 0; i < e.tokens.size(); ++i) at(e, e.num_cached + int32_t(i)) = e.tokens[i];
    }
  }

  std::vector<TokenId> context(const StepPlan& plan, const PlanSample& s) {
    const PlanEntry& e = plan.entries[size_t(s.entry)];
    std::vector<TokenId> ctx;
    for (int32_t p = 0; p < e.num_cached + int32_t(e.tokens.size()); ++p) ctx.push_back(at(e, p));
    return ctx;
  }

 private:
  TokenId& at(const PlanEntry& e, int32_t pos) {
    return kv_[size_t(e.block_table[size_t(pos / bs_)] * bs_ + pos % bs_)];
  }
  int32_t bs_;
  std::vector<TokenId> kv_;
};

}  // namespace pagoda::actors::test
