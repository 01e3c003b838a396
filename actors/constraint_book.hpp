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
//                        does: actors/job_thread.hpp);
//   row(seq)/mask(i)     the results, after prepare();
//   record(plan, ids)    queues the sampled ids (accepted by the next prepare()).
// A sequence whose matcher rejects an id it must take (a recomputed token,
// or a sampled one: a masking bug) fails alone with an error.
//
// Speculative entries (issue 24): an entry whose samples reach row_back d > 0
// ends with d drafted ids, and its d + 1 rows are sampled. Row j (row_back
// d - j) gets the mask of the matcher after the committed ids and drafts
// d[0..j): prepare() walks the drafts tentatively (accept, fill the next
// row); a draft the grammar forbids stops the walk (the rows after it get the
// mask before it: they can never be committed, their draft being masked out
// at its own row); a drafted stop id is never accepted (xgrammar's rollback
// does not undo a stop), the rows after it get the stop-only mask, and the
// matcher takes it when the verified run goes past it. The walked drafts
// stay in the matcher; the next ids the sequence takes (the
// verified run, at its position) roll back those that were rejected.
// record() skips a speculative entry's samples: the scheduler commits the
// verified run and the next plan carries it (speculation runs lockstep).
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
  // The mask and bias of seq's sample row this step (mask -1, bias nullptr:
  // none); row_back: a speculative entry's earlier rows (PlanSample).
  RowConstraint row(SeqId seq, int32_t row_back = 0) const;
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
  // The tentative walk through a speculative entry's drafts (fill_rows).
  struct DraftWalk {
    std::vector<TokenId> drafts;  // d[0..d), the matcher at the committed ids + d[0..walked)
    int32_t walked = 0;
    bool blocked = false;  // d[walked] is forbidden, or a stop id (then `at_stop`)
    bool at_stop = false;  // d[walked] is a stop id the grammar allows here
    TokenId stop_id = -1;  // at_stop: that id, at output index stop_at
    int32_t stop_at = -1;
  };
  struct State {
    model::TokenMatcher matcher;
    int32_t prompt_len = 0;
    bool failed = false;
    DraftWalk walk;  // empty outside a speculative step
  };
  struct Known {  // ids at positions [position, ...) of seq; the last `drafts` are drafted
    SeqId seq = 0;
    int32_t position = 0;
    std::vector<TokenId> ids;
    int32_t drafts = 0;
  };
  struct Staged {
    std::vector<std::pair<SeqId, SeqId>> pre_forks, forks;
    std::vector<SeqId> releases;
    std::vector<std::pair<SeqId, PlanEntry const*>> fresh;  // valid until prepare()
    std::vector<Known> known;  // entry ids, then the previous step's samples
    std::vector<std::pair<SeqId, int32_t>> samples;  // (seq, row_back)
  };

  void take(SeqId seq, int32_t position, std::span<const TokenId> ids);
  void fork(SeqId parent, SeqId child);
  void fail(SeqId seq, const std::string& why);
  void fill_rows();
  void start_walk(SeqId seq, int32_t position, std::span<const TokenId> drafts);
  // Moves st's matcher to the committed ids + d[0..j) (or as far as the walk goes).
  static void seek(State& st, int32_t j);
  // Fills words with the mask of seq's row row_back (false: seq failed).
  bool fill_row(SeqId seq, State& st, int32_t row_back, uint32_t* words);

  std::unordered_map<SeqId, State> seqs_;
  std::vector<Known> sampled_;  // recorded, not yet accepted
  Staged staged_;
  std::unordered_map<SeqId, std::vector<RowConstraint>> rows_;  // [row_back]
  std::vector<uint32_t> masks_;
  std::vector<SeqError> errors_;
  std::vector<int64_t> fill_ns_;
  int32_t words_ = 0;
};

}  // namespace pagoda::actors
