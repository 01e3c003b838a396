#include "actors/constraint_book.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <unordered_set>
#include <utility>

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

// Per entry, the number of drafted ids it ends with: the largest row_back
// of its samples (0: not speculative).
std::vector<int32_t> draft_counts(const StepPlan& plan) {
  std::vector<int32_t> d(plan.entries.size(), 0);
  for (const PlanSample& s : plan.samples) {
    if (s.entry >= 0 && size_t(s.entry) < d.size()) d[size_t(s.entry)] = std::max(d[size_t(s.entry)], s.row_back);
  }
  return d;
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
  const std::vector<int32_t> drafts = draft_counts(plan);
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const PlanEntry& e = plan.entries[i];
    if (i < bad.size() && bad[i]) continue;
    if (e.fresh && e.constraint) staged_.fresh.emplace_back(e.seq, &e);
    const bool tracked = seqs_.count(e.seq) != 0 || children.count(e.seq) != 0 || (e.fresh && e.constraint);
    if (tracked && i < tokens.size()) {
      const int32_t d = std::min(drafts[i], int32_t(tokens[i].size()) - 1);
      staged_.known.push_back({e.seq, e.num_cached, tokens[i], std::max(d, 0)});
    }
  }
  for (const SeqForkOp& f : plan.forks) staged_.forks.emplace_back(f.parent, f.child);
  for (const PlanSample& s : plan.samples) staged_.samples.emplace_back(s.seq, s.row_back);
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
  for (const Known& k : staged_.known) {
    const std::span<const TokenId> ids(k.ids);
    const size_t committed = ids.size() - size_t(k.drafts);
    take(k.seq, k.position, ids.first(committed));
    if (k.drafts > 0) start_walk(k.seq, k.position + int32_t(committed), ids.subspan(committed));
  }
  for (const auto& [parent, child] : staged_.forks) fork(parent, child);
  fill_rows();
  staged_.releases.clear();  // applied (stage() applies those of a step that never got here)
}

void ConstraintBook::take(SeqId seq, int32_t position, std::span<const TokenId> ids) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || it->second.failed) return;
  State& st = it->second;
  const DraftWalk walk = std::exchange(st.walk, DraftWalk{});  // walked drafts: reconciled by position
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
      if (k > n && walk.at_stop && walk.stop_at == n && st.matcher.accept(walk.stop_id)) {
        return;  // the verified run went past a drafted stop id: the grammar has ended
      }
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

void ConstraintBook::start_walk(SeqId seq, int32_t position, std::span<const TokenId> drafts) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || it->second.failed) return;
  State& st = it->second;
  // Only from the committed ids' end (else the rows get the matcher's mask as is).
  if (st.matcher.num_accepted() != position - st.prompt_len) return;
  st.walk.drafts.assign(drafts.begin(), drafts.end());
}

void ConstraintBook::seek(State& st, int32_t j) {
  DraftWalk& w = st.walk;
  if (w.walked > j) {
    st.matcher.rollback(w.walked - j);
    w.walked = j;
    w.blocked = w.at_stop = false;
  }
  const std::vector<int32_t>& stops = st.matcher.program().stop_ids;
  while (w.walked < j && !w.blocked) {
    const TokenId t = w.drafts[size_t(w.walked)];
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) {
      w.blocked = true;  // never accepted tentatively: a rollback would not undo it
      w.at_stop = !st.matcher.terminated() && st.matcher.completed();
      w.stop_id = t;
      w.stop_at = st.matcher.num_accepted();
    } else if (st.matcher.accept(t)) {
      ++w.walked;
    } else {
      w.blocked = true;
    }
  }
}

bool ConstraintBook::fill_row(SeqId seq, State& st, int32_t row_back, uint32_t* words) {
  model::TokenMatcher& m = st.matcher;
  try {
    bool stop = m.terminated();
    const int32_t d = int32_t(st.walk.drafts.size());
    if (d > 0 && row_back <= d) {
      const int32_t j = d - row_back;
      seek(st, j);
      stop = stop || (st.walk.at_stop && st.walk.walked < j);  // after an accepted stop id
    }
    if (stop) stop_only(m.program(), words);
    else m.fill_mask(words);
  } catch (const std::exception& e) {
    fail(seq, std::string("constraint: ") + e.what());
    return false;
  }
  return true;
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
  for (const auto& [seq, row_back] : staged_.samples) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end() || it->second.failed || row_back < 0) continue;
    const model::ConstraintProgram& p = it->second.matcher.program();
    RowConstraint rc;
    rc.bias = &p.rules.bias;
    if (p.masks()) {
      words_ = p.mask_words();
      masks_.resize((used + 1) * size_t(words_));
      const int64_t t0 = steady_now_ns();
      if (!fill_row(seq, it->second, row_back, masks_.data() + used * size_t(words_))) continue;
      fill_ns_.push_back(steady_now_ns() - t0);
      rc.mask = int32_t(used++);
    }
    std::vector<RowConstraint>& rows = rows_[seq];
    if (rows.size() <= size_t(row_back)) rows.resize(size_t(row_back) + 1);
    rows[size_t(row_back)] = rc;
  }
}

RowConstraint ConstraintBook::row(SeqId seq, int32_t row_back) const {
  auto it = rows_.find(seq);
  if (it == rows_.end() || row_back < 0 || size_t(row_back) >= it->second.size()) return RowConstraint{};
  return it->second[size_t(row_back)];
}

void ConstraintBook::record(const StepPlan& plan, std::span<const TokenId> sampled) {
  if (seqs_.empty()) return;
  const std::vector<int32_t> drafts = draft_counts(plan);
  for (size_t i = 0; i < plan.samples.size() && i < sampled.size(); ++i) {
    const PlanSample& s = plan.samples[i];
    if (sampled[i] < 0 || seqs_.count(s.seq) == 0) continue;
    // A speculative entry's rows: the next plan carries the verified run.
    if (size_t(s.entry) < drafts.size() && drafts[size_t(s.entry)] > 0) continue;
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
