// StepPlan / StepResult: what the scheduler asks of one model step and what
// the executor answers. Plain values (no CAF types), copyable, so that the
// scheduler core, the executor and their tests share them.
//
// A plan lists, in order:
//   copies   copy-on-write block copies, run before any attention;
//   entries  sequences that compute tokens this step: tokens[i] sits at
//            position num_cached + i; block_table covers num_cached +
//            tokens.size() tokens (the BlockManager gave the slots);
//   samples  rows to sample: the logits of entries[entry]'s last row, drawn
//            with `params` (seed, step = the sequence's output length). Several
//            samples may name one entry (parallel sampling right after the
//            shared prompt's prefill). `history` holds prompt + output ids when
//            the row's penalties need them (else empty; prompt_len/output_len
//            of params then say 0 and the executor ignores the spans).
// A result has one SampleOutput per plan sample, in the same order.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/block_manager.hpp"
#include "gpu/ops.hpp"

namespace pagoda::actors {

struct PlanEntry {
  SeqId seq = 0;
  std::vector<TokenId> tokens;        // computed this step (a chunk or one decode token)
  int32_t num_cached = 0;             // tokens of seq already in the cache
  std::vector<BlockId> block_table;   // physical blocks of seq's logical blocks
};

struct PlanSample {
  SeqId seq = 0;                      // the sequence the sampled token goes to
  int32_t entry = 0;                  // index into StepPlan::entries
  gpu::SamplingRowParams params;      // history offsets are filled by the executor
  std::vector<TokenId> history;       // prompt + output when penalties need them
  int32_t prompt_len = 0;             // of history
  std::vector<TokenId> banned;        // never sampled this step (EOS before min_tokens)
};

struct StepPlan {
  uint64_t step_id = 0;
  std::vector<BlockCopy> copies;
  std::vector<PlanEntry> entries;
  std::vector<PlanSample> samples;

  bool empty() const { return entries.empty(); }
  int32_t num_tokens() const {
    int32_t n = 0;
    for (const PlanEntry& e : entries) n += int32_t(e.tokens.size());
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

struct StepResult {
  uint64_t step_id = 0;
  std::vector<SampleOutput> samples;  // one per plan sample, same order
};

}  // namespace pagoda::actors
