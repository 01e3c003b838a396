// FakeKvCache: the scheduler tests' stand-in for the executor's KV cache. It
// stores token ids instead of K/V and keeps the sequences' block tables the
// way the executor does, from the plans' deltas (actors/seq_mirror.hpp):
// write(plan) applies releases, forks and table deltas, runs the plan's
// copy-on-write copies, then writes every planned token (placeholders
// resolved to the id sampled last) into its slot through the table;
// context(plan, sample) reads the sample's whole context BACK through the
// table, so a wrong delta, a missing copy or a block freed too early shows
// up as a wrong context (and so a wrong next token). record() tells it the
// sampled ids. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "actors/seq_mirror.hpp"
#include "actors/step_plan.hpp"

namespace pagoda::actors::test {

class FakeKvCache {
 public:
  FakeKvCache(int32_t num_blocks, int32_t block_size)
      : bs_(block_size), kv_(size_t(num_blocks) * size_t(block_size), -1), mirror_(num_blocks, block_size) {}

  void write(const StepPlan& plan) {
    std::vector<SeqError> errors;
    mirror_.begin(plan, tokens_, bad_, errors);
    ASSERT_TRUE(errors.empty()) << errors[0].error;
    for (const BlockCopy& c : plan.copies) {
      std::copy_n(kv_.begin() + c.src * bs_, bs_, kv_.begin() + c.dst * bs_);
    }
    for (size_t i = 0; i < plan.entries.size(); ++i) {
      const PlanEntry& e = plan.entries[i];
      for (size_t k = 0; k < tokens_[i].size(); ++k) at(e.seq, e.num_cached + int32_t(k)) = tokens_[i][k];
    }
    mirror_.forks(plan, errors);
    ASSERT_TRUE(errors.empty()) << errors[0].error;
  }

  std::vector<TokenId> context(const StepPlan& plan, const PlanSample& s) {
    const PlanEntry& e = plan.entries[size_t(s.entry)];
    std::vector<TokenId> ctx;
    for (int32_t p = 0; p < e.num_cached + e.num_new(); ++p) ctx.push_back(at(e.seq, p));
    return ctx;
  }

  void record(const StepPlan& plan, const StepResult& r) {
    std::vector<TokenId> ids;
    for (const SampleOutput& o : r.samples) ids.push_back(o.token);
    mirror_.record(plan, ids);
  }

  // A plan that does not run (failed or skipped) still releases.
  void release_only(const StepPlan& plan) { mirror_.release(plan); }
  size_t num_sequences() const { return mirror_.size(); }

 private:
  TokenId& at(SeqId seq, int32_t pos) {
    return kv_[size_t(mirror_.table(seq)[size_t(pos / bs_)] * bs_ + pos % bs_)];
  }
  int32_t bs_;
  std::vector<TokenId> kv_;
  SeqMirror mirror_;
  std::vector<std::vector<TokenId>> tokens_;
  std::vector<uint8_t> bad_;
};

}  // namespace pagoda::actors::test
