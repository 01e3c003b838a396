// SchedulerCore, reporting: statistics, KV utilisation and the KV snapshot
// (see scheduler_core.hpp).
#include <algorithm>
#include <span>

#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

SchedulerStats SchedulerCore::stats() const {
  SchedulerStats st;
  st.running_groups = int32_t(running_.size());
  st.waiting_groups = int32_t(waiting_.size());
  st.running_seqs = running_seq_slots();
  st.preemptions = preemptions_;
  st.tokens_generated = tokens_generated_;
  st.steps = steps_;
  st.total_blocks = blocks_.total_blocks();
  st.used_blocks = blocks_.num_used_blocks();
  st.free_blocks = blocks_.num_free_blocks();
  st.cached_blocks = blocks_.num_cached_blocks();
  st.prefix = blocks_.prefix_cache_stats();
  return st;
}

double SchedulerCore::kv_utilisation() const {
  const int32_t used = blocks_.num_used_blocks();
  if (used == 0) return 0.0;
  const int32_t bs = blocks_.block_size();
  std::vector<int32_t> fill(size_t(blocks_.total_blocks()), 0);  // [total_blocks]
  for (const auto& [seq, where] : seq_index_) {
    const int32_t tokens = blocks_.num_tokens(seq);
    std::span<const BlockId> table = blocks_.block_table(seq);
    for (size_t i = 0; i < table.size(); ++i) {
      const int32_t f = std::clamp(tokens - int32_t(i) * bs, 0, bs);
      fill[size_t(table[i])] = std::max(fill[size_t(table[i])], f);
    }
  }
  int64_t stored = 0;
  for (int32_t f : fill) stored += f;
  return double(stored) / (double(used) * double(bs));
}

KvSnapshot SchedulerCore::kv_snapshot() const {
  KvSnapshot out;
  out.pool = blocks_.snapshot();
  for (const SeqSnapshot& s : out.pool.seqs) {
    SeqOwner o;
    o.seq = s.seq;
    if (auto it = seq_index_.find(s.seq); it != seq_index_.end()) {
      o.request = it->second.first->id;
      o.index = it->second.second;
    }
    out.owners.push_back(o);
  }
  return out;
}

}  // namespace pagoda::actors
