// BlockManager: per-sequence block tables over a BlockPool (PagedAttention).
//
// Rules (paged layout):
//   - A sequence's table maps logical block i to a physical block. A block is
//     taken only when a token needs a slot, so a sequence holds at most one
//     partly filled block (its last). Tables only grow, except when the whole
//     sequence is freed (finish, cancel, preemption for recompute), and
//     leading entries become holes under a sliding window (below).
//   - slot of token position p = table[p / block_size] * block_size + p % block_size.
//   - fork(parent, child) shares every block of the parent (ref++). Appending
//     into a last block whose ref > 1 copies it first (copy-on-write): a new
//     block dst is taken, a (src, dst) copy is reported (the executor runs it
//     before attention) and the appending sequence's table points to dst.
//   - Prefix caching: a block that becomes full is hashed (chained from its
//     parent's hash) and registered, unless an identical block is already
//     registered (then the sequence keeps its own block). allocate() reuses the
//     leading cached full blocks of a prompt, at most (prompt_len - 1) tokens
//     worth, so at least one prompt token is always computed. Hits are
//     verified against stored tokens and the parent block's identity.
//     Freed tables are released tail first, so tail blocks are evicted first.
//   - Sliding window (config sliding_window = W > 0: every layer of the model
//     attends only keys at positions > p - W from a query at p):
//     release_outside_window(seq, q) gives back the blocks wholly before the
//     window of query position q; their table entries become kNoBlock
//     (holes, always a prefix of the table), every other rule unchanged:
//     tables keep their length, forks share the holes, free() skips them.
//     A released block keeps its contents and its prefix-cache entry (ref 0:
//     cached, evicted like any other), so prefix hits stay correct.
//   - Admission (can_allocate/allocate) keeps watermark_blocks() available
//     (free + cached) for running decodes; appends and forks may use them.
// Contiguous layout (KvLayout::contiguous, a baseline for measuring paging):
//   allocate() reserves ceil(max_model_len / block_size) blocks up front; no
//   sharing and no prefix caching; fork() reserves a whole region for the child
//   and reports copies of the parent's filled blocks.
//
// Check-then-commit: can_allocate/can_append/can_fork say whether the call will
// succeed; failures are values (Result errors), and a failed call changes
// nothing. Contract with the executor: every slot returned by a call is written
// (K/V) by the step that follows it, after that step's block copies and before
// any attention in the same layer reads it (a later sequence may hit those
// blocks in the same step). Never free a sequence whose returned slots were not
// computed: its full blocks would stay cached with unwritten contents.
//
// Pending tokens (scheduling one step ahead): append_pending() books slots
// whose token ids are not known yet (the step in flight samples them). A
// block holding a pending slot is not hashed or registered until commit()
// gives the id; blocks are registered strictly in order, so a chain waits
// for its first pending block. A sequence freed with pending slots simply
// leaves those blocks unregistered. fork() refuses a parent with pending
// slots.
//
// Costs: append is O(1) amortized per token (a full block is hashed once,
// O(block_size)); allocate is O(prompt length). Not thread-safe: one owner
// (the block-manager actor).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/block_hash.hpp"
#include "actors/block_pool.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

using SeqId = uint64_t;
using Slot = int64_t;  // block_id * block_size + offset_in_block

enum class KvLayout : uint8_t { paged, contiguous };
enum class AllocStatus : uint8_t { ok, later, never };

struct BlockManagerConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  double watermark = 0.01;  // fraction of num_blocks (floored) kept for decodes
  bool enable_prefix_caching = true;  // paged layout only
  KvLayout layout = KvLayout::paged;
  int32_t max_model_len = 0;  // contiguous layout: tokens reserved per sequence
  int32_t sliding_window = 0;  // > 0: every layer's window (release_outside_window)
  BlockHashFn hash_fn = &hash_block;
};

struct BlockCopy {
  BlockId src = -1;
  BlockId dst = -1;
  bool operator==(const BlockCopy&) const = default;
};

struct Allocation {
  int32_t num_cached_tokens = 0;  // prompt tokens found in the prefix cache
  std::vector<Slot> slots;        // for prompt[num_cached_tokens, +slots.size())
};

struct AppendResult {
  std::vector<Slot> slots;         // one per appended token, in order
  std::vector<BlockCopy> copies;   // copy-on-write, run before attention
};

// Prefix-cache counters, in TOKENS: queried = prompt tokens passed to
// successful allocate() calls; hit = of those, tokens served from the cache.
struct PrefixCacheStats {
  uint64_t queried_tokens = 0;
  uint64_t hit_tokens = 0;
  uint64_t evicted_blocks = 0;
  bool operator==(const PrefixCacheStats&) const = default;
};

// A copy of the whole state for the UI and for tests.
struct BlockSnapshot {
  BlockState state = BlockState::free;
  int32_t ref_count = 0;
  std::vector<SeqId> seqs;  // sequences whose tables hold it, ascending
  bool operator==(const BlockSnapshot&) const = default;
};
struct SeqSnapshot {
  SeqId seq = 0;
  int32_t num_tokens = 0;
  std::vector<BlockId> table;
  bool operator==(const SeqSnapshot&) const = default;
};
struct PoolSnapshot {
  int32_t block_size = 0;
  int32_t total_blocks = 0, free_blocks = 0, cached_blocks = 0, used_blocks = 0;
  int32_t watermark_blocks = 0;
  PrefixCacheStats stats;
  std::vector<BlockSnapshot> blocks;  // [total_blocks]
  std::vector<SeqSnapshot> seqs;      // ascending seq id
  bool operator==(const PoolSnapshot&) const = default;
};
// What the pool's owner copies for a snapshot: flat copies, no per-block
// allocation, no sorting (BlockManager::capture()). assemble() builds the
// PoolSnapshot from it on any thread (a reader's), so the owner (the
// block-manager actor) never pays the snapshot's O(pool) build.
struct PoolCapture {
  PoolSnapshot header;              // counters only: blocks and seqs empty
  std::vector<BlockState> states;   // [total_blocks]
  std::vector<int32_t> ref_counts;  // [total_blocks]
  std::vector<SeqSnapshot> seqs;    // any order
};
PoolSnapshot assemble(PoolCapture capture);

class BlockManager {
 public:
  // Fails on a bad config: block_size < 1, num_blocks < 0, watermark outside
  // [0, 1), or a contiguous layout without max_model_len > 0.
  static Result<BlockManager> create(const BlockManagerConfig& config);

  // Whether allocate(seq, prompt) for the whole prompt would succeed now (ok),
  // could after others free blocks (later), or can never fit (never: the
  // prompt alone needs more than total - watermark blocks, or exceeds
  // max_model_len when contiguous). num_seqs counts the group's sequences; it
  // matters only for the contiguous layout (paged forks share the prompt).
  AllocStatus can_allocate(std::span<const TokenId> prompt, int32_t num_seqs = 1) const;
  // Creates `seq` for `prompt` (non-empty; seq must be new): reuses cached
  // prefix blocks, then gives slots to at most max_new_tokens further prompt
  // tokens (chunked prefill; the rest come through append_slots).
  Result<Allocation> allocate(SeqId seq, std::span<const TokenId> prompt,
                              int32_t max_new_tokens = std::numeric_limits<int32_t>::max());

  // Whether appending num_new_tokens to each of seqs (one after another)
  // will succeed. Conservative for siblings sharing a last block.
  bool can_append(std::span<const SeqId> seqs, int32_t num_new_tokens = 1) const;
  // Gives slots to `tokens` (the ids whose K/V the next step writes: a decoded
  // token, or the next prompt chunk). Appends to out.slots / out.copies (not
  // cleared, so one buffer can collect a whole batch).
  Result<void> append_slots(SeqId seq, std::span<const TokenId> tokens, AppendResult& out);
  Result<AppendResult> append_slots(SeqId seq, std::span<const TokenId> tokens);
  // Books n slots whose token ids come later through commit(). Same capacity
  // rules as append_slots.
  Result<void> append_pending(SeqId seq, int32_t n, AppendResult& out);
  // The id of the pending token at `position` of seq; registers the blocks
  // this completes. Errors: unknown seq, or position not a pending slot.
  Result<void> commit(SeqId seq, int32_t position, TokenId token);
  int32_t num_pending(SeqId seq) const;  // 0 if unknown
  // Speculative decoding: drops seq's slots from position num_tokens on
  // (drafted tokens are booked as pending; the rejected ones are never
  // committed). Requires every dropped slot to be pending, so none lies in a
  // registered block (prefix-cache hashes cover committed full blocks only).
  // Blocks left empty go back to the pool, tail first; the kept last block's
  // fill shrinks. Errors (nothing changed): unknown seq, num_tokens outside
  // [0, num_tokens(seq)], or a dropped slot that is not pending.
  Result<void> rollback(SeqId seq, int32_t num_tokens);

  bool can_fork(SeqId parent, int32_t num_children = 1) const;
  // Creates `child` (new id) sharing all of parent's blocks. Returns the block
  // copies to run first: always none in the paged layout.
  Result<std::vector<BlockCopy>> fork(SeqId parent, SeqId child);

  // Sliding window: gives back seq's blocks wholly before the window of a
  // query at position first_query (every key position < first_query -
  // sliding_window + 1), which no query at or after first_query reads; the
  // caller passes the earliest position any step not yet run may query.
  // Returns how many table entries became holes (0: no window, the
  // contiguous layout, an unknown seq, or nothing out of the window). Only
  // blocks the prefix-cache chain has passed are released (never a pending
  // one). O(blocks released).
  int32_t release_outside_window(SeqId seq, int32_t first_query);
  int64_t window_released_blocks() const { return window_released_; }

  // Releases all blocks of seq (tail first). Also the preemption path.
  Result<void> free(SeqId seq);
  void free_group(std::span<const SeqId> seqs);  // unknown ids are skipped

  bool contains(SeqId seq) const { return seqs_.contains(seq); }
  int32_t num_seqs() const { return int32_t(seqs_.size()); }
  int32_t num_tokens(SeqId seq) const;              // 0 if unknown
  std::span<const BlockId> block_table(SeqId seq) const;  // empty if unknown

  int32_t total_blocks() const { return pool_.total_blocks(); }
  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t num_cached_blocks() const { return pool_.num_cached_blocks(); }
  int32_t num_used_blocks() const { return pool_.num_used_blocks(); }
  // Slots booked in used blocks (a shared block counts once): O(1).
  int64_t stored_tokens() const { return pool_.stored_tokens(); }
  // Removes blocks from the prefix cache (see BlockPool::unregister).
  int32_t unregister(std::span<const BlockRef> blocks);
  // Blocks registered since the last call (for a step's registration log).
  std::vector<BlockRef> take_registered();
  int32_t watermark_blocks() const { return watermark_blocks_; }
  PrefixCacheStats prefix_cache_stats() const;
  const BlockManagerConfig& config() const { return config_; }

  PoolSnapshot snapshot() const;  // assemble(capture())
  PoolCapture capture() const;    // O(blocks) flat copies + O(seqs' tables)
  // The pool's invariants plus: every block's ref count equals the number of
  // table references to it; each table has exactly ceil(num_tokens /
  // block_size) entries (contiguous: the reservation), so at most one is
  // partly filled, and its holes (kNoBlock) are exactly its first `holes`; registered blocks are full wherever they are referenced;
  // sharers of a partly filled block agree on its fill.
  Result<void> check_invariants() const;

 private:
  struct SeqState {
    std::vector<BlockId> table;
    int32_t num_tokens = 0;
    uint64_t chain_hash = kRootBlockHash;  // hash of the last full block
    BlockRef chain_parent = kRootParent;   // registered block standing for it
    bool chain_broken = false;             // no further blocks get registered
    int32_t hashed_blocks = 0;             // leading full blocks the chain has passed
    int32_t num_pending = 0;               // slots booked without a token id yet
    int32_t holes = 0;                     // leading entries released (kNoBlock)
  };
  struct PrefixMatch {
    int32_t blocks = 0;
    int32_t revived = 0;  // of those, cached blocks (ref 0) that a hit revives
    uint64_t hash = kRootBlockHash;
    BlockRef parent = kRootParent;
  };

  explicit BlockManager(const BlockManagerConfig& config);

  bool paged() const { return config_.layout == KvLayout::paged; }
  bool caching() const { return caching_; }
  BlockId take_block();
  PrefixMatch match_prefix(std::span<const TokenId> prompt, std::vector<BlockId>* out) const;
  int32_t blocks_to_append(const SeqState& s, int32_t n) const;
  void write_tokens(SeqState& s, std::span<const TokenId> tokens, std::vector<Slot>& slots);
  void write_pending(SeqState& s, int32_t n, std::vector<Slot>& slots);
  void put_slot(SeqState& s, TokenId t, std::vector<Slot>& slots);
  void advance_chain(SeqState& s);
  void on_block_full(SeqState& s, BlockId b);
  Result<Allocation> allocate_contiguous(SeqId seq, std::span<const TokenId> prompt,
                                         int32_t max_new_tokens);
  Result<std::vector<BlockCopy>> fork_contiguous(const SeqState& parent, SeqId child);
  Result<void> check_tables() const;

  BlockManagerConfig config_;
  bool caching_;
  int32_t watermark_blocks_;
  int32_t reserve_blocks_;  // contiguous: blocks per sequence
  BlockPool pool_;
  std::unordered_map<SeqId, SeqState> seqs_;
  PrefixCacheStats stats_;
  std::vector<BlockRef> registered_;  // since take_registered()
  int64_t window_released_ = 0;
};

// A table entry release_outside_window() gave back (no block).
inline constexpr BlockId kNoBlock = -1;

// The token id a pending slot holds until commit().
inline constexpr TokenId kPendingToken = -2;

}  // namespace pagoda::actors
