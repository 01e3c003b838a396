// SeqMirror: the executor's copy of every sequence's state, kept up to date
// from the deltas of the plans (actors/step_plan.hpp), so that a step costs
// O(what changed) on the host, never O(context): per sequence its token
// count, prompt length, the id it sampled last (fed into placeholders), its
// token history (for penalties, valid when the plan that created it carried
// the prefix) and a row of a TableStore, which holds its block table.
//
// One owner per fact: a sequence's block table is kept once on this side,
// in the TableStore (the executor's BlockTableArena, whose host rows are
// also the source of the device upload; VectorTables where no device is
// involved, e.g. the scheduler tests' fake cache). The store checks a
// delta's ids and holes; the mirror checks what only it knows (token
// counts, coverage, placeholders).
//
// A step is applied in three calls, in plan order:
//   begin(plan)   pre_forks, releases, truncates, then each entry: table delta, token
//                 count, ids (known ids + placeholders); every check is
//                 O(delta); a sequence that fails one is dropped and
//                 reported, the others go on;
//   forks(plan)   the post-entry forks (children copy the parent's state);
//   record(plan, sampled)  the sampled ids, one per plan sample.
// Placeholders: begin() fills each with the id last recorded for its
// sequence and lists it (Placeholder). A caller that prepares step N+1
// before step N's ids are known (a pipelined executor) calls expect(N)
// after forks(N): then N+1's begin() accepts a placeholder of a sequence
// awaiting its id (its value is stale or -1, `resolved` false, `awaits` N)
// and the caller patches it after record(N) (the sequence's recorded_step
// is then N), which writes each sampled id into the history at its
// position, so either order leaves the same history. The executor does so
// when it prepares a step ahead (executor.hpp, "Pipelined steps"); a step
// prepared after the one before finished has every placeholder resolved at
// begin. Not thread-safe: the executor's thread (the caller's, never the
// step thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/step_plan.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

struct MirroredSeq {
  int32_t num_tokens = 0;    // positions with K/V (after the step that wrote them)
  int32_t prompt_len = 0;
  TokenId last_sampled = -1;
  // The step whose sampled id it awaits: expect() of that step ran, its
  // record() not yet (0: none). A later step's expect() takes it over, so an
  // earlier step's record() does not end the wait.
  uint64_t awaiting_step = 0;
  uint64_t recorded_step = 0;  // the step whose record() set last_sampled
  std::vector<TokenId> history;  // ids by position, while history_valid
  bool history_valid = false;
  int32_t row = -1;              // its TableStore row (also its device history row)
  int32_t history_uploaded = 0;  // the executor's (ids already in device memory)
  uint32_t history_epoch = 0;    // the executor's (which device buffer they are in)
};

// Block tables by row. Contract of each call as BlockTableArena's
// (model/block_table_arena.hpp), except assign(): entries [from, from + n)
// become `blocks` and the row's length becomes from + n (a delta replaces
// the table's tail). Errors leave the row unchanged.
class TableStore {
 public:
  virtual ~TableStore() = default;
  virtual Result<int32_t> acquire() = 0;
  virtual void release(int32_t row) = 0;
  virtual Result<void> assign(int32_t row, int32_t from, std::span<const BlockId> blocks) = 0;
  virtual std::span<const BlockId> row(int32_t row) const = 0;  // entries [0, length)
};

// A TableStore in plain vectors (no device).
class VectorTables final : public TableStore {
 public:
  explicit VectorTables(int32_t num_blocks) : num_blocks_(num_blocks) {}
  Result<int32_t> acquire() override;
  void release(int32_t row) override;
  Result<void> assign(int32_t row, int32_t from, std::span<const BlockId> blocks) override;
  std::span<const BlockId> row(int32_t row) const override;

 private:
  int32_t num_blocks_;
  std::vector<std::vector<BlockId>> rows_;
  std::vector<uint8_t> used_;
  std::vector<int32_t> free_;
};

// A placeholder id begin() filled: tokens[entry][index], the id sampled
// last for `seq` (position: where it lands in the sequence); not `resolved`
// while that id is awaited (see expect()).
struct Placeholder {
  int32_t entry = 0, index = 0;
  SeqId seq = 0;
  int32_t position = 0;
  bool resolved = true;
  uint64_t awaits = 0;  // not resolved: the step whose record() gives the id
};

class SeqMirror {
 public:
  // `tables` (not owned; nullptr: a VectorTables of its own) must outlive
  // the mirror.
  SeqMirror(int32_t num_blocks, int32_t block_size, TableStore* tables = nullptr);

  // Fills tokens[e] with the ids entry e computes this step. A pre-fork or
  // an entry its sequence cannot serve (a mismatch with the plan, a row the
  // store cannot give) fails alone: the sequence is dropped, the error
  // is added to `errors` and bad[e] is set (for a pre-fork: the child is
  // dropped and named in `errors`); the rest is applied.
  // With `placeholders`, it is cleared and gets one Placeholder per
  // placeholder id of a served entry.
  void begin(const StepPlan& plan, std::vector<std::vector<TokenId>>& tokens,
             std::vector<uint8_t>& bad, std::vector<SeqError>& errors,
             std::vector<Placeholder>* placeholders = nullptr);
  // A fork that fails drops its child and names it in `errors`.
  void forks(const StepPlan& plan, std::vector<SeqError>& errors);
  // Marks every sequence the plan samples as awaiting its id until record()
  // (only for a caller that begins the next step first; O(samples)).
  void expect(const StepPlan& plan);
  // sampled[i] is plan.samples[i]'s id; it goes to the position after its
  // entry's tokens.
  void record(const StepPlan& plan, std::span<const TokenId> sampled);
  // Only the releases (a skipped plan still releases what it names).
  void release(const StepPlan& plan);

  // Drops one sequence (a row that failed: later plans naming it fail alone).
  void erase(SeqId seq) { drop(seq); }
  void clear();  // drops every sequence (the executor starts over)
  const MirroredSeq* find(SeqId seq) const;
  MirroredSeq* find(SeqId seq);  // the executor's fields (history_uploaded) change
  // The sequence's block table (empty for an unknown one).
  std::span<const BlockId> table(SeqId seq) const;
  size_t size() const { return seqs_.size(); }
  int32_t block_size() const { return block_size_; }

 private:
  // awaited: the step whose id the sequence still awaits (expect()), or 0.
  Result<void> apply_entry(const PlanEntry& e, std::vector<TokenId>& tokens, uint64_t& awaited);
  Result<void> fork(const SeqForkOp& f);
  void truncate(const SeqTruncate& t);
  void drop(SeqId seq);

  // A new sequence holding a row of the store (its table empty).
  Result<MirroredSeq*> create(SeqId seq, MirroredSeq init);

  int32_t num_blocks_, block_size_;
  std::unique_ptr<VectorTables> own_tables_;  // when none was given
  TableStore* tables_;
  std::unordered_map<SeqId, MirroredSeq> seqs_;
};

}  // namespace pagoda::actors
