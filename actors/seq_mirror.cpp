#include "actors/seq_mirror.hpp"

#include <algorithm>
#include <string>

namespace pagoda::actors {
namespace {

Error mirror_error(SeqId seq, const std::string& what) {
  return make_error("executor: sequence " + std::to_string(seq) + " " + what);
}

}  // namespace

SeqMirror::SeqMirror(int32_t num_blocks, int32_t block_size, TableStore* tables)
    : num_blocks_(num_blocks), block_size_(block_size), tables_(tables) {
  if (tables_ == nullptr) {
    own_tables_ = std::make_unique<VectorTables>(num_blocks);
    tables_ = own_tables_.get();
  }
}

void SeqMirror::release(const StepPlan& plan) {
  for (SeqId s : plan.releases) drop(s);
}

void SeqMirror::begin(const StepPlan& plan, std::vector<std::vector<TokenId>>& tokens,
                      std::vector<uint8_t>& bad, std::vector<SeqError>& errors,
                      std::vector<Placeholder>* placeholders) {
  if (placeholders != nullptr) placeholders->clear();
  // Forks first: a release in the same plan may name a fork's parent (its
  // group ended after the fork was booked).
  for (const SeqForkOp& f : plan.pre_forks) {
    if (auto ok = fork(f); !ok) {
      drop(f.child);
      errors.push_back({f.child, ok.error().message});
    }
  }
  release(plan);
  for (const SeqTruncate& t : plan.truncates) truncate(t);
  tokens.resize(plan.entries.size());
  bad.assign(plan.entries.size(), 0);
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    uint64_t awaited = 0;
    if (auto ok = apply_entry(plan.entries[i], tokens[i], awaited); !ok) {
      drop(plan.entries[i].seq);
      tokens[i].clear();
      bad[i] = 1;
      errors.push_back({plan.entries[i].seq, ok.error().message});
      continue;
    }
    const PlanEntry& e = plan.entries[i];
    if (placeholders == nullptr || e.num_placeholders == 0) continue;
    const int32_t at = int32_t(e.tokens.size());  // the placeholder follows the known ids
    placeholders->push_back({int32_t(i), at, e.seq, e.num_cached + at, awaited == 0, awaited});
  }
}

void SeqMirror::clear() {
  while (!seqs_.empty()) drop(seqs_.begin()->first);
}

// A table delta's ids are checked by the store's assign(); the coverage and
// the token count are the mirror's.
Result<void> SeqMirror::apply_entry(const PlanEntry& e, std::vector<TokenId>& tokens,
                                    uint64_t& awaited) {
  if (e.fresh) {
    drop(e.seq);
    MirroredSeq fresh;
    fresh.prompt_len = e.prompt_len;
    fresh.num_tokens = e.num_cached;
    fresh.history_valid = int32_t(e.prefix.size()) == e.num_cached;
    if (fresh.history_valid) fresh.history = e.prefix;
    if (auto made = create(e.seq, std::move(fresh)); !made) return made.error();
  }
  auto it = seqs_.find(e.seq);
  if (it == seqs_.end()) return mirror_error(e.seq, "is unknown");
  MirroredSeq& s = it->second;
  if (e.num_cached != s.num_tokens) {
    return mirror_error(e.seq, "has " + std::to_string(s.num_tokens) + " tokens, the plan says " +
                                   std::to_string(e.num_cached));
  }
  const int64_t need = (int64_t(e.num_cached) + e.num_new() + block_size_ - 1) / block_size_;
  if (int64_t(e.table_from) + int64_t(e.new_blocks.size()) < need || e.num_placeholders < 0 ||
      e.num_placeholders > 1 ||
      (e.num_placeholders == 1 && s.last_sampled < 0 && s.awaiting_step == 0)) {
    return mirror_error(e.seq, "got a plan entry its table or last sample cannot serve");
  }
  if (!e.new_blocks.empty() || int32_t(tables_->row(s.row).size()) != e.table_from) {
    if (auto ok = tables_->assign(s.row, e.table_from, e.new_blocks); !ok) {
      return mirror_error(e.seq, "got a table delta its table cannot take: " + ok.error().message);
    }
  }
  tokens.assign(e.tokens.begin(), e.tokens.end());
  if (e.num_placeholders == 1) tokens.push_back(s.last_sampled);
  awaited = s.awaiting_step;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (s.history_valid && size_t(s.num_tokens) + i == s.history.size()) s.history.push_back(tokens[i]);
  }
  s.num_tokens += int32_t(tokens.size());
  return {};
}

void SeqMirror::forks(const StepPlan& plan, std::vector<SeqError>& errors) {
  for (const SeqForkOp& f : plan.forks) {
    if (auto ok = fork(f); !ok) {
      drop(f.child);
      errors.push_back({f.child, ok.error().message});
    }
  }
}

void SeqMirror::expect(const StepPlan& plan) {
  for (const PlanSample& p : plan.samples) {
    if (MirroredSeq* s = find(p.seq)) s->awaiting_step = plan.step_id;
  }
}

// One fork for both kinds (pre_forks of beams, post-entry forks of n > 1):
// the child copies the parent's state and gets a row of its own holding the
// parent's table, or `f.table` when given.
Result<void> SeqMirror::fork(const SeqForkOp& f) {
  auto it = seqs_.find(f.parent);
  if (it == seqs_.end()) return mirror_error(f.parent, "is unknown (fork parent)");
  drop(f.child);
  MirroredSeq c = it->second;
  c.history_uploaded = 0;
  c.history_epoch = 0;
  const int32_t parent_row = c.row;
  auto made = create(f.child, std::move(c));
  if (!made) return made.error();
  const std::span<const BlockId> table =
      f.table.empty() ? tables_->row(parent_row) : std::span<const BlockId>(f.table);
  if (auto ok = tables_->assign((*made)->row, 0, table); !ok) {
    drop(f.child);
    return mirror_error(f.child, "got a fork table its table cannot take: " + ok.error().message);
  }
  return {};
}

Result<MirroredSeq*> SeqMirror::create(SeqId seq, MirroredSeq init) {
  auto row = tables_->acquire();
  if (!row) return mirror_error(seq, "got no table row: " + row.error().message);
  init.row = *row;
  return &seqs_.insert_or_assign(seq, std::move(init)).first->second;
}

// A rejected speculative run: the state keeps its first num_tokens positions
// (the table's tail is replaced by the next delta). Unknown or shorter: no-op.
void SeqMirror::truncate(const SeqTruncate& t) {
  auto it = seqs_.find(t.seq);
  if (it == seqs_.end() || t.num_tokens < 0 || t.num_tokens >= it->second.num_tokens) return;
  MirroredSeq& s = it->second;
  s.num_tokens = t.num_tokens;
  if (s.history_valid && s.history.size() > size_t(t.num_tokens)) {
    s.history.resize(size_t(t.num_tokens));
    s.history_uploaded = std::min(s.history_uploaded, t.num_tokens);
  }
}

void SeqMirror::record(const StepPlan& plan, std::span<const TokenId> sampled) {
  for (size_t i = 0; i < plan.samples.size() && i < sampled.size(); ++i) {
    if (plan.samples[i].row_back != 0) continue;  // a speculative row: verified by the scheduler
    auto it = seqs_.find(plan.samples[i].seq);
    if (it == seqs_.end()) continue;
    MirroredSeq& s = it->second;
    s.last_sampled = sampled[i];
    s.recorded_step = plan.step_id;
    if (s.awaiting_step == plan.step_id) s.awaiting_step = 0;
    if (!s.history_valid) continue;
    const PlanEntry& e = plan.entries[size_t(plan.samples[i].entry)];
    const size_t pos = size_t(e.num_cached + e.num_new());
    if (pos < s.history.size()) {
      s.history[pos] = sampled[i];  // a later step's placeholder took the position already
      s.history_uploaded = std::min(s.history_uploaded, int32_t(pos));  // re-upload from there
    } else if (pos == s.history.size()) {
      s.history.push_back(sampled[i]);
    } else {
      s.history_valid = false;  // a hole: never, unless the plans disagree
      s.history.clear();
    }
  }
}

const MirroredSeq* SeqMirror::find(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

MirroredSeq* SeqMirror::find(SeqId seq) {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

std::span<const BlockId> SeqMirror::table(SeqId seq) const {
  const MirroredSeq* s = find(seq);
  return s == nullptr ? std::span<const BlockId>() : tables_->row(s->row);
}

void SeqMirror::drop(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  tables_->release(it->second.row);
  seqs_.erase(it);
}

// ---- VectorTables --------------------------------------------------------

Result<int32_t> VectorTables::acquire() {
  if (free_.empty()) {
    free_.push_back(int32_t(rows_.size()));
    rows_.emplace_back();
    used_.push_back(0);
  }
  const int32_t row = free_.back();
  free_.pop_back();
  used_[size_t(row)] = 1;
  rows_[size_t(row)].clear();
  return row;
}

void VectorTables::release(int32_t row) {
  if (row < 0 || size_t(row) >= used_.size() || !used_[size_t(row)]) return;
  used_[size_t(row)] = 0;
  free_.push_back(row);
}

Result<void> VectorTables::assign(int32_t row, int32_t from, std::span<const BlockId> blocks) {
  if (row < 0 || size_t(row) >= used_.size() || !used_[size_t(row)]) {
    return make_error("tables: row " + std::to_string(row) + " is not acquired");
  }
  std::vector<BlockId>& t = rows_[size_t(row)];
  if (from < 0 || size_t(from) > t.size()) return make_error("tables: a delta past the table");
  for (BlockId b : blocks) {
    if (b < 0 || b >= num_blocks_) return make_error("tables: a block id outside the cache");
  }
  t.resize(size_t(from));
  t.insert(t.end(), blocks.begin(), blocks.end());
  return {};
}

std::span<const BlockId> VectorTables::row(int32_t row) const {
  if (row < 0 || size_t(row) >= used_.size() || !used_[size_t(row)]) return {};
  return rows_[size_t(row)];
}

}  // namespace pagoda::actors
