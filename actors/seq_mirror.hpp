// SeqMirror: the executor's copy of every sequence's state, kept up to date
// from the deltas of the plans (actors/step_plan.hpp), so that a step costs
// O(what changed) on the host, never O(context): per sequence its block
// table, token count, prompt length, the id it sampled last (fed into
// placeholders) and its token history (for penalties, valid when the plan
// that created it carried the prefix).
//
// A step is applied in three calls, in plan order:
//   begin(plan)   pre_forks, releases, then each entry: table delta, token
//                 count, resolved ids (known ids + placeholders); every
//                 check is O(delta); a sequence that fails one is dropped
//                 and reported, the others go on;
//   forks(plan)   the post-entry forks (children copy the parent's state);
//   record(plan, sampled)  the sampled ids, one per plan sample.
// A Listener (the executor) mirrors table changes into device memory.
// Not thread-safe: the executor's thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/step_plan.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

struct MirroredSeq {
  std::vector<BlockId> table;
  int32_t num_tokens = 0;    // positions with K/V (after the step that wrote them)
  int32_t prompt_len = 0;
  TokenId last_sampled = -1;
  std::vector<TokenId> history;  // ids by position, while history_valid
  bool history_valid = false;
  int32_t row = -1;              // the listener's (device table row)
  int32_t history_uploaded = 0;  // the listener's (ids already in device memory)
  uint32_t history_epoch = 0;    // the listener's (which device buffer they are in)
};

class SeqMirror {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual Result<void> on_create(MirroredSeq& s) = 0;
    // Entries [from, table.size()) of s.table changed.
    virtual Result<void> on_table(MirroredSeq& s, int32_t from) = 0;
    virtual void on_release(MirroredSeq& s) = 0;
  };

  SeqMirror(int32_t num_blocks, int32_t block_size, Listener* listener = nullptr)
      : num_blocks_(num_blocks), block_size_(block_size), listener_(listener) {}

  // Fills tokens[e] with the ids entry e computes this step. A pre-fork or
  // an entry its sequence cannot serve (a mismatch with the plan, a row the
  // listener cannot give) fails alone: the sequence is dropped, the error
  // is added to `errors` and bad[e] is set (for a pre-fork: the child is
  // dropped and named in `errors`); the rest is applied.
  void begin(const StepPlan& plan, std::vector<std::vector<TokenId>>& tokens,
             std::vector<uint8_t>& bad, std::vector<SeqError>& errors);
  // A fork that fails drops its child and names it in `errors`.
  void forks(const StepPlan& plan, std::vector<SeqError>& errors);
  void record(const StepPlan& plan, std::span<const TokenId> sampled);
  // Only the releases (a skipped plan still releases what it names).
  void release(const StepPlan& plan);

  // Drops one sequence (a row that failed: later plans naming it fail alone).
  void erase(SeqId seq) { drop(seq); }
  void clear();  // drops every sequence (the executor starts over)
  const MirroredSeq* find(SeqId seq) const;
  MirroredSeq* find(SeqId seq);  // the listener's fields (row, history_uploaded) change
  size_t size() const { return seqs_.size(); }
  int32_t block_size() const { return block_size_; }

 private:
  Result<void> apply_entry(const PlanEntry& e, std::vector<TokenId>& tokens);
  Result<void> fork(const SeqForkOp& f);
  void drop(SeqId seq);

  int32_t num_blocks_, block_size_;
  Listener* listener_;
  std::unordered_map<SeqId, MirroredSeq> seqs_;
};

}  // namespace pagoda::actors
