// ConstraintBook: the executor's matchers, one per constrained sequence
// (issue 23), kept in step with the plans like the SeqMirror, and the masks
// and biases of each step's sample rows.
//
// A sequence gets its matcher from a fresh entry that carries a constraint
// (PlanEntry::constraint); `prefix` and the entry's ids re-accept any output
// the sequence already has (preemption and recompute restore the matcher).
// Output position k (position - prompt_len) is the matcher's k-th token: an
// id at a position it already accepted with another id rolls it back first
// (a beam replaced by a sibling's candidate). Pre-forks and forks copy the
// parent's matcher (n > 1 children, beams); releases drop it.
//
// A step, on the executor's thread unless said otherwise:
//   stage(plan, tokens)  records what the plan changes (cheap, no matcher work);
//   prepare()            applies the recorded changes and the ids sampled by
//                        the step before, then fills the masks of the plan's
//                        sample rows: the matcher work, safe to run on another
//                        thread while the forward pass runs (the executor
//                        does: actors/mask_filler.hpp);
//   row(seq)/mask(i)     the results, after prepare();
//   record(plan, ids)    queues the sampled ids (accepted by the next prepare()).
// A sequence whose matcher rejects an id it must take (a recomputed token,
// or a sampled one: a masking bug) fails alone with an error.
// Not thread-safe: one thread at a time (stage/record and prepare never overlap).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/step_plan.hpp"
#include "model/token_matcher.hpp"

namespace pagoda::actors {

struct RowConstraint {
  int32_t mask = -1;  // index of its mask in masks() (-1: every token allowed)
  const std::vector<std::pair<int32_t, float>>* bias = nullptr;  // nullptr or empty: none
};

class ConstraintBook {
 public:
  bool empty() const { return seqs_.empty() && staged_.fresh.empty(); }
  // Whether the plan touches a constrained sequence (else stage/prepare may be skipped).
  bool involves(const StepPlan& plan) const;

  // tokens[e]: the ids entries[e] computes (the mirror's, placeholders filled);
  // bad[e]: the entry failed in the mirror (skipped here).
  void stage(const StepPlan& plan, const std::vector<std::vector<TokenId>>& tokens,
             const std::vector<uint8_t>& bad);
  void prepare();
  // The mask and bias of seq's sample row this step (mask -1, bias nullptr: none).
  RowConstraint row(SeqId seq) const;
  const uint32_t* mask(int32_t index) const { return masks_.data() + size_t(index) * size_t(words_); }
  int32_t mask_words() const { return words_; }
  // Sequences that failed in prepare() (cleared by the next stage()).
  const std::vector<SeqError>& errors() const { return errors_; }
  // Nanoseconds each mask fill of the last prepare() took (one per masked row).
  const std::vector<int64_t>& fill_ns() const { return fill_ns_; }

  void record(const StepPlan& plan, std::span<const TokenId> sampled);
  void release(const StepPlan& plan);  // only the plan's releases
  void erase(SeqId seq) { seqs_.erase(seq); }
  void clear();
  const model::TokenMatcher* find(SeqId seq) const;

 private:
  struct State {
    model::TokenMatcher matcher;
    int32_t prompt_len = 0;
    bool failed = false;
  };
  struct Known {  // ids at positions [position, ...) of seq
    SeqId seq = 0;
    int32_t position = 0;
    std::vector<TokenId> ids;
  };
  struct Staged {
    std::vector<std::pair<SeqId, SeqId>> pre_forks, forks;
    std::vector<SeqId> releases;
    std::vector<std::pair<SeqId, PlanEntry const*>> fresh;  // valid until prepare()
    std::vector<Known> known;  // entry ids, then the previous step's samples
    std::vector<SeqId> samples;
  };

  void take(SeqId seq, int32_t position, std::span<const TokenId> ids);
  void fork(SeqId parent, SeqId child);
  void fail(SeqId seq, const std::string& why);
  void fill_rows();

  std::unordered_map<SeqId, State> seqs_;
  std::vector<Known> sampled_;  // recorded, not yet accepted
  Staged staged_;
  std::unordered_map<SeqId, RowConstraint> rows_;
  std::vector<uint32_t> masks_;
  std::vector<SeqError> errors_;
  std::vector<int64_t> fill_ns_;
  int32_t words_ = 0;
};

}  // namespace pagoda::actors
