// Executor: runs StepPlans on a model (plain C++; the executor actor wraps it
// on its own thread). It owns the Backend, the LlamaModel, the paged KvCache
// and the state plans are deltas against: a SeqMirror (per sequence its
// token count, last sampled id, history) whose block tables live in the
// BlockTableArena (one row per sequence: the host rows are the only host
// copy, the device rows their upload), plus a history row in device memory
// for sequences whose penalties need it, uploaded incrementally. Per step,
// prepare(): releases, table deltas (O(new blocks)), token counts, forks,
// the flattened ForwardBatch in arena mode; launch(): placeholders filled
// with the ids this executor sampled in the step before, the arena's dirty
// rows up, copy-on-write copies, the rows' sampling parameters and the
// forward's metadata staged; the device part (on the step thread, a
// JobThread): the forward pass, then every sample row on the device with its
// own SamplingRowParams (with the token masks of constrained rows, filled by
// the ConstraintBook on the mask filler's thread while the forward pass
// runs) and their download; finish(): the samples checked and recorded.
// The next step's prepare() may run during the device part ("Pipelined
// steps" below). Host work is O(tokens of the step + new blocks), never
// O(context) or O(pool).
//
// With a draft model (ExecutorOptions::draft_model_path) the executor also
// owns a DraftRunner (actors/draft_runner.hpp: the draft model and its own
// KV pool), which fills the plan's draft slots before the forward
// (executor_drafts.cpp) and follows the plan's releases and truncates.
//
// Steps planned on top of a failed step (plan.depends_on names a step that
// failed or was skipped) are skipped: only their releases are applied, and
// the result says skipped.
//
// Determinism: the model is loaded with a fixed attention partition size (0
// on the CPU: never split; 512 on CUDA: split-K), so a row's attention is
// bitwise independent of the batch; sampling depends only
// on (logits row, params). What remains batch-dependent is the GEMM's
// summation order on some BLAS paths (see model/llama_model.hpp).
//
// Memory: sized at create() for max_num_seqs / max_num_batched_tokens; a step
// allocates nothing except when a plan needs more copy pairs than any step
// before (the buffer then grows and is kept).
// Thread-safety: one caller thread at a time (the executor actor's); the
// device part of a launched step runs on the step thread and touches only
// what launch() staged (see "Pipelined steps"). The accessors are const.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/constraint_book.hpp"
#include "actors/draft_runner.hpp"
#include "actors/job_thread.hpp"
#include "actors/seq_mirror.hpp"
#include "actors/step_plan.hpp"
#include "gpu/backend.hpp"
#include "gpu/kv_cache.hpp"
#include "model/block_table_arena.hpp"
#include "model/forward_batch.hpp"
#include "model/llama_model.hpp"

namespace pagoda::actors {

struct ExecutorOptions {
  std::string model_path;
  gpu::BackendKind backend = gpu::BackendKind::kAuto;
  model::WeightPrecision precision = model::WeightPrecision::kQuantized;
  uint64_t kv_cache_bytes = uint64_t(256) << 20;
  std::optional<gpu::KvDtype> kv_dtype;  // nullopt: model::kv_dtype_for's auto choice
  int32_t num_blocks = 0;  // > 0: exactly this many blocks (kv_cache_bytes ignored)
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  // Sampled rows a step may have beyond one per sequence: speculative
  // drafts (each drafted token's row is sampled too). 0: no speculation.
  int32_t max_speculative_rows = 64;
  int32_t max_model_len = 0;  // 0: the model's context length
  // Draft-model speculation (actors/draft_runner.hpp): the draft model's
  // path (empty: none) and its own KV pool: exactly draft_num_blocks blocks
  // when > 0, else draft_kv_cache_bytes when > 0, else as many blocks as the
  // target's pool (the same token capacity).
  std::string draft_model_path;
  int32_t draft_num_blocks = 0;
  uint64_t draft_kv_cache_bytes = 0;
  size_t cpu_threads = 0;     // CPU backend threads; 0 = the shared pool
  // --load-format dummy / --dummy-dtype: random weights of model_path's config (model/dummy_weights.hpp).
  model::LoadFormat load_format = model::LoadFormat::kAuto;
  model::DummyDtype dummy_dtype = model::DummyDtype::kAuto;
  // CUDA step features, each switchable so that a broken path can be turned
  // off (ignored on the CPU backend): decode steps from CUDA graphs
  // (model/step_graphs.hpp); split-K partition in tokens (0: never split);
  // the tensor-core tiled prefill kernel for long prompts (false: the
  // one-CTA-per-row kernel for every row); metadata uploads with
  // cudaMemcpyAsync from pinned memory (false: synchronous uploads).
  bool cuda_graphs = true;
  int32_t cuda_split_k = 512;
  bool cuda_tiled_prefill = true;
  bool async_uploads = true;
  // The executor actor prepares step N+1 (mirror deltas, flattened batch)
  // while step N's forward and sampling run on the executor's step thread
  // ("Pipelined steps" below); false: each step runs whole on the actor's
  // thread (run()). nullopt: on with CUDA (the pass is queued, so the host
  // work overlaps the device's), off on the CPU, where plan N+1 only comes
  // once N's pass has run and the thread hand-offs measured 3-5% slower
  // steps at 8 and 16 streams on a 2-vCPU guest (docs/benchmarks.md).
  std::optional<bool> prepare_ahead;
  // Tests: wraps the backend made for these options (e.g. to corrupt one
  // row's logits or sampled id). Empty: the backend as made.
  std::function<std::unique_ptr<gpu::Backend>(std::unique_ptr<gpu::Backend>)> wrap_backend;
};

class Executor : private TableStore {
 public:
  // Loads the model and makes the cache. Errors: a bad path or model, an
  // unavailable backend, a budget smaller than one block.
  static Result<std::unique_ptr<Executor>> create(const ExecutorOptions& options);
  ~Executor() override = default;

  const model::ModelConfig& config() const { return model_->config(); }
  int32_t num_blocks() const { return int32_t(cache_.num_blocks()); }
  int32_t block_size() const { return cache_.spec().block_size; }
  int32_t max_model_len() const { return model_->limits().max_model_len; }
  std::string_view backend_name() const { return backend_->name(); }
  gpu::BackendKind backend_kind() const { return backend_->kind(); }
  size_t num_sequences() const { return mirror_->size(); }
  // The draft model's pool (0 without a draft model).
  bool has_draft_model() const { return draft_ != nullptr; }
  int32_t draft_num_blocks() const { return draft_ ? draft_->num_blocks() : 0; }
  int32_t draft_used_blocks() const { return draft_ ? draft_->used_blocks() : 0; }

  // Runs one plan on the calling thread: prepare(), launch() and finish()
  // in one call; requires no step prepared or launched. Requires at most
  // max_num_seqs entries and samples and at most max_num_batched_tokens
  // tokens. An Error (or an exception, caught
  // here and returned as an Error) leaves the cache contents of the plan's
  // slots undefined and dooms the plans that depend on it: they are skipped,
  // never run on stale placeholders. A row that fails alone (its mirror
  // disagrees with the plan, its logits are not finite: its logprob is NaN
  // or infinite, which a NaN or +inf row maximum gives, its sampled id is
  // outside the vocabulary) is dropped from
  // the mirror and named in StepResult::errors (its samples carry token
  // -1); the rest of the step runs. `inject` (tests) runs inside the step,
  // after the mirror took the plan's deltas; it may throw.
  Result<StepResult> run(const StepPlan& plan, const std::function<void()>& inject = {});

  // ---- Pipelined steps (the executor actor; one thread calls all of these) ----
  // A step goes prepare() -> launch() -> its device part (forward and
  // sampling) on the executor's step thread -> finish(). While step N's
  // device part runs, step N+1 may be prepared (can_prepare_ahead): the
  // mirror's deltas (releases, tables, counts, forks) and the flattened
  // batch, with N's sampled ids still awaited in N+1's placeholders; launch()
  // of N+1, after finish() of N, patches them, syncs the arena's device rows,
  // runs the copy-on-write copies (after N's forward: never under it), stages
  // the rows' sampling parameters and the forward's metadata, and starts the
  // device part. The step thread reads only what launch() staged (device
  // buffers, the staged metadata, the cache) and writes the cache, the logits
  // and the downloaded samples; the mirror and the arena's host rows are the
  // caller's thread's alone. Two host slots (tokens, placeholders, batch)
  // alternate between the prepared and the launched step.
  struct LaunchHooks {
    std::function<void()> inject;  // as run()'s, in launch()
    double delay_s = 0.0;          // tests: the device part sleeps first (a slow step)
    // Called on the step thread: its forward issued (as set_progress), and
    // its device part over (the caller then calls finish()). Empty issued:
    // set_progress's function.
    std::function<void(uint64_t step_id)> issued, done;
    bool inline_device = false;  // run the device part in launch(), on the caller's thread
  };
  // A plan that may be prepared while another step runs, or during whose run
  // the next may be prepared: no draft model, no constrained row, no
  // pre-forks, truncates or speculative rows, no post-entry fork of an entry
  // with a placeholder (its child would copy a history still awaiting the id).
  bool plain(const StepPlan& plan) const;
  // A step is launched, none is prepared, both it and `next` are plain, and
  // no sequence the launched step samples starts over (fresh) in `next`.
  bool can_prepare_ahead(const StepPlan& next) const;
  // Takes the next plan. Requires no step prepared, and can_prepare_ahead()
  // when a step is launched. Never fails: an error (or a plan depending on a
  // failed step) is kept for launch(), so replies stay in step order.
  void prepare(StepPlan plan);
  // Starts the prepared step; requires one prepared and none launched. A
  // step that ends here (skipped, failed, no entries) returns its result;
  // otherwise nullopt: its device part runs (on the step thread, or inline),
  // hooks.done is called when it is over, and finish() gives the result.
  std::optional<Result<StepResult>> launch(const LaunchHooks& hooks);
  // The launched step's result (waits for its device part). Errors as run()'s.
  Result<StepResult> finish();
  bool prepares_ahead() const { return prepare_ahead_; }
  bool has_prepared() const { return prepared_ != nullptr; }
  bool has_launched() const { return launched_ != nullptr; }
  uint64_t prepared_step() const { return prepared_ ? prepared_->plan.step_id : 0; }
  uint64_t launched_step() const { return launched_ ? launched_->plan.step_id : 0; }

  // Drops a plan that will not run (an injected or detected fault): applies
  // only its releases and dooms the plans that depend on it. Requires that
  // it was never prepared.
  void discard(const StepPlan& plan);
  // Forgets every sequence (the block manager was replaced: every table is
  // void), every failed step and the prepared step; waits for a launched
  // step's device part and drops it.
  void reset();
  // Device time of the last finished step: forward + sampling, in nanoseconds.
  int64_t last_compute_ns() const { return compute_ns_; }
  // Host preparation of the last launched step on its critical path, before
  // its forward was issued: for a step prepared ahead only launch()'s part
  // (placeholders patched, the table sync, the copies, the rows and the
  // forward's metadata staged), else prepare()'s too; 0 for a step without
  // entries.
  int64_t last_prep_ns() const { return prep_ns_; }
  // prepare()'s time of the last launched step when it was prepared while
  // the step before ran (hidden behind it), else 0.
  int64_t last_ahead_ns() const { return ahead_ns_; }
  // Time the last run() waited for its masks after the forward pass (0: the
  // masks were ready, or none), and the book (tests, benchmarks).
  int64_t last_mask_wait_ns() const { return mask_wait_ns_; }
  const ConstraintBook& constraints() const { return book_; }
  // Called (on the thread that runs the device part) once per step that runs
  // a forward pass, with the plan's step_id, when the pass has been issued
  // and only the step's sampling is left: on the CPU, where the pass runs on
  // that thread, most of the step is over; on CUDA the pass is only queued.
  // The scheduler books the next step then (SchedulerConfig::book_on_progress).
  // Booking earlier on the CPU, during the pass, measured 8-15% slower
  // 16-row decode steps (the booking's threads take cores from the pass).
  // Empty: never called.
  void set_progress(std::function<void(uint64_t step_id)> fn) { progress_ = std::move(fn); }
  // The placeholders of the last launched step and the ids they were filled
  // with (tests: each must be the id sampled last for its sequence).
  const std::vector<Placeholder>& last_placeholders() const { return last_->placeholders; }
  TokenId placeholder_id(size_t i) const {
    const Placeholder& p = last_->placeholders[i];
    return last_->tokens[size_t(p.entry)][size_t(p.index)];
  }

 private:
  // One step between prepare() and finish() (see "Pipelined steps").
  struct Slot {
    StepPlan plan;                              // as sent
    StepPlan rest;                              // plan without its entries that failed alone
    bool has_rest = false;
    std::vector<std::vector<TokenId>> tokens;   // [plan entries]: the ids each computes
    std::vector<Placeholder> placeholders;      // into tokens
    std::vector<uint8_t> bad;                   // [plan entries]: failed alone
    model::ForwardBatch batch;                  // run_plan()'s rows, in arena mode
    StepResult out;                             // its errors so far, then its samples
    std::optional<Error> error;                 // preparation failed: so does launch()
    bool skip = false;                          // it depends on a failed step
    bool ahead = false;                         // prepared while another step ran
    bool plain = false, book = false;           // plain(plan); a constrained row
    bool device = false;                        // launch() started a device part
    int64_t prep_ns = 0;                        // prepare()'s time
    const StepPlan& run_plan() const { return has_rest ? rest : plan; }
  };

  Executor() = default;
  // plain() less the constraint book's part.
  bool plain_shape(const StepPlan& plan) const;
  Slot& free_slot();
  void prepare_slot(Slot& s);
  // rest and batch from plan and bad (again when launch() finds new bad rows).
  void build_rest(Slot& s);
  void build_batch(Slot& s);
  // launch() of a slot prepared ahead: fills its placeholders with the ids
  // the step before recorded; an entry whose sequence that step dropped, or
  // whose id never came, fails alone.
  void resolve(Slot& s);
  // A prepared slot that will not run: its sequences and fork children are
  // dropped (the scheduler recomputes or ends them), its step marked failed.
  void undo(Slot& s);
  // Everything of launch() before the device part; false: nothing to run.
  Result<bool> stage_launch(Slot& s, const LaunchHooks& hooks);
  // The device part: forward, masks, sampling and its download (step thread).
  void device_part(Slot& s, const LaunchHooks& hooks);
  // After the device part: the samples checked and recorded (caller's thread).
  Result<void> finish_slot(Slot& s);
  void unpack(const StepPlan& plan, StepResult& out) const;
  void check_samples(StepResult& out);
  Result<void> run_copies(const StepPlan& plan);
  Result<void> stage_rows(const StepPlan& plan, bool* want_top);
  Result<void> upload_history(MirroredSeq& s);
  size_t extra_ints(SeqId seq, int32_t row_back) const;
  void stage_constraint(SeqId seq, int32_t row_back, gpu::SamplingRowParams& p);
  // Draft model (executor_drafts.cpp): the plan's releases, truncates and
  // fresh entries in the draft pool; then the draft slots of the entries
  // the mirror took, filled (and written into the mirror's history).
  void draft_state(const StepPlan& plan);
  Result<void> fill_drafts(Slot& s);
  // Runs the book's prepare() on the filler thread (started before the forward).
  void start_masks();
  // After the forward: waits for the masks, takes the book's errors.
  void finish_masks(StepResult& out);
  void drop_failed_rows(StepResult& out);
  // The sample kernel and its download into host_out_ (the step thread).
  Result<void> issue_sample(const StepPlan& plan, const float* logits);
  Result<void> ensure(gpu::DeviceBuffer& buf, size_t bytes);
  // Copies bytes into this step's pinned staging set and queues their
  // upload (no wait: the set's fence is waited for when a later step takes
  // the set again).
  Result<void> upload_staged(gpu::DeviceBuffer& dst, size_t offset, const void* src, size_t bytes);
  bool failed(uint64_t step) const;
  void mark_failed(uint64_t step);
  // TableStore: the mirror's tables are the arena's rows (one owner).
  Result<int32_t> acquire() override { return tables_->acquire(); }
  void release(int32_t row) override { tables_->release(row); }
  Result<void> assign(int32_t row, int32_t from, std::span<const BlockId> blocks) override;
  std::span<const BlockId> row(int32_t row) const override { return tables_->host_row(row); }

  // Declared first: destroyed last (the model and the cache use it).
  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<model::LlamaModel> model_;
  gpu::KvCache cache_;
  std::unique_ptr<SeqMirror> mirror_;
  // Structured output (issue 23): the matchers, and the thread that fills
  // their masks while the forward pass runs (made on first use).
  ConstraintBook book_;
  std::unique_ptr<DraftRunner> draft_;  // the draft model, when loaded
  std::vector<DraftRow> draft_rows_;
  std::vector<gpu::SamplingRowParams> draft_params_;
  std::unique_ptr<JobThread> filler_;
  bool book_active_ = false;  // this step involves a constrained sequence
  int64_t mask_wait_ns_ = 0;
  std::optional<model::BlockTableArena> tables_;
  int32_t max_rows_ = 0, history_len_ = 0;
  size_t history_region_ = 0;     // ints of history_dev_ holding histories
  uint32_t history_epoch_ = 1;
  std::vector<int32_t> pairs_, banned_;
  std::vector<TokenId> sampled_;
  std::vector<gpu::SamplingRowParams> rows_;  // the launched step's (read back by unpack)
  std::vector<uint8_t> host_out_;             // the launched step's downloaded samples
  bool want_top_ = false;                     // the launched step's rows ask for top logprobs
  std::vector<uint64_t> failed_;  // recent failed or skipped steps
  int64_t compute_ns_ = 0, prep_ns_ = 0, ahead_ns_ = 0, step_start_ns_ = 0;
  std::function<void(uint64_t)> progress_;
  bool prepare_ahead_ = true;
  Slot slots_[2];
  Slot* prepared_ = nullptr;  // prepared, not launched
  Slot* launched_ = nullptr;  // launched, not finished
  Slot* last_ = &slots_[0];   // the last launched
  // The launched step's forward, staged by launch(), and its device part's
  // outcome (written on the step thread, read after its wait()).
  model::LlamaModel::StagedForward staged_forward_;
  std::optional<Error> device_error_;
  gpu::DeviceBuffer pairs_dev_, history_dev_, rows_dev_, out_dev_;
  // Upload sources, double-buffered like RunState's metadata: step k stages
  // into staging_[k % 2], so staging a step never waits for the uploads of
  // the step before (only for those of the step before that, its fence).
  gpu::PinnedBuffer staging_[2];
  int staging_set_ = 0;  // this step's
  size_t staged_ = 0;    // bytes of staging_[staging_set_] used this step
  // Declared last: destroyed first (joined before anything its job uses).
  std::unique_ptr<JobThread> step_thread_;
};

}  // namespace pagoda::actors
