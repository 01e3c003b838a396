// BlockPool: the physical KV blocks of one cache and their bookkeeping (no
// per-sequence state; that is BlockManager's).
//
// Every block is in exactly one state:
//   used    ref_count > 0 (held by one or more block tables);
//   cached  ref_count == 0, full and registered in the prefix cache: its
//           contents are kept and it can be revived by a cache hit; it sits in
//           an LRU list and is evicted (unregistered) only when a block is
//           needed and no free block is left;
//   free    ref_count == 0 and not registered: contents are garbage.
// take() hands out a free block first, else evicts the least recently
// released cached block. The pool also keeps each block's token ids (what was
// written into its slots) so that cache hits are verified token by token.
//
// Identity: every take() bumps the block's generation, so a (block id,
// generation) pair names one lifetime of a block. A registered block records
// its parent's identity; a hit must match tokens AND parent, so a 64-bit hash
// collision can never return a wrong block.
//
// Fill: the pool counts, per block, the slots written into it (add_fill) and
// keeps stored_tokens() = the sum of the fills of used blocks, so KV
// utilisation is O(1) (a block shared by forks counts once). A cached block
// keeps its fill (it is full); a block that becomes free or is taken starts
// at 0.
//
// Costs: take/ref/unref/unregister O(1); register/lookup O(block_size) expected.
// Not thread-safe: owned by one BlockManager (one actor).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/block_hash.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

using BlockId = int32_t;

enum class BlockState : uint8_t { free, used, cached };

// One lifetime of a block (see generation above). kRootParent is the parent
// of a sequence's first block.
struct BlockRef {
  BlockId id = -1;
  uint64_t generation = 0;
  bool operator==(const BlockRef&) const = default;
};
inline constexpr BlockRef kRootParent{-1, 0};

class BlockPool {
 public:
  // Requires num_blocks >= 0 and block_size >= 1. Block ids are
  // 0..num_blocks-1; the first take()s hand out ascending ids.
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t total_blocks() const { return int32_t(meta_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free_blocks() const { return int32_t(free_.size()); }
  int32_t num_cached_blocks() const { return num_cached_; }
  int32_t num_used_blocks() const { return num_used_; }
  // Blocks take() can still hand out: free + cached.
  int32_t num_available_blocks() const { return num_free_blocks() + num_cached_; }
  uint64_t num_evictions() const { return num_evictions_; }
  // Slots written in used blocks (see Fill above).
  int64_t stored_tokens() const { return stored_; }
  // fill(b) += n (n < 0 gives slots back: a rollback). Requires b used and
  // 0 <= fill(b) + n <= block_size.
  void add_fill(BlockId b, int32_t n);
  int32_t fill(BlockId b) const { return meta_[size_t(b)].fill; }

  // A block with ref_count 1 and a new generation, or nullopt when none is
  // available. Evicting a cached block unregisters it.
  std::optional<BlockId> take();
  // ref_count++. A cached block (ref 0) is revived out of the LRU list.
  // Requires the block to be used or cached (never free: its contents are gone).
  void ref(BlockId b);
  // ref_count--. Requires ref_count > 0. At 0 a registered block becomes
  // cached (most recently used end of the LRU list); others become free.
  void unref(BlockId b);

  // Registers full block b (used, not registered) under `hash` with parent
  // identity `parent`. Returns the block that now stands for this content:
  // b itself, or an existing registered block with the same hash, tokens and
  // parent (b then stays unregistered: no retroactive dedupe). Returns
  // nullopt when the hash is held by different content (a collision).
  std::optional<BlockId> register_full(BlockId b, uint64_t hash, BlockRef parent);
  // The registered block for (hash, tokens, parent), verified; or nullopt.
  // tokens.size() must be block_size.
  std::optional<BlockId> lookup(uint64_t hash, std::span<const TokenId> tokens,
                                BlockRef parent) const;
  // Removes r's block from the prefix cache if r still names its current
  // registered lifetime (its contents are no longer trusted: the step that
  // was to write them failed). A cached block becomes free; a used one stays
  // used, unregistered. Returns whether anything was removed.
  bool unregister(BlockRef r);

  // The token ids written into block b's slots ([block_size]).
  std::span<TokenId> tokens(BlockId b) {
    return {token_ids_.data() + size_t(b) * size_t(block_size_), size_t(block_size_)};
  }
  std::span<const TokenId> tokens(BlockId b) const {
    return {token_ids_.data() + size_t(b) * size_t(block_size_), size_t(block_size_)};
  }

  int32_t ref_count(BlockId b) const { return meta_[size_t(b)].ref; }
  bool is_registered(BlockId b) const { return meta_[size_t(b)].registered; }
  BlockRef identity(BlockId b) const { return {b, meta_[size_t(b)].generation}; }
  // True while `r` names the current lifetime of a registered block.
  bool is_live_registered(BlockRef r) const {
    return r.id >= 0 && r.id < total_blocks() && meta_[size_t(r.id)].registered &&
           meta_[size_t(r.id)].generation == r.generation;
  }
  BlockState state(BlockId b) const;

  // Checks the pool's own invariants (each block in exactly one state, the
  // LRU list and free list well formed, counters right, the hash map and the
  // registered blocks mapping onto each other). Linear in the pool size.
  Result<void> check_invariants() const;

 private:
  struct Meta {
    int32_t ref = 0;
    bool registered = false;
    bool in_free_list = false;
    uint64_t hash = 0;
    BlockRef parent;          // valid while registered
    uint64_t generation = 0;  // bumped by take()
    int32_t fill = 0;         // slots written (see Fill)
    BlockId lru_prev = -1, lru_next = -1;
  };

  void lru_push_back(BlockId b);
  void lru_unlink(BlockId b);
  BlockId evict_lru();
  Result<void> check_lists(std::vector<uint8_t>& seen) const;
  Result<void> check_hash_map() const;

  int32_t block_size_;
  std::vector<Meta> meta_;              // [num_blocks]
  std::vector<TokenId> token_ids_;      // [num_blocks * block_size]
  std::vector<BlockId> free_;           // stack; back() is taken next
  BlockId lru_head_ = -1, lru_tail_ = -1;  // head = least recently released
  int32_t num_cached_ = 0;
  int32_t num_used_ = 0;
  uint64_t num_evictions_ = 0;
  int64_t stored_ = 0;  // sum of fill over used blocks
  std::unordered_map<uint64_t, BlockId> by_hash_;  // registered blocks only
};

}  // namespace pagoda::actors
