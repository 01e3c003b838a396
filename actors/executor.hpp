// Executor: runs StepPlans on a model (plain C++; the executor actor wraps it
// on its own thread). It owns the Backend, the LlamaModel and the paged
// KvCache, and per step: runs the plan's copy-on-write block copies, builds
// the flattened ForwardBatch (one logits row per plan sample: the last row of
// its entry), runs forward_device and samples every row on the device with
// its own SamplingRowParams (seed, step), downloading only tokens, logprobs
// and, when asked, the top candidates.
//
// Determinism: the model is loaded with attention_partition_size = 0, so a
// row's attention is bitwise independent of the batch; sampling depends only
// on (logits row, params). What remains batch-dependent is the GEMM's
// summation order on some BLAS paths (see model/llama_model.hpp).
//
// Memory: sized at create() for max_num_seqs / max_num_batched_tokens; a step
// allocates nothing except when a plan needs more copy pairs or penalty
// history than any step before (the buffers then grow and are kept).
// Thread-safety: one thread at a time; the accessors are const and safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/step_plan.hpp"
#include "gpu/backend.hpp"
#include "gpu/kv_cache.hpp"
#include "model/forward_batch.hpp"
#include "model/llama_model.hpp"

namespace pagoda::actors {

struct ExecutorOptions {
  std::string model_path;
  gpu::BackendKind backend = gpu::BackendKind::kAuto;
  model::WeightPrecision precision = model::WeightPrecision::kQuantized;
  uint64_t kv_cache_bytes = uint64_t(256) << 20;
  int32_t num_blocks = 0;  // > 0: exactly this many blocks (kv_cache_bytes ignored)
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 0;  // 0: the model's context length
  size_t cpu_threads = 0;     // CPU backend threads; 0 = the shared pool
};

class Executor {
 public:
  // Loads the model and makes the cache. Errors: a bad path or model, an
  // unavailable backend, a budget smaller than one block.
  static Result<std::unique_ptr<Executor>> create(const ExecutorOptions& options);

  const model::ModelConfig& config() const { return model_->config(); }
  int32_t num_blocks() const { return int32_t(cache_.num_blocks()); }
  int32_t block_size() const { return cache_.spec().block_size; }
  int32_t max_model_len() const { return model_->limits().max_model_len; }
  std::string_view backend_name() const { return backend_->name(); }

  // Runs one plan (entries with tokens, slots given by the BlockManager).
  // Requires at most max_num_seqs entries and samples and at most
  // max_num_batched_tokens tokens. An Error leaves the cache contents of the
  // plan's slots undefined.
  Result<StepResult> run(const StepPlan& plan);

 private:
  Executor() = default;
  Result<void> run_copies(const StepPlan& plan);
  void build_batch(const StepPlan& plan);
  Result<void> stage_rows(const StepPlan& plan, bool* want_top);
  Result<void> sample(const StepPlan& plan, const float* logits, StepResult& out);
  Result<void> ensure(gpu::DeviceBuffer& buf, size_t bytes);

  // Declared first: destroyed last (the model and the cache use it).
  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<model::LlamaModel> model_;
  gpu::KvCache cache_;
  int32_t max_rows_ = 0;
  model::ForwardBatch batch_;
  std::vector<int32_t> pairs_, history_;
  std::vector<gpu::SamplingRowParams> rows_;
  std::vector<uint8_t> host_out_;
  gpu::DeviceBuffer pairs_dev_, history_dev_, rows_dev_, out_dev_;
};

}  // namespace pagoda::actors
