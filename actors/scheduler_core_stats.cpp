// SchedulerCore, reporting: statistics and KV utilisation, both O(1) from the
// block manager's counters of the latest booking (see scheduler_core.hpp).
#include "actors/scheduler_core.hpp"

namespace pagoda::actors {

SchedulerStats SchedulerCore::stats() const {
  const BlockStats b = local_ ? local_->stats() : block_stats_;
  SchedulerStats st;
  st.running_groups = int32_t(running_.size());
  st.waiting_groups = int32_t(waiting_.size());
  st.running_seqs = running_seq_slots();
  st.preemptions = preemptions_;
  st.urgent_steps = urgent_steps_;
  st.tokens_generated = tokens_generated_;
  st.spec = spec_;
  st.steps = steps_;
  st.total_blocks = b.total;
  st.used_blocks = b.used;
  st.free_blocks = b.free;
  st.cached_blocks = b.cached;
  st.stored_tokens = b.stored_tokens;
  st.block_size = b.block_size;
  st.prefix = b.prefix;
  return st;
}

double SchedulerCore::kv_utilisation() const {
  const BlockStats b = local_ ? local_->stats() : block_stats_;
  if (b.used == 0 || b.block_size == 0) return 0.0;
  return double(b.stored_tokens) / (double(b.used) * double(b.block_size));
}

}  // namespace pagoda::actors
