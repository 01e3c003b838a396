// Executor, sampling: the rows' parameters, the penalty histories (one
// device row per sequence, uploaded incrementally: O(new ids) per step) and
// the banned ids, then one sample call and one download (see executor.hpp).
#include <algorithm>
#include <cstring>

#include "actors/executor.hpp"

namespace pagoda::actors {
namespace {

// out_dev_ layout for R rows: tokens [R] | logprobs [R] | top tokens [R, K] | top logprobs [R, K].
constexpr int32_t kTop = gpu::kMaxTopLogprobs;
size_t logprobs_at(int32_t r) { return size_t(r) * 4; }
size_t top_tokens_at(int32_t r) { return size_t(r) * 8; }
size_t top_logprobs_at(int32_t r) { return size_t(r) * (8 + 4 * kTop); }
size_t out_bytes(int32_t r) { return size_t(r) * (8 + 8 * kTop); }

}  // namespace

// history_dev_: [rows, history_len] persistent histories (once any row needs
// them), then the step's banned ids. Growing it moves every history (they
// are uploaded again, lazily: history_epoch_).
Result<void> Executor::stage_rows(const StepPlan& plan, bool* want_top) {
  rows_.clear();
  banned_.clear();
  *want_top = false;
  bool need_history = history_region_ > 0;
  size_t banned = 0;
  for (const PlanSample& s : plan.samples) {
    need_history = need_history || s.use_history;
    banned += s.banned.size() + extra_ints(s.seq, s.row_back);
  }
  const size_t region = need_history ? size_t(tables_->rows()) * size_t(history_len_) : 0;
  if (region != history_region_ || history_dev_.size() < (region + std::max<size_t>(banned, 1)) * 4) {
    const size_t cap = region + std::max<size_t>(banned * 2, 1024);
    history_dev_ = gpu::DeviceBuffer();
    auto b = backend_->allocate(cap * 4);
    if (!b) return b.error();
    history_dev_ = std::move(b).value();
    history_region_ = region;
    ++history_epoch_;
  }
  for (const PlanSample& s : plan.samples) {
    gpu::SamplingRowParams p = s.params;
    p.prompt_offset = p.output_offset = 0;
    p.prompt_len = p.output_len = 0;
    MirroredSeq* m = mirror_->find(s.seq);
    if (s.use_history && m != nullptr && m->history_valid && m->row >= 0) {
      MirroredSeq& ms = *m;
      if (auto ok = upload_history(ms); !ok) return ok;
      const int32_t len = int32_t(ms.history.size());
      p.prompt_offset = int64_t(ms.row) * history_len_;
      p.prompt_len = std::min(ms.prompt_len, len);
      p.output_offset = p.prompt_offset + p.prompt_len;
      p.output_len = len - p.prompt_len;
    }
    p.banned_offset = int64_t(history_region_ + banned_.size());
    p.banned_len = int32_t(s.banned.size());
    banned_.insert(banned_.end(), s.banned.begin(), s.banned.end());
    if (book_active_) stage_constraint(s.seq, s.row_back, p);
    *want_top = *want_top || p.num_top_logprobs > 0;
    rows_.push_back(p);
  }
  if (!banned_.empty()) {
    if (auto ok = upload_staged(history_dev_, history_region_ * 4, banned_.data(), banned_.size() * 4);
        !ok) {
      return ok;
    }
  }
  return upload_staged(rows_dev_, 0, rows_.data(), rows_.size() * sizeof rows_[0]);
}

// Ints a row's bias pairs and mask take in the banned region (issue 23).
size_t Executor::extra_ints(SeqId seq, int32_t row_back) const {
  if (!book_active_) return 0;
  const RowConstraint rc = book_.row(seq, row_back);
  size_t n = rc.bias == nullptr ? 0 : rc.bias->size() * 2;
  if (rc.mask >= 0) n += size_t(book_.mask_words());
  return n;
}

// Appends the row's logit biases (id, float bits) and token mask after the
// banned ids and points p at them.
void Executor::stage_constraint(SeqId seq, int32_t row_back, gpu::SamplingRowParams& p) {
  const RowConstraint rc = book_.row(seq, row_back);
  if (rc.bias != nullptr && !rc.bias->empty()) {
    p.bias_offset = int64_t(history_region_ + banned_.size());
    p.bias_len = int32_t(rc.bias->size());
    for (const auto& [id, b] : *rc.bias) {
      int32_t bits;
      std::memcpy(&bits, &b, sizeof bits);
      banned_.push_back(id);
      banned_.push_back(bits);
    }
  }
  if (rc.mask >= 0) {
    const int32_t w = book_.mask_words();
    p.mask_offset = int64_t(history_region_ + banned_.size());
    p.mask_words = w;
    const uint32_t* m = book_.mask(rc.mask);
    const size_t at = banned_.size();
    banned_.resize(at + size_t(w));
    std::memcpy(banned_.data() + at, m, size_t(w) * sizeof(uint32_t));
  }
}

// Uploads the ids of s's history that its device row lacks.
Result<void> Executor::upload_history(MirroredSeq& s) {
  if (s.history_epoch != history_epoch_) {
    s.history_uploaded = 0;
    s.history_epoch = history_epoch_;
  }
  const size_t n = s.history.size();
  if (n > size_t(history_len_)) return make_error("executor: a history is longer than max_model_len");
  if (size_t(s.history_uploaded) >= n) return {};
  const size_t at = (size_t(s.row) * size_t(history_len_) + size_t(s.history_uploaded)) * 4;
  if (auto ok = upload_staged(history_dev_, at, s.history.data() + s.history_uploaded,
                              (n - size_t(s.history_uploaded)) * 4);
      !ok) {
    return ok;
  }
  s.history_uploaded = int32_t(n);
  return {};
}

// On the step thread: rows_dev_ and history_dev_ were staged by stage_rows().
Result<void> Executor::issue_sample(const StepPlan& plan, const float* logits) {
  uint8_t* o = out_dev_.as<uint8_t>();
  gpu::SamplingParams sp;
  sp.logits = logits;
  sp.rows = rows_dev_.as<const gpu::SamplingRowParams>();
  sp.history = history_dev_.as<const int32_t>();
  sp.num_rows = int32_t(plan.samples.size());
  sp.vocab_size = config().vocab_size;
  sp.tokens = reinterpret_cast<int32_t*>(o);
  sp.logprobs = reinterpret_cast<float*>(o + logprobs_at(max_rows_));
  sp.top_tokens = reinterpret_cast<int32_t*>(o + top_tokens_at(max_rows_));
  sp.top_logprobs = reinterpret_cast<float*>(o + top_logprobs_at(max_rows_));
  sp.top_stride = kTop;
  backend_->sample(sp);
  const size_t bytes = want_top_ ? out_bytes(max_rows_) : top_tokens_at(max_rows_);
  return backend_->download(out_dev_, 0, host_out_.data(), bytes);
}

// The downloaded rows as plan.samples' outputs (after the device part).
void Executor::unpack(const StepPlan& plan, StepResult& out) const {
  const uint8_t* h = host_out_.data();
  for (size_t r = 0; r < plan.samples.size(); ++r) {
    SampleOutput so;
    so.seq = plan.samples[r].seq;
    std::memcpy(&so.token, h + r * 4, 4);
    std::memcpy(&so.logprob, h + logprobs_at(max_rows_) + r * 4, 4);
    const size_t k = size_t(rows_[r].num_top_logprobs);
    so.top_tokens.resize(k);
    so.top_logprobs.resize(k);
    if (k > 0) {
      const size_t at = r * kTop * 4;
      std::memcpy(so.top_tokens.data(), h + top_tokens_at(max_rows_) + at, k * 4);
      std::memcpy(so.top_logprobs.data(), h + top_logprobs_at(max_rows_) + at, k * 4);
    }
    out.samples.push_back(std::move(so));
  }
}

}  // namespace pagoda::actors
