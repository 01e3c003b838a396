// BlockManager::capture() (on the owner's thread) and assemble() (on any
// thread): the KV map's snapshot split so that its O(pool) build, with a
// holder list per block, runs off the block-manager actor.
#include <algorithm>

#include "actors/block_manager.hpp"

namespace pagoda::actors {

PoolCapture BlockManager::capture() const {
  PoolCapture c;
  PoolSnapshot& p = c.header;
  p.block_size = block_size();
  p.total_blocks = total_blocks();
  p.free_blocks = num_free_blocks();
  p.cached_blocks = num_cached_blocks();
  p.used_blocks = num_used_blocks();
  p.watermark_blocks = watermark_blocks_;
  p.stats = prefix_cache_stats();
  c.states.resize(size_t(total_blocks()));
  c.ref_counts.resize(size_t(total_blocks()));
  for (BlockId b = 0; b < total_blocks(); ++b) {
    c.states[size_t(b)] = pool_.state(b);
    c.ref_counts[size_t(b)] = pool_.ref_count(b);
  }
  c.seqs.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) c.seqs.push_back(SeqSnapshot{id, s.num_tokens, s.table});
  return c;
}

PoolSnapshot assemble(PoolCapture c) {
  PoolSnapshot p = std::move(c.header);
  p.blocks.resize(c.states.size());
  for (size_t b = 0; b < c.states.size(); ++b) {
    p.blocks[b].state = c.states[b];
    p.blocks[b].ref_count = c.ref_counts[b];
  }
  std::sort(c.seqs.begin(), c.seqs.end(), [](const SeqSnapshot& x, const SeqSnapshot& y) { return x.seq < y.seq; });
  for (const SeqSnapshot& s : c.seqs) {
    for (BlockId b : s.table) {
      if (b < 0 || size_t(b) >= p.blocks.size()) continue;
      auto& holders = p.blocks[size_t(b)].seqs;
      if (holders.empty() || holders.back() != s.seq) holders.push_back(s.seq);
    }
  }
  p.seqs = std::move(c.seqs);
  return p;
}

PoolSnapshot BlockManager::snapshot() const { return assemble(capture()); }

}  // namespace pagoda::actors
