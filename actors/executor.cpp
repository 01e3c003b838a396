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
  if (plan.depends_on != 0 && failed(plan.depends_on)) {
    discard(plan);  // its releases still happen; it is marked failed for its dependents
    StepResult r;
    r.step_id = plan.step_id;
    r.skipped = true;
    return r;
  }
  auto guarded = [&]() -> Result<StepResult> {
    try {
      return run_step(plan, inject);
    } catch (const std::exception& e) {
      return make_error(std::string("executor: ") + e.what());
    } catch (...) {
      return make_error("executor: an unknown exception in step " + std::to_string(plan.step_id));
    }
  };
  auto r = guarded();
  if (!r) mark_failed(plan.step_id);
  return r;
}

void Executor::discard(const StepPlan& plan) {
  if (draft_) for (SeqId s : plan.releases) draft_->release(s);
  mirror_->release(plan);
  book_.release(plan);
  mark_failed(plan.step_id);
}

void Executor::reset() {
  mirror_->clear();
  if (draft_) draft_->clear();
  book_.clear();
  failed_.clear();
}

Result<StepResult> Executor::run_step(const StepPlan& plan, const std::function<void()>& inject) {
  compute_ns_ = prep_ns_ = 0;
  step_start_ns_ = steady_now_ns();
  // The set of the step before last: a step that sampled nothing did not
  // synchronize, so its staged uploads may still be queued.
  staging_set_ ^= 1;
  staging_[staging_set_].wait_writable();
  staged_ = 0;
  if (int32_t(plan.samples.size()) > max_rows_ || int32_t(plan.entries.size()) > max_rows_) {
    return make_error("executor: the plan has more rows than max_num_seqs + max_speculative_rows");
  }
  StepResult out;
  out.step_id = plan.step_id;
  if (draft_) draft_state(plan);
  mirror_->begin(plan, tokens_, bad_, out.errors, &placeholders_);
  if (auto ok = fill_drafts(plan, out); !ok) return ok.error();
  mask_wait_ns_ = 0;
  book_active_ = book_.involves(plan);
  if (book_active_) book_.stage(plan, tokens_, bad_);
  if (inject) inject();
  if (auto ok = tables_->sync(*backend_); !ok) return ok.error();
  if (auto ok = run_copies(plan); !ok) return ok.error();
  const bool any_bad = std::find(bad_.begin(), bad_.end(), uint8_t(1)) != bad_.end();
  if (auto ok = any_bad ? compute_rest(plan, out) : compute(plan, out); !ok) return ok.error();
  return out;
}

Result<void> Executor::compute(const StepPlan& plan, StepResult& out) {
  if (plan.entries.empty()) {
    if (book_active_) book_.prepare();  // the releases
    return {};
  }
  build_batch(plan);
  const int64_t t0 = steady_now_ns();
  prep_ns_ = t0 - step_start_ns_;
  // The masks of this step's rows are filled while the forward pass runs;
  // the guard waits for them on every way out (an error, an exception).
  if (book_active_) start_masks();
  struct Join {
    MaskFiller* f;
    ~Join() { if (f) f->wait(); }
  } join{book_active_ ? filler_.get() : nullptr};
  auto logits = model_->forward_device(batch_, cache_);
  if (!logits) return logits.error();
  // On the CPU the pass has run; on CUDA it is queued. Either way what is
  // left of the step is its sampling (set_progress).
  if (progress_) progress_(plan.step_id);
  compute_ns_ = steady_now_ns() - t0;
  if (join.f != nullptr) {
    join.f = nullptr;
    finish_masks(out);
  }
  mirror_->forks(plan, out.errors);
  if (plan.samples.empty()) return {};
  const int64_t t1 = steady_now_ns();
  if (auto ok = sample(plan, *logits, out); !ok) return ok;
  compute_ns_ += steady_now_ns() - t1;
  check_samples(out);
  if (book_active_) drop_failed_rows(out);
  sampled_.clear();
  for (const SampleOutput& s : out.samples) sampled_.push_back(s.token);
  mirror_->record(plan, sampled_);
  if (book_active_) book_.record(plan, sampled_);
  for (const SeqError& e : out.errors) {  // later plans naming it fail alone
    mirror_->erase(e.seq);
    book_.erase(e.seq);
  }
  return {};
}

// Rare (a row failed in begin()): copies the plan without the bad entries.
Result<void> Executor::compute_rest(const StepPlan& plan, StepResult& out) {
  StepPlan rest;
  rest.step_id = plan.step_id;
  rest.forks = plan.forks;  // a fork of a dropped parent fails alone
  std::vector<int32_t> entry_at(plan.entries.size(), -1);
  size_t kept = 0;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    if (bad_[i]) continue;
    entry_at[i] = int32_t(rest.entries.size());
    rest.entries.push_back(plan.entries[i]);
    if (kept != i) tokens_[kept] = std::move(tokens_[i]);  // never a self-move
    ++kept;
  }
  tokens_.resize(kept);
  for (const PlanSample& s : plan.samples) {
    if (entry_at[size_t(s.entry)] < 0) continue;
    rest.samples.push_back(s);
    rest.samples.back().entry = entry_at[size_t(s.entry)];
  }
  StepResult part;
  if (auto ok = compute(rest, part); !ok) return ok;
  size_t next = 0;
  for (const PlanSample& s : plan.samples) {
    if (entry_at[size_t(s.entry)] >= 0) {
      out.samples.push_back(std::move(part.samples[next++]));
    } else {
      SampleOutput failed;
      failed.seq = s.seq;
      out.samples.push_back(std::move(failed));
    }
  }
  out.errors.insert(out.errors.end(), part.errors.begin(), part.errors.end());
  return {};
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

void Executor::build_batch(const StepPlan& plan) {
  batch_.clear(1);
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const PlanEntry& e = plan.entries[i];
    const MirroredSeq* s = mirror_->find(e.seq);
    batch_.add_sequence_row(tokens_[i], e.num_cached, s == nullptr ? -1 : s->row, *tables_,
                            block_size(), /*want_logits=*/false);
  }
  for (const PlanSample& s : plan.samples) {
    batch_.logits_rows.push_back(batch_.query_start_loc[size_t(s.entry) + 1] - 1 - s.row_back);
  }
}

void Executor::start_masks() {
  if (!filler_) filler_ = std::make_unique<MaskFiller>();
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
