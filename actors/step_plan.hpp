// StepPlan / StepResult: what the scheduler asks of one model step and what
// the executor answers. Plain values (no CAF types), copyable, so that the
// scheduler core, the executor and their tests share them.
//
// Plans carry deltas: the executor keeps every sequence's block table, token
// count, history (for penalties) and last sampled id across steps
// (actors/seq_mirror.hpp). A plan lists, applied in this order:
//   pre_forks  (parent, child): child starts as a copy of parent (beams);
//   releases   sequences whose state the executor drops (freed, preempted);
//   truncates  sequences cut back to a length (rejected speculative drafts);
//   copies     copy-on-write block copies, run before any attention;
//   entries    sequences that compute tokens this step: `tokens` (known ids)
//              then num_placeholders ids the executor fills with the last
//              id it sampled for the sequence (scheduling ahead), at
//              positions num_cached..; `delta` updates its table first
//              (`fresh`: a new or re-admitted sequence whose state starts
//              here, with prompt_len and, when penalties need it, the
//              history of its first num_cached tokens in `prefix`;
//              `constraint`: its output constraint, when it has one);
//   forks      (parent, child) after the entries (n > 1: the children share
//              the prompt just prefilled and sample from the parent's row);
//   samples    rows to sample: the logits of entries[entry]'s last row (or
//              the row `row_back` before it: a speculative entry samples
//              every row, see actors/speculative_verify.hpp), drawn
//              with `params` (seed, step = the sample's output index). The
//              executor fills the history spans of rows with penalties from
//              its own history of the sequence.
// depends_on: the step in flight when this one was planned (0: none); if
// that step failed or was skipped, the executor skips this one too.
// A result has one SampleOutput per plan sample, in the same order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "actors/block_manager.hpp"
#include "gpu/ops.hpp"
#include "model/token_matcher.hpp"

namespace pagoda::actors {

struct PlanEntry {
  SeqId seq = 0;
  std::vector<TokenId> tokens;        // known ids computed this step (a chunk or a decode token)
  int32_t num_placeholders = 0;       // then this many ids sampled by the previous step
  // Draft-model speculation: the last num_drafts of `tokens` are slots the
  // executor's draft model fills (actors/draft_runner.hpp) before the
  // forward; the ids it put there come back in StepResult::drafted.
  int32_t num_drafts = 0;
  int32_t num_cached = 0;             // tokens of seq already in the cache
  bool fresh = false;                 // the sequence's executor state starts here
  int32_t table_from = 0;             // table[table_from..] := new_blocks
  std::vector<BlockId> new_blocks;
  int32_t prompt_len = 0;             // fresh only
  std::vector<TokenId> prefix;        // fresh with penalties or a constraint: ids [0, num_cached)
  // fresh only: the sequence's output constraint (issue 23), shared by its
  // group; nullptr: unconstrained. The executor keeps a matcher for it.
  std::shared_ptr<const model::ConstraintProgram> constraint;
  int32_t num_new() const { return int32_t(tokens.size()) + num_placeholders; }
};

struct SeqForkOp {
  SeqId parent = 0, child = 0;
  std::vector<BlockId> table;  // the child's own table, when not the parent's (contiguous layout)
};

struct PlanSample {
  SeqId seq = 0;                      // the sequence the sampled token goes to
  int32_t entry = 0;                  // index into StepPlan::entries
  gpu::SamplingRowParams params;      // history offsets are filled by the executor
  bool use_history = false;           // penalties: the executor supplies the history
  std::vector<TokenId> banned;        // never sampled this step (EOS before min_tokens)
  int32_t row_back = 0;               // the row sampled: the entry's last row minus this
                                      // (> 0: a speculative entry's earlier rows)
};

// Speculative decoding: the sequence's state keeps only its first
// num_tokens positions (rejected drafts are dropped; applied before entries).
struct SeqTruncate {
  SeqId seq = 0;
  int32_t num_tokens = 0;
};

struct StepPlan {
  uint64_t step_id = 0;
  uint64_t depends_on = 0;
  std::vector<SeqId> releases;
  std::vector<SeqTruncate> truncates;
  std::vector<SeqForkOp> pre_forks;
  std::vector<BlockCopy> copies;
  std::vector<PlanEntry> entries;
  std::vector<SeqForkOp> forks;
  std::vector<PlanSample> samples;

  bool empty() const { return entries.empty(); }
  // Carries state changes for the executor even without entries.
  bool has_state() const {
    return !releases.empty() || !truncates.empty() || !pre_forks.empty() || !copies.empty();
  }
  int32_t num_tokens() const {
    int32_t n = 0;
    for (const PlanEntry& e : entries) n += e.num_new();
    return n;
  }
};

struct SampleOutput {
  SeqId seq = 0;
  TokenId token = -1;
  float logprob = 0.0f;
  std::vector<TokenId> top_tokens;    // best first; empty without top-N logprobs
  std::vector<float> top_logprobs;
};

// One row that failed alone (its mirror disagreed with the plan, its logits
// were not finite, its sampled id fell outside the vocabulary): its group
// ends with `error`; the rest of the step counts.
struct SeqError {
  SeqId seq = 0;
  std::string error;
};

// The ids the draft model put in an entry's draft slots (PlanEntry::num_drafts).
struct DraftedRun {
  SeqId seq = 0;
  std::vector<TokenId> tokens;
};

struct StepResult {
  uint64_t step_id = 0;
  bool skipped = false;               // planned on a failed step: nothing ran
  std::vector<SampleOutput> samples;  // one per plan sample, same order (token -1: failed row)
  std::vector<SeqError> errors;       // rows that failed alone (usually empty)
  std::vector<DraftedRun> drafted;    // entries with draft slots, in entry order
};

}  // namespace pagoda::actors
