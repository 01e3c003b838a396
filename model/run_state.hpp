// RunState: the forward pass's working memory, allocated once at model load
// for the largest step it accepts (RunStateLimits), so that a step allocates
// nothing: the activation buffers in backend memory and two staging sets for
// the step's index metadata, each a backend buffer and its pinned host twin
// (packed, then uploaded with a single upload_async()).
//
// Double-buffered staging: stage() alternates between the two sets, so that
// packing step N+1's metadata never waits for step N's upload (still queued
// when N sampled nothing, or when N is still running on an asynchronous
// device); it waits only for the upload of step N-1, which used the same set
// (its fence, gpu/pinned_buffer.hpp). The device side needs no wait: the
// upload into a set is stream-ordered after the ops of the step that last
// read it. stage_padded() always uses set 0, because a captured graph holds
// its pointers.
//
// It also owns the batch check: stage() validates a ForwardBatch against the
// limits, the model and the KV cache (every index the kernels will follow is
// in range, positions/slots agree with context_lens and block tables) and
// returns an Error naming the first problem before anything is written.
// Dense batches (ForwardBatch::block_tables) are checked block by block and
// their tables uploaded; arena batches (ForwardBatch::arena, table_rows) cost
// O(T + S): each row must be acquired and cover its sequence's context (its
// entries were checked by BlockTableArena::assign), the arena must be synced
// and belong to the same backend; only the S row numbers are uploaded and the
// kernels read the arena's device table through block_table_rows.
//
// Must not outlive its Backend. Not thread-safe: one forward at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/ops.hpp"
#include "gpu/result.hpp"
#include "model/forward_batch.hpp"
#include "model/model_config.hpp"

namespace pagoda::model {

struct RunStateLimits {
  int32_t max_tokens = 0;          // T per step (max_num_batched_tokens)
  int32_t max_seqs = 0;            // S per step
  int32_t max_blocks_per_seq = 0;  // block-table width
  int32_t max_logits_rows = 0;     // R per step
  int32_t max_model_len = 0;       // context_lens and positions stay below this
  int32_t block_size = 0;          // the KV cache's
};

// Pointers (backend memory) to one staged step's metadata.
struct StagedStep {
  const int32_t* token_ids = nullptr;     // [T]
  const int32_t* positions = nullptr;     // [T]
  const int64_t* slot_mapping = nullptr;  // [T]
  const int32_t* logits_rows = nullptr;   // [R]
  gpu::AttentionMetadata meta;            // query_start_loc, context_lens, block tables (+ rows)
  int32_t num_logits_rows = 0;
};

class RunState {
 public:
  static Result<RunState> create(gpu::Backend& backend, const ModelConfig& config,
                                 const RunStateLimits& limits);

  const RunStateLimits& limits() const { return limits_; }
  uint64_t device_bytes() const { return device_bytes_; }

  // Validates `batch` (see above), packs its metadata into the next staging
  // set and uploads it (one upload_async). Arena mode requires batch.arena->sync(backend) since its last
  // assign(); the arena must stay alive and unchanged until the step's ops
  // have been issued.
  Result<StagedStep> stage(gpu::Backend& backend, const ForwardBatch& batch,
                           const gpu::KvCache& cache);
  // The same for a decode step replayed from a graph (model/step_graphs.hpp):
  // requires arena mode, one row per sequence (T == S) and R <= S, with
  // S <= bucket <= padded_limit(). Validates like stage(), then stages the
  // batch padded to `bucket` sequences of one row each (padding: token 0,
  // position 0, slot -1, an empty sequence, logits row 0) at offsets that
  // depend only on the bucket; the step's max_context_len is
  // `context_bound` (>= every context length, <= max_model_len), so that
  // every pointer and scalar of the step depends only on (bucket,
  // context_bound). The returned step has T = S = R = bucket.
  Result<StagedStep> stage_padded(gpu::Backend& backend, const ForwardBatch& batch,
                                  const gpu::KvCache& cache, int32_t bucket,
                                  int32_t context_bound);
  // The largest bucket stage_padded takes: min(max_tokens, max_seqs, max_logits_rows).
  int32_t padded_limit() const;
  // Staging sets (tests): the number, the set the last stage used, and
  // whether a set's host twin has an upload not yet known to be done.
  static constexpr int kStagingSets = 2;
  int last_set() const { return last_set_; }
  bool upload_pending(int set) const { return sets_[set].host.upload_pending(); }

  // Activations, all fp32, rows of one token (T = limits.max_tokens rows).
  float* residual() const { return residual_.as<float>(); }  // [T, H]
  float* delta() const { return delta_.as<float>(); }        // [T, H]: sublayer outputs
  float* normed() const { return normed_.as<float>(); }      // [T, H]
  float* wide() const { return wide_.as<float>(); }          // [T, max((Hq+2Hk)D, 2I)]
  float* mid() const { return mid_.as<float>(); }            // [T, max(Hq D, I)]
  float* gathered() const { return gathered_.as<float>(); }  // [R, H]
  float* logits() const { return logits_.as<float>(); }      // [R, V]
  const gpu::DeviceBuffer& logits_buffer() const { return logits_; }

 private:
  Result<void> check(const gpu::Backend& backend, const ForwardBatch& batch,
                     const gpu::KvCache& cache) const;
  Result<void> check_shape(const ForwardBatch& batch, const gpu::KvCache& cache) const;
  Result<void> check_dense(const ForwardBatch& batch) const;
  Result<void> check_arena(const gpu::Backend& backend, const ForwardBatch& batch,
                           const gpu::KvCache& cache) const;
  Result<void> check_rows(const ForwardBatch& batch) const;
  Result<void> check_context(const ForwardBatch& batch, int32_t s, int64_t table_tokens) const;
  Result<void> check_sequence(const ForwardBatch& batch, int32_t s,
                              const gpu::KvCache& cache) const;
  Result<void> check_sequence_row(const ForwardBatch& batch, int32_t s) const;
  Result<void> check_slots(const ForwardBatch& batch, int32_t s, const int32_t* table) const;

  RunStateLimits limits_;
  int32_t vocab_size_ = 0;
  int32_t num_layers_ = 0, num_kv_heads_ = 0, head_dim_ = 0;
  gpu::DeviceBuffer residual_, delta_, normed_, wide_, mid_, gathered_, logits_;
  // One staging set: the staged metadata and its host twin, same size
  // (pinned: async upload).
  struct StagingSet {
    gpu::DeviceBuffer meta;
    gpu::PinnedBuffer host;
  };
  // The set for the next stage(): waits until its previous upload was read.
  StagingSet& take_set(int set);
  StagingSet sets_[kStagingSets];
  int last_set_ = -1;
  uint64_t device_bytes_ = 0;
};

}  // namespace pagoda::model
