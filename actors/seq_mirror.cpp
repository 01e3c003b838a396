#include "actors/seq_mirror.hpp"

#include <string>

namespace pagoda::actors {
namespace {

Error mirror_error(SeqId seq, const std::string& what) {
  return make_error("executor: sequence " + std::to_string(seq) + " " + what);
}

}  // namespace

void SeqMirror::release(const StepPlan& plan) {
  for (SeqId s : plan.releases) drop(s);
}

void SeqMirror::begin(const StepPlan& plan, std::vector<std::vector<TokenId>>& tokens,
                      std::vector<uint8_t>& bad, std::vector<SeqError>& errors) {
  // Forks first: a release in the same plan may name a fork's parent (its
  // group ended after the fork was booked).
  for (const SeqForkOp& f : plan.pre_forks) {
    if (auto ok = fork(f); !ok) {
      drop(f.child);
      errors.push_back({f.child, ok.error().message});
    }
  }
  release(plan);
  tokens.resize(plan.entries.size());
  bad.assign(plan.entries.size(), 0);
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    if (auto ok = apply_entry(plan.entries[i], tokens[i]); !ok) {
      drop(plan.entries[i].seq);
      tokens[i].clear();
      bad[i] = 1;
      errors.push_back({plan.entries[i].seq, ok.error().message});
    }
  }
}

void SeqMirror::clear() {
  while (!seqs_.empty()) drop(seqs_.begin()->first);
}

Result<void> SeqMirror::apply_entry(const PlanEntry& e, std::vector<TokenId>& tokens) {
  if (e.fresh) {
    drop(e.seq);
    MirroredSeq fresh;
    fresh.prompt_len = e.prompt_len;
    fresh.num_tokens = e.num_cached;
    fresh.history_valid = int32_t(e.prefix.size()) == e.num_cached;
    if (fresh.history_valid) fresh.history = e.prefix;
    MirroredSeq& s = seqs_.emplace(e.seq, std::move(fresh)).first->second;
    if (listener_ != nullptr) {
      if (auto ok = listener_->on_create(s); !ok) {
        seqs_.erase(e.seq);
        return ok;
      }
    }
  }
  auto it = seqs_.find(e.seq);
  if (it == seqs_.end()) return mirror_error(e.seq, "is unknown");
  MirroredSeq& s = it->second;
  if (e.num_cached != s.num_tokens) {
    return mirror_error(e.seq, "has " + std::to_string(s.num_tokens) + " tokens, the plan says " +
                                   std::to_string(e.num_cached));
  }
  if (e.table_from < 0 || size_t(e.table_from) > s.table.size()) {
    return mirror_error(e.seq, "got a table delta past its table");
  }
  for (BlockId b : e.new_blocks) {
    if (b < 0 || b >= num_blocks_) return mirror_error(e.seq, "got a block id outside the cache");
  }
  const int64_t need = (int64_t(e.num_cached) + e.num_new() + block_size_ - 1) / block_size_;
  if (int64_t(e.table_from) + int64_t(e.new_blocks.size()) < need || e.num_placeholders < 0 ||
      e.num_placeholders > 1 || (e.num_placeholders == 1 && s.last_sampled < 0)) {
    return mirror_error(e.seq, "got a plan entry its table or last sample cannot serve");
  }
  s.table.resize(size_t(e.table_from));
  s.table.insert(s.table.end(), e.new_blocks.begin(), e.new_blocks.end());
  if (listener_ != nullptr && (!e.new_blocks.empty() || e.fresh)) {
    if (auto ok = listener_->on_table(s, e.fresh ? 0 : e.table_from); !ok) return ok;
  }
  tokens.assign(e.tokens.begin(), e.tokens.end());
  if (e.num_placeholders == 1) tokens.push_back(s.last_sampled);
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

Result<void> SeqMirror::fork(const SeqForkOp& f) {
  const SeqId child = f.child;
  auto it = seqs_.find(f.parent);
  if (it == seqs_.end()) return mirror_error(f.parent, "is unknown (fork parent)");
  for (BlockId b : f.table) {
    if (b < 0 || b >= num_blocks_) return mirror_error(child, "got a block id outside the cache");
  }
  drop(child);
  MirroredSeq c = it->second;
  if (!f.table.empty()) c.table = f.table;
  c.row = -1;
  c.history_uploaded = 0;
  c.history_epoch = 0;
  MirroredSeq& s = seqs_.emplace(child, std::move(c)).first->second;
  if (listener_ == nullptr) return {};
  if (auto ok = listener_->on_create(s); !ok) {
    seqs_.erase(child);
    return ok;
  }
  return listener_->on_table(s, 0);
}

void SeqMirror::record(const StepPlan& plan, std::span<const TokenId> sampled) {
  for (size_t i = 0; i < plan.samples.size() && i < sampled.size(); ++i) {
    auto it = seqs_.find(plan.samples[i].seq);
    if (it == seqs_.end()) continue;
    MirroredSeq& s = it->second;
    s.last_sampled = sampled[i];
    if (s.history_valid) {
      s.history.resize(size_t(s.num_tokens));  // a position's id is the last one sampled for it
      s.history.push_back(sampled[i]);
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

void SeqMirror::drop(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  if (listener_ != nullptr) listener_->on_release(it->second);
  seqs_.erase(it);
}

}  // namespace pagoda::actors
