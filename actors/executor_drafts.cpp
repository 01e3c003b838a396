// Executor, draft-model speculation: the draft pool follows the plan's
// state changes, and the draft slots of a step's entries are filled by the
// DraftRunner before the target's forward (see executor.hpp and
// actors/draft_runner.hpp).
#include <algorithm>

#include "actors/executor.hpp"

namespace pagoda::actors {

void Executor::draft_state(const StepPlan& plan) {
  for (SeqId s : plan.releases) draft_->release(s);
  for (const SeqTruncate& t : plan.truncates) draft_->truncate(t.seq, t.num_tokens);
  for (const PlanEntry& e : plan.entries) {
    if (e.fresh) draft_->release(e.seq);  // new or re-admitted: its draft K/V starts over
  }
}

// Entry i's slots are s.tokens[i]'s last num_drafts ids, after its committed
// last token at position P = num_cached + num_new - num_drafts - 1. A row
// without a valid history (the plan carried no prefix) keeps the plan's
// filler ids, as do all rows without a draft model.
Result<void> Executor::fill_drafts(Slot& slot) {
  const StepPlan& plan = slot.plan;
  draft_rows_.clear();
  draft_params_.clear();
  std::vector<size_t> at;  // first params index of each row
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const PlanEntry& e = plan.entries[i];
    const int32_t k = e.num_drafts;
    if (k <= 0 || slot.bad[i] || !draft_) continue;
    const MirroredSeq* m = mirror_->find(e.seq);
    const int32_t end = e.num_cached + e.num_new() - k;  // P + 1
    if (m == nullptr || !m->history_valid || int32_t(m->history.size()) < end + k ||
        k >= int32_t(slot.tokens[i].size())) {
      continue;
    }
    at.push_back(draft_params_.size());
    draft_params_.resize(draft_params_.size() + size_t(k));
    for (const PlanSample& s : plan.samples) {  // row j of the entry: row_back = num_drafts - j
      if (s.entry == int32_t(i) && s.row_back >= 1 && s.row_back <= k) {
        draft_params_[at.back() + size_t(k - s.row_back)] = s.params;
      }
    }
    DraftRow r;
    r.seq = e.seq;
    r.history = std::span<const TokenId>(m->history).first(size_t(end));
    r.drafts = std::span<TokenId>(slot.tokens[i]).last(size_t(k));
    draft_rows_.push_back(r);
  }
  for (size_t r = 0; r < draft_rows_.size(); ++r) {
    draft_rows_[r].params = std::span<const gpu::SamplingRowParams>(draft_params_).subspan(
        at[r], draft_rows_[r].drafts.size());
  }
  if (!draft_rows_.empty()) {
    if (auto ok = draft_->propose(draft_rows_); !ok) return ok;
  }
  for (const DraftRow& r : draft_rows_) {
    MirroredSeq* m = mirror_->find(r.seq);
    const size_t end = r.history.size();
    std::copy(r.drafts.begin(), r.drafts.end(), m->history.begin() + ptrdiff_t(end));
    slot.out.drafted.push_back({r.seq, std::vector<TokenId>(r.drafts.begin(), r.drafts.end())});
  }
  return {};
}

}  // namespace pagoda::actors
