#include "actors/block_pool.hpp"

#include <algorithm>
#include <cassert>

namespace pagoda::actors {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      meta_(size_t(std::max(num_blocks, 0))),
      token_ids_(meta_.size() * size_t(std::max(block_size, 1)), -1) {
  assert(num_blocks >= 0 && block_size >= 1);
  free_.reserve(meta_.size());
  for (BlockId b = total_blocks() - 1; b >= 0; --b) {
    free_.push_back(b);
    meta_[size_t(b)].in_free_list = true;
  }
  by_hash_.reserve(meta_.size());
}

BlockState BlockPool::state(BlockId b) const {
  const Meta& m = meta_[size_t(b)];
  if (m.ref > 0) return BlockState::used;
  return m.registered ? BlockState::cached : BlockState::free;
}

std::optional<BlockId> BlockPool::take() {
  BlockId b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
    meta_[size_t(b)].in_free_list = false;
  } else if (lru_head_ >= 0) {
    b = evict_lru();
  } else {
    return std::nullopt;
  }
  Meta& m = meta_[size_t(b)];
  m.ref = 1;
  m.generation++;
  m.parent = kRootParent;
  m.fill = 0;
  num_used_++;
  return b;
}

BlockId BlockPool::evict_lru() {
  BlockId b = lru_head_;
  lru_unlink(b);
  Meta& m = meta_[size_t(b)];
  by_hash_.erase(m.hash);
  m.registered = false;
  num_cached_--;
  num_evictions_++;
  return b;
}

void BlockPool::ref(BlockId b) {
  Meta& m = meta_[size_t(b)];
  assert(m.ref > 0 || m.registered);
  if (m.ref == 0) {
    lru_unlink(b);
    num_cached_--;
    num_used_++;
    stored_ += m.fill;
  }
  m.ref++;
}

void BlockPool::unref(BlockId b) {
  Meta& m = meta_[size_t(b)];
  assert(m.ref > 0);
  if (--m.ref > 0) return;
  num_used_--;
  stored_ -= m.fill;
  if (m.registered) {
    lru_push_back(b);
    num_cached_++;
  } else {
    free_.push_back(b);
    m.in_free_list = true;
    m.fill = 0;
  }
}

void BlockPool::add_fill(BlockId b, int32_t n) {
  Meta& m = meta_[size_t(b)];
  assert(m.ref > 0 && m.fill + n >= 0 && m.fill + n <= block_size_);
  m.fill += n;
  stored_ += n;
}

bool BlockPool::unregister(BlockRef r) {
  if (!is_live_registered(r)) return false;
  Meta& m = meta_[size_t(r.id)];
  by_hash_.erase(m.hash);
  m.registered = false;
  if (m.ref == 0) {
    lru_unlink(r.id);
    num_cached_--;
    free_.push_back(r.id);
    m.in_free_list = true;
    m.fill = 0;
  }
  return true;
}

std::optional<BlockId> BlockPool::register_full(BlockId b, uint64_t hash, BlockRef parent) {
  Meta& m = meta_[size_t(b)];
  assert(m.ref > 0 && !m.registered);
  auto [it, inserted] = by_hash_.try_emplace(hash, b);
  if (!inserted) {
    const BlockId other = it->second;
    const bool same = meta_[size_t(other)].parent == parent &&
                      std::ranges::equal(tokens(other), tokens(b));
    return same ? std::optional<BlockId>(other) : std::nullopt;
  }
  m.registered = true;
  m.hash = hash;
  m.parent = parent;
  return b;
}

std::optional<BlockId> BlockPool::lookup(uint64_t hash, std::span<const TokenId> toks,
                                         BlockRef parent) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const BlockId b = it->second;
  if (!(meta_[size_t(b)].parent == parent) || !std::ranges::equal(tokens(b), toks)) {
    return std::nullopt;  // a hash collision: a miss, never a wrong block
  }
  return b;
}

void BlockPool::lru_push_back(BlockId b) {
  Meta& m = meta_[size_t(b)];
  m.lru_prev = lru_tail_;
  m.lru_next = -1;
  if (lru_tail_ >= 0) {
    meta_[size_t(lru_tail_)].lru_next = b;
  } else {
    lru_head_ = b;
  }
  lru_tail_ = b;
}

void BlockPool::lru_unlink(BlockId b) {
  Meta& m = meta_[size_t(b)];
  if (m.lru_prev >= 0) {
    meta_[size_t(m.lru_prev)].lru_next = m.lru_next;
  } else {
    lru_head_ = m.lru_next;
  }
  if (m.lru_next >= 0) {
    meta_[size_t(m.lru_next)].lru_prev = m.lru_prev;
  } else {
    lru_tail_ = m.lru_prev;
  }
  m.lru_prev = m.lru_next = -1;
}

// seen[b]: 1 = on the free list, 2 = on the LRU list.
Result<void> BlockPool::check_lists(std::vector<uint8_t>& seen) const {
  const auto fail = [](BlockId b, const char* what) {
    return make_error("block " + std::to_string(b) + ": " + what);
  };
  for (BlockId b : free_) {
    if (b < 0 || b >= total_blocks()) return fail(b, "free list holds a bad id");
    const Meta& m = meta_[size_t(b)];
    if (seen[size_t(b)] != 0) return fail(b, "twice on the free list");
    if (m.ref != 0 || m.registered || !m.in_free_list) return fail(b, "free but not free");
    seen[size_t(b)] = 1;
  }
  int32_t cached = 0;
  BlockId prev = -1;
  for (BlockId b = lru_head_; b >= 0; prev = b, b = meta_[size_t(b)].lru_next) {
    const Meta& m = meta_[size_t(b)];
    if (seen[size_t(b)] != 0) return fail(b, "on the LRU list twice or also free");
    if (m.ref != 0 || !m.registered) return fail(b, "on the LRU list but not cached");
    if (m.lru_prev != prev) return fail(b, "LRU back link broken");
    seen[size_t(b)] = 2;
    if (++cached > total_blocks()) return fail(b, "LRU list has a cycle");
  }
  if (prev != lru_tail_) return make_error("LRU tail does not end the list");
  if (cached != num_cached_) return make_error("cached count differs from the LRU list");
  return {};
}

Result<void> BlockPool::check_hash_map() const {
  int32_t registered = 0;
  for (BlockId b = 0; b < total_blocks(); ++b) {
    const Meta& m = meta_[size_t(b)];
    if (!m.registered) continue;
    registered++;
    auto it = by_hash_.find(m.hash);
    if (it == by_hash_.end() || it->second != b) {
      return make_error("block " + std::to_string(b) + ": its hash does not map back to it");
    }
  }
  if (size_t(registered) != by_hash_.size()) {
    return make_error("hash map holds entries for unregistered blocks");
  }
  return {};
}

Result<void> BlockPool::check_invariants() const {
  std::vector<uint8_t> seen(meta_.size(), 0);
  if (auto r = check_lists(seen); !r) return r;
  int32_t used = 0;
  for (BlockId b = 0; b < total_blocks(); ++b) {
    const Meta& m = meta_[size_t(b)];
    if (m.ref < 0) return make_error("block " + std::to_string(b) + ": negative ref count");
    if (m.ref > 0) {
      used++;
      if (seen[size_t(b)] != 0) {
        return make_error("block " + std::to_string(b) + ": used but on a free/LRU list");
      }
    } else if (seen[size_t(b)] == 0) {
      return make_error("block " + std::to_string(b) + ": ref 0 but on no list (leaked)");
    }
    if (m.in_free_list != (seen[size_t(b)] == 1)) {
      return make_error("block " + std::to_string(b) + ": free-list flag is wrong");
    }
  }
  if (used != num_used_) return make_error("used count differs from the ref counts");
  int64_t stored = 0;
  for (const Meta& m : meta_) stored += m.ref > 0 ? m.fill : 0;
  if (stored != stored_) return make_error("stored token count differs from the block fills");
  if (num_free_blocks() + num_cached_ + num_used_ != total_blocks()) {
    return make_error("free + cached + used != total");
  }
  return check_hash_map();
}

}  // namespace pagoda::actors
