#include "actors/constraint_book.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <unordered_set>

#include "actors/steady_ns.hpp"

namespace pagoda::actors {
namespace {

// A finished grammar: only the stop ids.
void stop_only(const model::ConstraintProgram& p, uint32_t* words) {
  std::fill(words, words + p.mask_words(), 0u);
  for (int32_t t : p.stop_ids) {
    if (t >= 0 && t < p.vocab) words[t >> 5] |= uint32_t(1) << (t & 31);
  }
}

}  // namespace

bool ConstraintBook::involves(const StepPlan& plan) const {
  if (!seqs_.empty()) return true;
  for (const PlanEntry& e : plan.entries) {
    if (e.fresh && e.constraint) return true;
  }
  return false;
}

void ConstraintBook::stage(const StepPlan& plan, const std::vector<std::vector<TokenId>>& tokens,
                           const std::vector<uint8_t>& bad) {
  // A step that failed between stage() and prepare(): its releases still apply.
  for (SeqId s : staged_.releases) seqs_.erase(s);
  staged_ = Staged{};
  errors_.clear();
  // Pre-fork children (beams) of tracked sequences are tracked from this plan on.
  std::unordered_set<SeqId> children;
  for (const SeqForkOp& f : plan.pre_forks) {
    staged_.pre_forks.emplace_back(f.parent, f.child);
    if (seqs_.count(f.parent) != 0 || children.count(f.parent) != 0) children.insert(f.child);
  }
  staged_.releases = plan.releases;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const PlanEntry& e = plan.entries[i];
    if (i < bad.size() && bad[i]) continue;
    if (e.fresh && e.constraint) staged_.fresh.emplace_back(e.seq, &e);
    const bool tracked = seqs_.count(e.seq) != 0 || children.count(e.seq) != 0 || (e.fresh && e.constraint);
    if (tracked && i < tokens.size()) staged_.known.push_back({e.seq, e.num_cached, tokens[i]});
  }
  for (const SeqForkOp& f : plan.forks) staged_.forks.emplace_back(f.parent, f.child);
  for (const PlanSample& s : plan.samples) staged_.samples.push_back(s.seq);
}

void ConstraintBook::prepare() {
  // The previous step's samples land before this step's entries (their placeholders).
  for (const Known& k : sampled_) take(k.seq, k.position, k.ids);
  sampled_.clear();
  for (const auto& [parent, child] : staged_.pre_forks) fork(parent, child);
  for (SeqId s : staged_.releases) seqs_.erase(s);
  for (const auto& [seq, e] : staged_.fresh) {
    seqs_.erase(seq);
    seqs_.emplace(seq, State{model::TokenMatcher(e->constraint), e->prompt_len, false});
    if (int32_t(e->prefix.size()) == e->num_cached) {
      take(seq, 0, e->prefix);
    } else if (e->num_cached > e->prompt_len) {
      fail(seq, "constraint: the plan lacks the output to restore the matcher");
    }
  }
  for (const Known& k : staged_.known) take(k.seq, k.position, k.ids);
  for (const auto& [parent, child] : staged_.forks) fork(parent, child);
  fill_rows();
  staged_.releases.clear();  // applied (stage() applies those of a step that never got here)
}

void ConstraintBook::take(SeqId seq, int32_t position, std::span<const TokenId> ids) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || it->second.failed) return;
  State& st = it->second;
  try {
    for (size_t j = 0; j < ids.size(); ++j) {
      const int32_t k = position + int32_t(j) - st.prompt_len;
      if (k < 0) continue;
      int32_t n = st.matcher.num_accepted();
      if (k < n) {
        if (st.matcher.history()[size_t(k)] == ids[j]) continue;
        st.matcher.rollback(n - k);  // another id at this position (a beam's candidate)
        n = k;
      }
      if (st.matcher.terminated()) return;  // ids after the stop id: a finished sequence
      if (k > n) return fail(seq, "constraint: a gap in the sequence's output");
      if (!st.matcher.accept(ids[j])) {
        return fail(seq, "constraint: token id " + std::to_string(ids[j]) + " at output position " +
                             std::to_string(k) + " is not allowed by the output constraint");
      }
    }
  } catch (const std::exception& e) {
    fail(seq, std::string("constraint: ") + e.what());
  }
}

void ConstraintBook::fork(SeqId parent, SeqId child) {
  auto it = seqs_.find(parent);
  if (it == seqs_.end()) return;
  State copy{it->second.matcher.fork(), it->second.prompt_len, it->second.failed};
  seqs_.erase(child);
  seqs_.emplace(child, std::move(copy));
}

void ConstraintBook::fail(SeqId seq, const std::string& why) {
  auto it = seqs_.find(seq);
  if (it != seqs_.end()) it->second.failed = true;
  errors_.push_back({seq, why});
}

void ConstraintBook::fill_rows() {
  rows_.clear();
  fill_ns_.clear();
  words_ = 0;
  size_t used = 0;
  for (SeqId seq : staged_.samples) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end() || it->second.failed) continue;
    model::TokenMatcher& m = it->second.matcher;
    const model::ConstraintProgram& p = m.program();
    RowConstraint rc;
    rc.bias = &p.rules.bias;
    if (p.masks()) {
      words_ = p.mask_words();
      masks_.resize((used + 1) * size_t(words_));
      uint32_t* w = masks_.data() + used * size_t(words_);
      const int64_t t0 = steady_now_ns();
      try {
        if (m.terminated()) stop_only(p, w);
        else m.fill_mask(w);
      } catch (const std::exception& e) {
        fail(seq, std::string("constraint: ") + e.what());
        continue;
      }
      fill_ns_.push_back(steady_now_ns() - t0);
      rc.mask = int32_t(used++);
    }
    rows_[seq] = rc;
  }
}

RowConstraint ConstraintBook::row(SeqId seq) const {
  auto it = rows_.find(seq);
  return it == rows_.end() ? RowConstraint{} : it->second;
}

void ConstraintBook::record(const StepPlan& plan, std::span<const TokenId> sampled) {
  if (seqs_.empty()) return;
  for (size_t i = 0; i < plan.samples.size() && i < sampled.size(); ++i) {
    const PlanSample& s = plan.samples[i];
    if (sampled[i] < 0 || seqs_.count(s.seq) == 0) continue;
    const PlanEntry& e = plan.entries[size_t(s.entry)];
    sampled_.push_back({s.seq, e.num_cached + e.num_new(), {sampled[i]}});
  }
}

void ConstraintBook::release(const StepPlan& plan) {
  for (SeqId s : plan.releases) seqs_.erase(s);
}

void ConstraintBook::clear() {
  seqs_.clear();
  sampled_.clear();
  staged_ = Staged{};
  rows_.clear();
}

const model::TokenMatcher* ConstraintBook::find(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second.matcher;
}

}  // namespace pagoda::actors
