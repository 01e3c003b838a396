#include "actors/executor.hpp"

#include <algorithm>
#include <cstring>

namespace pagoda::actors {
namespace {

// out_dev_ layout for R rows: tokens [R] | logprobs [R] | top tokens [R, K] | top logprobs [R, K].
constexpr int32_t kTop = gpu::kMaxTopLogprobs;
size_t logprobs_at(int32_t r) { return size_t(r) * 4; }
size_t top_tokens_at(int32_t r) { return size_t(r) * 8; }
size_t top_logprobs_at(int32_t r) { return size_t(r) * (8 + 4 * kTop); }
size_t out_bytes(int32_t r) { return size_t(r) * (8 + 8 * kTop); }

}  // namespace

Result<std::unique_ptr<Executor>> Executor::create(const ExecutorOptions& o) {
  std::unique_ptr<Executor> ex(new Executor());
  gpu::BackendOptions bo;
  bo.cpu_threads = o.cpu_threads;
  auto backend = gpu::make_backend(o.backend, bo);
  if (!backend) return backend.error();
  ex->backend_ = std::move(backend).value();
  model::LoadOptions lo;
  lo.precision = o.precision;
  lo.max_num_batched_tokens = o.max_num_batched_tokens;
  lo.max_num_seqs = o.max_num_seqs;
  lo.max_logits_rows = o.max_num_seqs;
  lo.max_model_len = o.max_model_len;
  lo.block_size = o.block_size;
  lo.attention_partition_size = 0;  // bitwise batch-independent attention
  auto m = model::LlamaModel::load(o.model_path, *ex->backend_, lo);
  if (!m) return m.error();
  ex->model_ = std::move(m).value();
  const gpu::KvCacheSpec spec = ex->model_->kv_cache_spec();
  auto cache = o.num_blocks > 0 ? ex->backend_->create_kv_cache(spec, o.num_blocks)
                                : ex->backend_->create_kv_cache_for_budget(spec, o.kv_cache_bytes);
  if (!cache) return cache.error();
  ex->cache_ = std::move(cache).value();
  ex->max_rows_ = o.max_num_seqs;
  if (auto ok = ex->ensure(ex->rows_dev_, size_t(o.max_num_seqs) * sizeof(gpu::SamplingRowParams));
      !ok) {
    return ok.error();
  }
  if (auto ok = ex->ensure(ex->out_dev_, out_bytes(o.max_num_seqs)); !ok) return ok.error();
  if (auto ok = ex->ensure(ex->history_dev_, 4096 * sizeof(int32_t)); !ok) return ok.error();
  ex->host_out_.resize(out_bytes(o.max_num_seqs));
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

Result<StepResult> Executor::run(const StepPlan& plan) {
  if (int32_t(plan.samples.size()) > max_rows_) {
    return make_error("executor: the plan samples more rows than max_num_seqs");
  }
  if (auto ok = run_copies(plan); !ok) return ok.error();
  StepResult out;
  out.step_id = plan.step_id;
  if (plan.entries.empty()) return out;
  build_batch(plan);
  auto logits = model_->forward_device(batch_, cache_);
  if (!logits) return logits.error();
  if (plan.samples.empty()) return out;
  if (auto ok = sample(plan, *logits, out); !ok) return ok.error();
  return out;
}

Result<void> Executor::run_copies(const StepPlan& plan) {
  if (plan.copies.empty()) return {};
  pairs_.clear();
  for (const BlockCopy& c : plan.copies) {
    pairs_.push_back(c.src);
    pairs_.push_back(c.dst);
  }
  const size_t bytes = pairs_.size() * sizeof(int32_t);
  if (auto ok = ensure(pairs_dev_, bytes); !ok) return ok;
  if (auto ok = backend_->upload(pairs_dev_, 0, pairs_.data(), bytes); !ok) return ok;
  backend_->copy_blocks(
      cache_.copy_blocks_params(pairs_dev_.as<const int32_t>(), int32_t(plan.copies.size())));
  return {};
}

void Executor::build_batch(const StepPlan& plan) {
  size_t width = 1;
  for (const PlanEntry& e : plan.entries) width = std::max(width, e.block_table.size());
  batch_.clear(int32_t(width));
  for (const PlanEntry& e : plan.entries) {
    batch_.add_sequence(e.tokens, e.num_cached, e.block_table, block_size(), /*want_logits=*/false);
  }
  for (const PlanSample& s : plan.samples) {
    batch_.logits_rows.push_back(batch_.query_start_loc[size_t(s.entry) + 1] - 1);
  }
}

// Fills rows_ / history_ from the plan's samples and uploads them.
Result<void> Executor::stage_rows(const StepPlan& plan, bool* want_top) {
  rows_.clear();
  history_.clear();
  *want_top = false;
  for (const PlanSample& s : plan.samples) {
    gpu::SamplingRowParams p = s.params;
    p.prompt_offset = int64_t(history_.size());
    p.prompt_len = s.history.empty() ? 0 : s.prompt_len;
    p.output_offset = p.prompt_offset + p.prompt_len;
    p.output_len = s.history.empty() ? 0 : int32_t(s.history.size()) - s.prompt_len;
    history_.insert(history_.end(), s.history.begin(), s.history.end());
    p.banned_offset = int64_t(history_.size());
    p.banned_len = int32_t(s.banned.size());
    history_.insert(history_.end(), s.banned.begin(), s.banned.end());
    *want_top = *want_top || p.num_top_logprobs > 0;
    rows_.push_back(p);
  }
  if (auto ok = ensure(history_dev_, std::max<size_t>(history_.size(), 1) * 4); !ok) return ok;
  if (!history_.empty()) {
    if (auto ok = backend_->upload(history_dev_, 0, history_.data(), history_.size() * 4); !ok) return ok;
  }
  return backend_->upload(rows_dev_, 0, rows_.data(), rows_.size() * sizeof rows_[0]);
}

Result<void> Executor::sample(const StepPlan& plan, const float* logits, StepResult& out) {
  const int32_t R = int32_t(plan.samples.size());
  bool want_top = false;
  if (auto ok = stage_rows(plan, &want_top); !ok) return ok;
  uint8_t* o = out_dev_.as<uint8_t>();
  gpu::SamplingParams sp;
  sp.logits = logits;
  sp.rows = rows_dev_.as<const gpu::SamplingRowParams>();
  sp.history = history_dev_.as<const int32_t>();
  sp.num_rows = R;
  sp.vocab_size = config().vocab_size;
  sp.tokens = reinterpret_cast<int32_t*>(o);
  sp.logprobs = reinterpret_cast<float*>(o + logprobs_at(max_rows_));
  sp.top_tokens = reinterpret_cast<int32_t*>(o + top_tokens_at(max_rows_));
  sp.top_logprobs = reinterpret_cast<float*>(o + top_logprobs_at(max_rows_));
  sp.top_stride = kTop;
  backend_->sample(sp);
  const size_t bytes = want_top ? out_bytes(max_rows_) : top_tokens_at(max_rows_);
  if (auto ok = backend_->download(out_dev_, 0, host_out_.data(), bytes); !ok) return ok;
  const uint8_t* h = host_out_.data();
  for (int32_t r = 0; r < R; ++r) {
    SampleOutput so;
    so.seq = plan.samples[size_t(r)].seq;
    std::memcpy(&so.token, h + size_t(r) * 4, 4);
    std::memcpy(&so.logprob, h + logprobs_at(max_rows_) + size_t(r) * 4, 4);
    const size_t k = size_t(rows_[size_t(r)].num_top_logprobs);
    so.top_tokens.resize(k);
    so.top_logprobs.resize(k);
    if (k > 0) {
      const size_t at = size_t(r) * kTop * 4;
      std::memcpy(so.top_tokens.data(), h + top_tokens_at(max_rows_) + at, k * 4);
      std::memcpy(so.top_logprobs.data(), h + top_logprobs_at(max_rows_) + at, k * 4);
    }
    out.samples.push_back(std::move(so));
  }
  return {};
}

}  // namespace pagoda::actors
