#include "actors/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "actors/steady_ns.hpp"

namespace pagoda::actors {
namespace {

// out_dev_: tokens, logprobs, top tokens, top logprobs for R rows (executor_sampling.cpp).
size_t out_bytes(int32_t r) { return size_t(r) * (8 + 8 * gpu::kMaxTopLogprobs); }
constexpr size_t kFailedKept = 16;

}  // namespace

Result<std::unique_ptr<Executor>> Executor::create(const ExecutorOptions& o) {
  std::unique_ptr<Executor> ex(new Executor());
  gpu::BackendOptions bo;
  bo.cpu_threads = o.cpu_threads;
  bo.async_uploads = o.async_uploads;
  bo.tiled_prefill = o.cuda_tiled_prefill;
  auto backend = gpu::make_backend(o.backend, bo);
  if (!backend) return backend.error();
  ex->backend_ = std::move(backend).value();
  if (o.wrap_backend) ex->backend_ = o.wrap_backend(std::move(ex->backend_));
  model::LoadOptions lo;
  lo.precision = o.precision;
  lo.kv_dtype = o.kv_dtype;
  lo.max_num_batched_tokens = o.max_num_batched_tokens;
  lo.max_num_seqs = o.max_num_seqs;
  lo.max_logits_rows = o.max_num_seqs + std::max(o.max_speculative_rows, 0);
  lo.max_model_len = o.max_model_len;
  lo.block_size = o.block_size;
  lo.load_format = o.load_format;  // --load-format dummy (model/dummy_weights.hpp)
  lo.dummy_dtype = o.dummy_dtype;
  // A fixed partition keeps each row's attention independent of the rest of
  // the batch: never split on the CPU; split-K with cuda_split_k-token
  // partitions on CUDA (default 512: long contexts fill the device; the
  // row's split depends only on its own length).
  const bool cuda = ex->backend_->kind() == gpu::BackendKind::kCuda;
  // The environment may switch features off (gpu::step_feature_env).
  const gpu::StepFeatureEnv env = gpu::step_feature_env();
  const int32_t split_k = env.split_k >= 0 ? env.split_k : o.cuda_split_k;
  lo.attention_partition_size = cuda ? std::max(split_k, 0) : 0;
  lo.step_graphs = cuda && o.cuda_graphs && !env.graphs_off;
  auto m = model::LlamaModel::load(o.model_path, *ex->backend_, lo);
  if (!m) return m.error();
  ex->model_ = std::move(m).value();
  const gpu::KvCacheSpec spec = ex->model_->kv_cache_spec();
  auto cache = o.num_blocks > 0 ? ex->backend_->create_kv_cache(spec, o.num_blocks)
                                : ex->backend_->create_kv_cache_for_budget(spec, o.kv_cache_bytes);
  if (!cache) return cache.error();
  ex->cache_ = std::move(cache).value();
  ex->prepare_ahead_ = o.prepare_ahead.value_or(cuda);
  ex->max_rows_ = o.max_num_seqs + std::max(o.max_speculative_rows, 0);
  // Sequences the executor may hold at once: the running ones plus those a
  // later plan releases (one step behind), plus forks of the newest plan.
  const int32_t rows = 2 * o.max_num_seqs + 8;
  const int32_t width = (ex->max_model_len() + ex->block_size() - 1) / ex->block_size();
  auto tables = model::BlockTableArena::create(*ex->backend_, rows, width, ex->num_blocks());
  if (!tables) return tables.error();
  ex->tables_.emplace(std::move(tables).value());
  ex->history_len_ = ex->max_model_len();
  if (!o.draft_model_path.empty()) {
    DraftRunnerOptions d;
    d.model_path = o.draft_model_path;
    d.target_path = o.model_path;
    d.num_blocks = o.draft_num_blocks;
    d.kv_cache_bytes = o.draft_kv_cache_bytes;
    d.target_blocks = ex->num_blocks();
    d.max_num_seqs = o.max_num_seqs;
    d.max_num_batched_tokens = o.max_num_batched_tokens;
    d.max_model_len = ex->max_model_len();
    d.load = lo;
    auto draft = DraftRunner::create(d, *ex->backend_, ex->config());
    if (!draft) return draft.error();
    ex->draft_ = std::move(draft).value();
  }
  ex->mirror_ = std::make_unique<SeqMirror>(ex->num_blocks(), ex->block_size(),
                                            static_cast<TableStore*>(ex.get()));
  if (auto ok = ex->ensure(ex->rows_dev_, size_t(ex->max_rows_) * sizeof(gpu::SamplingRowParams));
      !ok) {
    return ok.error();
  }
  if (auto ok = ex->ensure(ex->out_dev_, out_bytes(ex->max_rows_)); !ok) return ok.error();
  ex->host_out_.resize(out_bytes(ex->max_rows_));
  return ex;
}

Result<void> Executor::ensure(gpu::DeviceBuffer& buf, size_t bytes) {
  if (buf.size() >= bytes) return {};
  const size_t grown = std::max(bytes, buf.size() * 2);
  buf = gpu::DeviceBuffer();  // free the old one first
  auto b = backend_->allocate(grown);
  if (!b) return b.error();
  buf = std::move(b).value();
  return {};
}

Result<void> Executor::upload_staged(gpu::DeviceBuffer& dst, size_t offset, const void* src,
                                     size_t bytes) {
  if (bytes == 0) return {};
  gpu::PinnedBuffer& set = staging_[staging_set_];
  const size_t at = (staged_ + 63) / 64 * 64;
  if (at + bytes > set.size()) {
    // Grows (rarely): what is queued from the old buffer must land first.
    backend_->synchronize();
    auto b = backend_->allocate_pinned(std::max(set.size() * 2, at + bytes + (64 << 10)));
    if (!b) return b.error();
    set = std::move(b).value();
    staged_ = 0;
    return upload_staged(dst, offset, src, bytes);
  }
  std::memcpy(set.as<uint8_t>() + at, src, bytes);
  staged_ = at + bytes;
  auto up = backend_->upload_async(dst, offset, set.as<uint8_t>() + at, bytes);
  set.uploads_issued();
  return up;
}

bool Executor::failed(uint64_t step) const {
  return std::find(failed_.begin(), failed_.end(), step) != failed_.end();
}

void Executor::mark_failed(uint64_t step) {
  failed_.push_back(step);
  if (failed_.size() > kFailedKept) failed_.erase(failed_.begin());
}

Result<StepResult> Executor::run(const StepPlan& plan, const std::function<void()>& inject) {
  if (prepared_ != nullptr || launched_ != nullptr) {
    return make_error("executor: run() while a step is prepared or launched");
  }
  prepare(plan);
  LaunchHooks hooks;
  hooks.inject = inject;
  hooks.inline_device = true;
  if (auto ended = launch(hooks)) return std::move(*ended);
  return finish();
}

void Executor::discard(const StepPlan& plan) {
  if (draft_) for (SeqId s : plan.releases) draft_->release(s);
  mirror_->release(plan);
  book_.release(plan);
  mark_failed(plan.step_id);
}

void Executor::reset() {
  if (launched_ != nullptr) {
    if (step_thread_) step_thread_->wait();
    launched_ = nullptr;
    device_error_.reset();
  }
  prepared_ = nullptr;
  mirror_->clear();
  if (draft_) draft_->clear();
  book_.clear();
  failed_.clear();
}

// A sampled id outside the vocabulary or a non-finite logprob fails that row
// alone. The logprob is the raw logit minus the row's log-sum-exp, so it is
// NaN or infinite when the row's largest logit is (a NaN hidden state makes
// the whole row NaN; an overflow gives +inf). A lone NaN among finite logits
// is not seen: the CPU kernel's SIMD sum of exps skips it.
void Executor::check_samples(StepResult& out) {
  const int32_t vocab = config().vocab_size;
  for (SampleOutput& s : out.samples) {
    std::string what;
    if (s.token < 0 || s.token >= vocab) {
      what = "sampled id " + std::to_string(s.token) + ", outside the vocabulary";
    } else if (!std::isfinite(s.logprob)) {
      what = "has non-finite logits";
    }
    if (what.empty()) continue;
    out.errors.push_back({s.seq, "executor: sequence " + std::to_string(s.seq) + " " + what});
    s.token = -1;
  }
}

Result<void> Executor::run_copies(const StepPlan& plan) {
  if (plan.copies.empty()) return {};
  pairs_.clear();
  for (const BlockCopy& c : plan.copies) {
    if (c.src < 0 || c.src >= num_blocks() || c.dst < 0 || c.dst >= num_blocks()) {
      return make_error("executor: a block copy names a block outside the cache");
    }
    pairs_.push_back(c.src);
    pairs_.push_back(c.dst);
  }
  const size_t bytes = pairs_.size() * sizeof(int32_t);
  if (auto ok = ensure(pairs_dev_, bytes); !ok) return ok;
  if (auto ok = upload_staged(pairs_dev_, 0, pairs_.data(), bytes); !ok) return ok;
  backend_->copy_blocks(
      cache_.copy_blocks_params(pairs_dev_.as<const int32_t>(), int32_t(plan.copies.size())));
  return {};
}

void Executor::start_masks() {
  if (!filler_) filler_ = std::make_unique<JobThread>();
  filler_->start([this] { book_.prepare(); });
}

void Executor::finish_masks(StepResult& out) {
  const int64_t w0 = steady_now_ns();
  filler_->wait();
  mask_wait_ns_ = steady_now_ns() - w0;
  for (const SeqError& e : book_.errors()) out.errors.push_back(e);
}

// A row whose constraint failed (ConstraintBook::errors) fails alone.
void Executor::drop_failed_rows(StepResult& out) {
  for (const SeqError& e : book_.errors()) {
    for (SampleOutput& so : out.samples) {
      if (so.seq == e.seq) so.token = -1;
    }
  }
}

// ---- TableStore: the mirror's tables in the arena -----------------------------

Result<void> Executor::assign(int32_t row, int32_t from, std::span<const BlockId> blocks) {
  if (auto ok = tables_->assign(row, from, blocks); !ok) return ok;
  tables_->truncate(row, from + int32_t(blocks.size()));  // a delta replaces the tail
  return {};
}

}  // namespace pagoda::actors
