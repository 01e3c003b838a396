#include "actors/block_manager.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <string>

namespace pagoda::actors {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Error seq_error(SeqId seq, const char* what) {
  return make_error("block manager: sequence " + std::to_string(seq) + " " + what);
}

}  // namespace

Result<BlockManager> BlockManager::create(const BlockManagerConfig& c) {
  if (c.block_size < 1) return make_error("block manager: block_size must be >= 1");
  if (c.num_blocks < 0) return make_error("block manager: num_blocks must be >= 0");
  if (!(c.watermark >= 0.0 && c.watermark < 1.0)) {
    return make_error("block manager: watermark must be in [0, 1)");
  }
  if (c.layout == KvLayout::contiguous && c.max_model_len <= 0) {
    return make_error("block manager: the contiguous layout needs max_model_len > 0");
  }
  if (c.hash_fn == nullptr) return make_error("block manager: hash_fn is null");
  return BlockManager(c);
}

BlockManager::BlockManager(const BlockManagerConfig& c)
    : config_(c),
      caching_(c.enable_prefix_caching && c.layout == KvLayout::paged),
      watermark_blocks_(int32_t(std::floor(c.watermark * c.num_blocks))),
      reserve_blocks_(c.layout == KvLayout::contiguous
                          ? int32_t(ceil_div(c.max_model_len, c.block_size))
                          : 0),
      pool_(c.num_blocks, c.block_size) {}

// Only called after a capacity check, so the pool cannot be empty.
BlockId BlockManager::take_block() {
  const std::optional<BlockId> b = pool_.take();
  assert(b.has_value());
  return b.value_or(0);
}

// ---- admission ------------------------------------------------------------

BlockManager::PrefixMatch BlockManager::match_prefix(std::span<const TokenId> prompt,
                                                     std::vector<BlockId>* out) const {
  PrefixMatch m;
  if (!caching() || prompt.empty()) return m;
  const size_t bs = size_t(block_size());
  const size_t max_blocks = (prompt.size() - 1) / bs;  // keep >= 1 token to compute
  for (size_t i = 0; i < max_blocks; ++i) {
    const auto toks = prompt.subspan(i * bs, bs);
    const uint64_t h = config_.hash_fn(m.hash, toks);
    const auto b = pool_.lookup(h, toks, m.parent);
    if (!b) break;
    m.blocks++;
    if (pool_.ref_count(*b) == 0) m.revived++;
    m.hash = h;
    m.parent = pool_.identity(*b);
    if (out != nullptr) out->push_back(*b);
  }
  return m;
}

AllocStatus BlockManager::can_allocate(std::span<const TokenId> prompt,
                                       int32_t num_seqs) const {
  if (prompt.empty()) return AllocStatus::never;
  const int64_t usable = int64_t(total_blocks()) - watermark_blocks_;
  const int64_t available = pool_.num_available_blocks();
  if (!paged()) {
    const int64_t need = int64_t(reserve_blocks_) * std::max(num_seqs, 1);
    if (int64_t(prompt.size()) > config_.max_model_len || need > usable) {
      return AllocStatus::never;
    }
    return available - need >= watermark_blocks_ ? AllocStatus::ok : AllocStatus::later;
  }
  const int64_t need_total = ceil_div(int64_t(prompt.size()), block_size());
  if (need_total > usable) return AllocStatus::never;
  const PrefixMatch m = match_prefix(prompt, nullptr);
  const int64_t take = need_total - m.blocks + m.revived;
  return available - take >= watermark_blocks_ ? AllocStatus::ok : AllocStatus::later;
}

Result<Allocation> BlockManager::allocate(SeqId seq, std::span<const TokenId> prompt,
                                          int32_t max_new_tokens) {
  if (seqs_.contains(seq)) return seq_error(seq, "already exists");
  if (prompt.empty()) return seq_error(seq, "has an empty prompt");
  if (!paged()) return allocate_contiguous(seq, prompt, max_new_tokens);

  std::vector<BlockId> hits;
  const PrefixMatch m = match_prefix(prompt, &hits);
  const int32_t bs = block_size();
  const int64_t hit_tokens = int64_t(m.blocks) * bs;
  const int64_t chunk = std::min<int64_t>(int64_t(prompt.size()) - hit_tokens,
                                          std::max(max_new_tokens, 0));
  const int64_t new_blocks = ceil_div(hit_tokens + chunk, bs) - m.blocks;
  if (int64_t(pool_.num_available_blocks()) - m.revived - new_blocks < watermark_blocks_) {
    return seq_error(seq, "cannot be admitted: not enough free KV blocks");
  }
  SeqState s;
  for (BlockId b : hits) pool_.ref(b);
  s.table = std::move(hits);
  s.num_tokens = int32_t(hit_tokens);
  s.chain_hash = m.hash;
  s.chain_parent = m.parent;
  s.hashed_blocks = m.blocks;
  Allocation a;
  a.num_cached_tokens = int32_t(hit_tokens);
  a.slots.reserve(size_t(chunk));
  write_tokens(s, prompt.subspan(size_t(hit_tokens), size_t(chunk)), a.slots);
  if (caching()) {
    stats_.queried_tokens += prompt.size();
    stats_.hit_tokens += uint64_t(hit_tokens);
  }
  seqs_.emplace(seq, std::move(s));
  return a;
}

Result<Allocation> BlockManager::allocate_contiguous(SeqId seq, std::span<const TokenId> prompt,
                                                     int32_t max_new_tokens) {
  if (int64_t(prompt.size()) > config_.max_model_len) {
    return seq_error(seq, "has a prompt longer than max_model_len");
  }
  if (pool_.num_available_blocks() - reserve_blocks_ < watermark_blocks_) {
    return seq_error(seq, "cannot be admitted: not enough free KV blocks");
  }
  SeqState s;
  s.table.reserve(size_t(reserve_blocks_));
  for (int32_t i = 0; i < reserve_blocks_; ++i) s.table.push_back(take_block());
  const size_t chunk = std::min(prompt.size(), size_t(std::max(max_new_tokens, 0)));
  Allocation a;
  a.slots.reserve(chunk);
  write_tokens(s, prompt.first(chunk), a.slots);
  seqs_.emplace(seq, std::move(s));
  return a;
}

// ---- appending ------------------------------------------------------------

int32_t BlockManager::blocks_to_append(const SeqState& s, int32_t n) const {
  if (!paged() || n <= 0) return 0;
  const int32_t bs = block_size();
  const bool cow = s.num_tokens % bs != 0 && pool_.ref_count(s.table.back()) > 1;
  const int64_t grow = ceil_div(int64_t(s.num_tokens) + n, bs) - int64_t(s.table.size());
  return int32_t(grow) + (cow ? 1 : 0);
}

bool BlockManager::can_append(std::span<const SeqId> seqs, int32_t num_new_tokens) const {
  int64_t need = 0;
  for (SeqId id : seqs) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return false;
    const SeqState& s = it->second;
    if (!paged() && int64_t(s.num_tokens) + num_new_tokens > config_.max_model_len) {
      return false;
    }
    need += blocks_to_append(s, num_new_tokens);
  }
  return need <= pool_.num_available_blocks();
}

Result<void> BlockManager::append_slots(SeqId seq, std::span<const TokenId> tokens,
                                        AppendResult& out) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return seq_error(seq, "is unknown");
  SeqState& s = it->second;
  if (tokens.empty()) return {};
  const int32_t bs = block_size();
  if (!paged() && int64_t(s.num_tokens) + int64_t(tokens.size()) > config_.max_model_len) {
    return seq_error(seq, "would exceed its max_model_len reservation");
  }
  const int64_t n = int64_t(tokens.size());
  if (n > std::numeric_limits<int32_t>::max() ||
      blocks_to_append(s, int32_t(n)) > pool_.num_available_blocks()) {
    return seq_error(seq, "cannot grow: not enough free KV blocks");
  }
  if (paged() && s.num_tokens % bs != 0 && pool_.ref_count(s.table.back()) > 1) {
    const BlockId src = s.table.back();
    const BlockId dst = take_block();
    std::ranges::copy(pool_.tokens(src), pool_.tokens(dst).begin());
    pool_.add_fill(dst, pool_.fill(src));
    pool_.unref(src);  // still >= 1: the sharers keep it
    s.table.back() = dst;
    out.copies.push_back(BlockCopy{src, dst});
  }
  out.slots.reserve(out.slots.size() + tokens.size());
  write_tokens(s, tokens, out.slots);
  return {};
}

Result<void> BlockManager::append_pending(SeqId seq, int32_t n, AppendResult& out) {
  if (n <= 0) return {};
  const std::vector<TokenId> placeholders(size_t(n), kPendingToken);
  return append_slots(seq, placeholders, out);
}

Result<void> BlockManager::commit(SeqId seq, int32_t position, TokenId token) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return seq_error(seq, "is unknown (commit)");
  SeqState& s = it->second;
  const int32_t bs = block_size();
  if (position < 0 || position >= s.num_tokens || token < 0) {
    return seq_error(seq, "has no such pending position");
  }
  TokenId& slot = pool_.tokens(s.table[size_t(position / bs)])[size_t(position % bs)];
  if (slot != kPendingToken) return seq_error(seq, "has no pending token at that position");
  slot = token;
  s.num_pending--;
  if (caching()) advance_chain(s);
  return {};
}

int32_t BlockManager::num_pending(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.num_pending;
}

Result<void> BlockManager::rollback(SeqId seq, int32_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return seq_error(seq, "is unknown (rollback)");
  SeqState& s = it->second;
  if (num_tokens < 0 || num_tokens > s.num_tokens) return seq_error(seq, "cannot roll back to that length");
  const int32_t bs = block_size();
  for (int32_t p = num_tokens; p < s.num_tokens; ++p) {
    if (pool_.tokens(s.table[size_t(p / bs)])[size_t(p % bs)] != kPendingToken) {
      return seq_error(seq, "cannot roll back a committed token");
    }
  }
  const size_t keep_blocks = size_t(ceil_div(int64_t(num_tokens), bs));
  for (int32_t p = s.num_tokens; p > num_tokens;) {  // give back fill, block by block
    const int32_t block_start = (p - 1) / bs * bs;
    const int32_t lo = std::max(block_start, num_tokens);
    pool_.add_fill(s.table[size_t(block_start / bs)], -(p - lo));
    p = lo;
  }
  s.num_pending -= s.num_tokens - num_tokens;
  s.num_tokens = num_tokens;
  if (paged()) {
    while (s.table.size() > keep_blocks) {
      if (s.table.back() != kNoBlock) pool_.unref(s.table.back());
      s.table.pop_back();
    }
    s.holes = std::min(s.holes, int32_t(s.table.size()));
  }
  return {};
}

int32_t BlockManager::unregister(std::span<const BlockRef> blocks) {
  int32_t n = 0;
  for (const BlockRef& r : blocks) n += pool_.unregister(r) ? 1 : 0;
  return n;
}

std::vector<BlockRef> BlockManager::take_registered() {
  std::vector<BlockRef> out;
  out.swap(registered_);
  return out;
}

Result<AppendResult> BlockManager::append_slots(SeqId seq, std::span<const TokenId> tokens) {
  AppendResult r;
  if (auto ok = append_slots(seq, tokens, r); !ok) return ok.error();
  return r;
}

// Requires: enough available blocks were checked, and the last block, if
// partly filled, is held by s alone.
void BlockManager::write_tokens(SeqState& s, std::span<const TokenId> tokens,
                                std::vector<Slot>& slots) {
  for (TokenId t : tokens) put_slot(s, t, slots);
}

void BlockManager::put_slot(SeqState& s, TokenId t, std::vector<Slot>& slots) {
  const int32_t bs = block_size();
  const int32_t off = s.num_tokens % bs;
  if (off == 0 && paged()) s.table.push_back(take_block());
  const BlockId b = s.table[size_t(s.num_tokens / bs)];
  pool_.tokens(b)[size_t(off)] = t;
  pool_.add_fill(b, 1);
  slots.push_back(Slot(b) * bs + off);
  s.num_tokens++;
  if (t == kPendingToken) s.num_pending++;
  if (off + 1 == bs && caching()) advance_chain(s);
}

// Hashes and registers, in order, the full blocks after the chain's last one
// that hold no pending slot.
void BlockManager::advance_chain(SeqState& s) {
  const int32_t bs = block_size();
  while ((int64_t(s.hashed_blocks) + 1) * bs <= s.num_tokens) {
    const BlockId b = s.table[size_t(s.hashed_blocks)];
    if (std::ranges::find(pool_.tokens(b), kPendingToken) != pool_.tokens(b).end()) return;
    on_block_full(s, b);
    s.hashed_blocks++;
  }
}

// Hashes the block s just filled and registers it, chaining from the
// registered block standing for s's previous full block. The chain breaks
// (no further registration for s) when that block was evicted meanwhile or
// on a hash collision; a break costs cache hits, never correctness.
void BlockManager::on_block_full(SeqState& s, BlockId b) {
  s.chain_hash = config_.hash_fn(s.chain_hash, pool_.tokens(b));
  if (s.chain_broken) return;
  if (!(s.chain_parent == kRootParent) && !pool_.is_live_registered(s.chain_parent)) {
    s.chain_broken = true;
    return;
  }
  const auto canonical = pool_.register_full(b, s.chain_hash, s.chain_parent);
  if (!canonical) {
    s.chain_broken = true;
    return;
  }
  if (*canonical == b) registered_.push_back(pool_.identity(b));
  s.chain_parent = pool_.identity(*canonical);
}

// ---- fork and free ----------------------------------------------------------

bool BlockManager::can_fork(SeqId parent, int32_t num_children) const {
  if (!seqs_.contains(parent)) return false;
  if (paged()) return true;
  return int64_t(reserve_blocks_) * std::max(num_children, 0) <=
         pool_.num_available_blocks();
}

Result<std::vector<BlockCopy>> BlockManager::fork(SeqId parent, SeqId child) {
  auto it = seqs_.find(parent);
  if (it == seqs_.end()) return seq_error(parent, "is unknown (fork parent)");
  if (seqs_.contains(child)) return seq_error(child, "already exists (fork child)");
  if (it->second.num_pending > 0) return seq_error(parent, "has pending tokens (fork parent)");
  if (!paged()) return fork_contiguous(it->second, child);
  SeqState s = it->second;
  for (BlockId b : s.table) {
    if (b != kNoBlock) pool_.ref(b);  // the child shares the parent's holes
  }
  seqs_.emplace(child, std::move(s));
  return std::vector<BlockCopy>{};
}

Result<std::vector<BlockCopy>> BlockManager::fork_contiguous(const SeqState& parent,
                                                            SeqId child) {
  if (pool_.num_available_blocks() < reserve_blocks_) {
    return seq_error(child, "cannot be forked: not enough free KV blocks");
  }
  SeqState s;
  s.num_tokens = parent.num_tokens;
  s.table.reserve(size_t(reserve_blocks_));
  std::vector<BlockCopy> copies;
  const int64_t filled = ceil_div(parent.num_tokens, block_size());
  for (int32_t i = 0; i < reserve_blocks_; ++i) {
    const BlockId b = take_block();
    s.table.push_back(b);
    if (i < filled) {
      const BlockId src = parent.table[size_t(i)];
      std::ranges::copy(pool_.tokens(src), pool_.tokens(b).begin());
      pool_.add_fill(b, pool_.fill(src));
      copies.push_back(BlockCopy{src, b});
    }
  }
  seqs_.emplace(child, std::move(s));
  return copies;
}

int32_t BlockManager::release_outside_window(SeqId seq, int32_t first_query) {
  const int32_t w = config_.sliding_window;
  auto it = seqs_.find(seq);
  if (w <= 0 || !paged() || it == seqs_.end()) return 0;
  SeqState& s = it->second;
  const int64_t bs = block_size();
  // Block i's last key, (i + 1) * bs - 1, is outside the window when it is
  // <= first_query - w, i.e. (i + 1) * bs <= first_query - w + 1.
  int64_t limit = (int64_t(first_query) - w + 1) / bs;
  limit = std::min<int64_t>(limit, int64_t(s.table.size()) - 1);  // never the last block
  if (caching()) limit = std::min<int64_t>(limit, s.hashed_blocks);  // the chain reads them
  int32_t n = 0;
  for (; s.holes < limit; ++s.holes, ++n) {
    pool_.unref(s.table[size_t(s.holes)]);
    s.table[size_t(s.holes)] = kNoBlock;
  }
  window_released_ += n;
  return n;
}

Result<void> BlockManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return seq_error(seq, "is unknown (free)");
  const std::vector<BlockId>& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) {  // tail first
    if (*b != kNoBlock) pool_.unref(*b);
  }
  seqs_.erase(it);
  return {};
}

void BlockManager::free_group(std::span<const SeqId> seqs) {
  for (SeqId id : seqs) {
    if (seqs_.contains(id)) (void)free(id);
  }
}

// ---- queries ----------------------------------------------------------------

int32_t BlockManager::num_tokens(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.num_tokens;
}

std::span<const BlockId> BlockManager::block_table(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return {};
  return it->second.table;
}

PrefixCacheStats BlockManager::prefix_cache_stats() const {
  PrefixCacheStats s = stats_;
  s.evicted_blocks = pool_.num_evictions();
  return s;
}

// ---- invariants -------------------------------------------------------------

Result<void> BlockManager::check_tables() const {
  const int32_t bs = block_size();
  std::vector<int32_t> refs(size_t(total_blocks()), 0);
  std::vector<int32_t> partial_fill(size_t(total_blocks()), -1);
  for (const auto& [id, s] : seqs_) {
    const size_t want = paged() ? size_t(ceil_div(s.num_tokens, bs)) : size_t(reserve_blocks_);
    if (s.table.size() != want) return seq_error(id, "has a table of the wrong length");
    for (size_t i = 0; i < s.table.size(); ++i) {
      const BlockId b = s.table[i];
      if ((b == kNoBlock) != (i < size_t(s.holes))) return seq_error(id, "has a hole out of place");
      if (b == kNoBlock) continue;
      if (b < 0 || b >= total_blocks()) return seq_error(id, "holds a bad block id");
      refs[size_t(b)]++;
      const int64_t fill = std::clamp<int64_t>(int64_t(s.num_tokens) - int64_t(i) * bs, 0, bs);
      if (pool_.is_registered(b) && fill != bs) {
        return seq_error(id, "holds a registered block that is not full");
      }
      if (pool_.is_registered(b) &&
          std::ranges::find(pool_.tokens(b), kPendingToken) != pool_.tokens(b).end()) {
        return seq_error(id, "holds a registered block with a pending token");
      }
      if (pool_.fill(b) != fill) return seq_error(id, "holds a block of the wrong fill");
      if (fill < bs) {
        int32_t& seen = partial_fill[size_t(b)];
        if (seen >= 0 && seen != fill) return seq_error(id, "disagrees on a shared block's fill");
        seen = int32_t(fill);
      }
    }
  }
  for (BlockId b = 0; b < total_blocks(); ++b) {
    if (refs[size_t(b)] != pool_.ref_count(b)) {
      return make_error("block " + std::to_string(b) + ": ref count " +
                        std::to_string(pool_.ref_count(b)) + " but " +
                        std::to_string(refs[size_t(b)]) + " table references");
    }
    if (!caching() && pool_.is_registered(b)) {
      return make_error("block " + std::to_string(b) + ": registered with caching off");
    }
    if (!paged() && refs[size_t(b)] > 1) {
      return make_error("block " + std::to_string(b) + ": shared in the contiguous layout");
    }
  }
  return {};
}

Result<void> BlockManager::check_invariants() const {
  if (auto r = pool_.check_invariants(); !r) return r;
  return check_tables();
}

}  // namespace pagoda::actors
