// DraftRunner: the draft-model proposer of speculative decoding (issue 24
// item 1b). A second, smaller model with the target's tokenizer, run by the
// executor on the target's backend with its OWN paged KV pool: its own
// KvCache, block free list and BlockTableArena rows. The scheduler and the
// block manager never see this pool; it lives and dies with the executor.
//
// Per drafting sequence the runner keeps an arena row, its blocks and
// `cached`: the number of leading positions whose draft K/V is valid (they
// hold the sequence's ids at those positions). propose() is called before
// the target's forward of a step, for the rows whose plan entry carries k
// draft slots after the sequence's last committed token (at position P):
//   1. catch-up: the ids [cached, P] the draft K/V lacks (the prompt on
//      first use, the tokens committed since the last proposal, and any
//      slots a rejection rolled back) are run as a chunk (split over rounds
//      when longer than the step budget); its last row gives d[0];
//   2. k - 1 one-token decode rounds feed d[j] to get d[j + 1].
// Every round is one batched forward over all drafting rows (rows in
// different phases mix, as chunked prefill and decode do in the target).
// Afterwards cached = P + k (d[k-1] is never fed). truncate() (rejected
// drafts) lowers `cached`; release() (finished, preempted, fresh again)
// returns the sequence's blocks and row.
//
// Drafting draws: d[j] is drawn by the backend sampler from the draft's
// logits with the target row's own parameters (temperature, top-k/p,
// min-p, seed, step = the output index d[j] stands for). Greedy rows draft
// the draft's argmax; sampled rows draft from q with the same random race
// the target's sampler runs at that output index (a coupled draw: when the
// draft's distribution q is close to the target's p, the two draws agree
// with high probability). Verification stays the point-mass rule of
// actors/speculative_verify.hpp: the committed tokens are always the
// target sampler's own draws, so the output is token-identical to a run
// without speculation for every seed; drafts only set how many tokens a
// pass yields.
//
// Failure: a row the pool cannot hold gets no model drafts (its slots keep
// the caller's filler ids, which verification handles like any draft) and
// its state is released; a forward error is returned (the step fails).
// Not thread-safe: the executor's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/kv_cache.hpp"
#include "model/block_table_arena.hpp"
#include "model/forward_batch.hpp"
#include "model/llama_model.hpp"

namespace pagoda::actors {

struct DraftRunnerOptions {
  std::string model_path;      // the draft model (same tokenizer as target_path)
  std::string target_path;     // for the tokenizer check and the error message
  int32_t num_blocks = 0;      // > 0: exactly this many draft KV blocks
  uint64_t kv_cache_bytes = 0; // else > 0: this budget; else target_blocks blocks
  int32_t target_blocks = 0;   // the target pool's block count (default size)
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 0;   // the target's
  model::LoadOptions load;     // the target's load options (precision, format, partition)
};

// One drafting row of a step.
struct DraftRow {
  uint64_t seq = 0;
  std::span<const int32_t> history;  // ids by position [0, P] (P: the last committed token)
  std::span<int32_t> drafts;         // [k] out: d[0..k)
  std::span<const gpu::SamplingRowParams> params;  // [k] the target's rows for d[0..k)
};

class DraftRunner {
 public:
  // Loads the draft model on `backend` (which must outlive the runner) and
  // makes its pool. Errors: a bad file; a vocabulary that differs from the
  // target's (size, or any token's text), naming both files.
  static Result<std::unique_ptr<DraftRunner>> create(const DraftRunnerOptions& o,
                                                     gpu::Backend& backend,
                                                     const model::ModelConfig& target);

  // Fills rows[i].drafts. Requires distinct sequences and history.size() + k
  // <= max_model_len for each row.
  Result<void> propose(std::span<DraftRow> rows);
  void truncate(uint64_t seq, int32_t num_tokens);
  void release(uint64_t seq);
  void clear();

  int32_t num_blocks() const { return int32_t(cache_.num_blocks()); }
  int32_t used_blocks() const { return num_blocks() - int32_t(free_.size()); }
  int32_t block_size() const { return cache_.spec().block_size; }
  const model::ModelConfig& config() const { return model_->config(); }

 private:
  struct SeqState {
    int32_t row = -1;
    std::vector<int32_t> blocks;
    int32_t cached = 0;
  };
  // Per row of a propose() call: where it stands.
  struct Cursor {
    SeqState* st = nullptr;
    int32_t pos = 0;   // next position to feed
    int32_t made = 0;  // drafts drawn
  };
  DraftRunner() = default;
  Result<void> make_pool(const DraftRunnerOptions& o);
  Result<SeqState*> state(uint64_t seq);
  bool reserve(SeqState& st, int32_t positions);
  // One batched forward + draw over the rows not done; false when all are.
  Result<bool> round(std::span<DraftRow> rows, std::vector<Cursor>& cur);
  Result<void> draw(std::span<DraftRow> rows, std::vector<Cursor>& cur, const float* logits);

  gpu::Backend* backend_ = nullptr;
  std::unique_ptr<model::LlamaModel> model_;
  gpu::KvCache cache_;
  std::optional<model::BlockTableArena> tables_;
  std::vector<int32_t> free_;  // free draft blocks
  std::unordered_map<uint64_t, SeqState> seqs_;
  int32_t max_tokens_ = 0, max_rows_ = 0, max_model_len_ = 0;
  model::ForwardBatch batch_;
  std::vector<int32_t> chunk_;          // ids fed this round, all rows
  std::vector<int32_t> logits_of_;      // [R] the row index of each logits row
  std::vector<gpu::SamplingRowParams> rows_;
  std::vector<int32_t> drawn_;
  gpu::DeviceBuffer rows_dev_;  // [max_rows] SamplingRowParams of a round's draws
  gpu::DeviceBuffer out_dev_;   // [max_rows] int32 tokens | [max_rows] float logprobs
};

// An Error naming both files when the vocabularies differ (size, or the
// text of any id); ok otherwise.
Result<void> check_same_vocabulary(const std::string& draft_path, const std::string& target_path);

}  // namespace pagoda::actors
