// Property tests for actors::BlockManager: long random runs (fixed seeds) of
// allocate (prompts drawn from shared prefixes, so the prefix cache hits) /
// chunked prefill / decode and multi-token appends / fork / beam steps / free,
// on small pools so that admission failures and evictions are frequent.
//
// The test keeps its own model of the KV cache: every physical slot holds a
// fingerprint of the whole token prefix whose K/V was written there (the K/V
// of a token depends on everything before it). The test writes only the slots
// the manager hands out and runs the block copies it reports. After every op:
//   - check_invariants() passes;
//   - every sequence's logical tokens (kept by the test) match what its block
//     table points to, slot by slot, so a wrong cache hit, a missing
//     copy-on-write or a slot shared with another sequence is caught;
//   - used blocks == distinct blocks over all tables, free + cached + used == total;
//   - can_* answers are honoured, and failed calls leave the state unchanged.
#include "actors/block_manager.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace pagoda::actors {
namespace {

using Tokens = std::vector<TokenId>;

// The test's own prefix fingerprint (unrelated to the manager's block hash).
uint64_t extend_fingerprint(uint64_t prev, TokenId t) {
  uint64_t x = (prev ^ (uint64_t(uint32_t(t)) + 0x2545f4914f6cdd1dULL)) * 0x100000001b3ULL;
  x ^= x >> 29;
  x *= 0xd6e8feb86659fd93ULL;
  return x ^ (x >> 32);
}

// A deliberately terrible block hash: collisions everywhere.
uint64_t weak_hash(uint64_t parent, std::span<const TokenId> toks) {
  uint64_t s = parent % 7;
  for (TokenId t : toks) s += uint64_t(t);
  return s % 5;
}

// Blind to the parent: equal blocks under different prefixes always collide.
uint64_t parent_blind_hash(uint64_t, std::span<const TokenId> toks) {
  uint64_t s = 0;
  for (TokenId t : toks) s = s * 31 + uint64_t(t);
  return s;
}

struct ModelSeq {
  Tokens tokens;              // tokens that have slots (written K/V)
  std::vector<uint64_t> fp;   // fp[p] = fingerprint of tokens[0..p]
  Tokens pending;             // prompt tokens still to prefill
  void push(TokenId t) {
    fp.push_back(extend_fingerprint(fp.empty() ? 0 : fp.back(), t));
    tokens.push_back(t);
  }
};

struct Totals {
  uint64_t hits = 0, evictions = 0, copies = 0, alloc_failures = 0, append_failures = 0;
};

class Harness {
 public:
  Harness(uint64_t seed, KvLayout layout, BlockHashFn hash)
      : rng_(seed), mgr_(make_manager(layout, hash)) {
    kv_.assign(size_t(mgr_.total_blocks()) * size_t(mgr_.block_size()), kUnwritten);
    for (int i = 0; i < 4; ++i) prefixes_.push_back(random_tokens(uniform(0, 20)));
  }

  void run(int ops) {
    for (int i = 0; i < ops && !::testing::Test::HasFatalFailure(); ++i) {
      step();
      check_all();
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "first failure at op " << i;
        return;
      }
    }
    std::vector<SeqId> ids;
    for (const auto& [id, s] : seqs_) ids.push_back(id);
    mgr_.free_group(ids);
    seqs_.clear();
    EXPECT_EQ(mgr_.num_used_blocks(), 0);
    EXPECT_EQ(mgr_.num_free_blocks() + mgr_.num_cached_blocks(), mgr_.total_blocks());
    check_all();
    const PrefixCacheStats st = mgr_.prefix_cache_stats();
    EXPECT_LE(st.hit_tokens, st.queried_tokens);
    totals_.hits += st.hit_tokens;
    totals_.evictions += st.evicted_blocks;
  }

  const Totals& totals() const { return totals_; }

 private:
  static constexpr uint64_t kUnwritten = ~uint64_t{0};

  BlockManager make_manager(KvLayout layout, BlockHashFn hash) {
    BlockManagerConfig c;
    const int32_t sizes[] = {1, 2, 4, 8};
    c.block_size = sizes[uniform(0, 3)];
    c.num_blocks = uniform(12, 40) * (layout == KvLayout::paged ? 1 : 3);
    c.watermark = 0.05;
    c.layout = layout;
    c.max_model_len = uniform(16, 48);
    c.hash_fn = hash;
    return std::move(BlockManager::create(c)).value();
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  Tokens random_tokens(int n) {
    Tokens t(static_cast<size_t>(n));
    for (TokenId& x : t) x = uniform(0, 9);  // small vocabulary: identical blocks happen
    return t;
  }
  SeqId random_seq() {
    auto it = seqs_.begin();
    std::advance(it, uniform(0, int(seqs_.size()) - 1));
    return it->first;
  }

  void step() {
    const int r = uniform(0, 99);
    if (seqs_.empty() || (r < 30 && seqs_.size() < 12)) return op_allocate();
    if (r < 65) {
      // Out of blocks: preempt the newest sequence, as the scheduler does.
      if (!op_append(random_seq(), 0)) op_free(seqs_.rbegin()->first);
      return;
    }
    if (r < 70) return op_group_append();
    const bool crowded = seqs_.size() >= 16;
    if (r < 80 && !crowded) return op_fork(random_seq(), next_id_++);
    if (r < 85 && !crowded) return op_beam_step();
    op_free(random_seq());
  }

  Tokens random_prompt() {
    if (uniform(0, 9) == 0) {  // a long fresh prompt: pressure on the pool
      return random_tokens(uniform(1, mgr_.total_blocks() * mgr_.block_size() / 2));
    }
    Tokens p = prefixes_[size_t(uniform(0, 3))];
    Tokens tail = random_tokens(uniform(p.empty() ? 1 : 0, 12));
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  }

  void op_allocate() {
    const SeqId id = next_id_++;
    const Tokens prompt = random_prompt();
    const bool whole = uniform(0, 1) == 0;
    const int32_t chunk = whole ? int32_t(prompt.size()) : uniform(0, int(prompt.size()));
    const AllocStatus status = mgr_.can_allocate(prompt);
    const PoolSnapshot before = mgr_.snapshot();
    auto a = mgr_.allocate(id, prompt, chunk);
    if (!a.ok()) {
      totals_.alloc_failures++;
      EXPECT_FALSE(whole && status == AllocStatus::ok)
          << "can_allocate said ok: " << a.error().message;
      EXPECT_EQ(mgr_.snapshot(), before) << "a failed allocate changed the state";
      return;
    }
    EXPECT_FALSE(whole && status == AllocStatus::never);
    EXPECT_GE(mgr_.num_free_blocks() + mgr_.num_cached_blocks(), mgr_.watermark_blocks())
        << "admission ate into the watermark";
    const int32_t c = a->num_cached_tokens;
    ASSERT_EQ(c % mgr_.block_size(), 0);
    ASSERT_LT(size_t(c), prompt.size());
    ASSERT_EQ(a->slots.size(), size_t(std::min<int64_t>(chunk, int64_t(prompt.size()) - c)));
    ModelSeq s;
    for (int32_t p = 0; p < c; ++p) s.push(prompt[size_t(p)]);  // contents must already be there
    write(s, std::span(prompt).subspan(size_t(c), a->slots.size()), a->slots);
    s.pending.assign(prompt.begin() + c + std::ptrdiff_t(a->slots.size()), prompt.end());
    seqs_.emplace(id, std::move(s));
  }

  void write(ModelSeq& s, std::span<const TokenId> toks, std::span<const Slot> slots) {
    ASSERT_EQ(toks.size(), slots.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      s.push(toks[i]);
      ASSERT_GE(slots[i], 0);
      ASSERT_LT(size_t(slots[i]), kv_.size());
      kv_[size_t(slots[i])] = s.fp.back();
    }
  }

  void run_copies(std::span<const BlockCopy> copies) {
    const size_t bs = size_t(mgr_.block_size());
    for (const BlockCopy& c : copies) {
      ASSERT_NE(c.src, c.dst);
      std::copy_n(kv_.begin() + std::ptrdiff_t(size_t(c.src) * bs), bs,
                  kv_.begin() + std::ptrdiff_t(size_t(c.dst) * bs));
      totals_.copies++;
    }
  }

  // The next tokens to append: exactly n decoded tokens when n > 0, else a
  // prefill chunk or 1..5 decoded tokens.
  Tokens next_tokens(ModelSeq& s, int n) {
    if (n > 0) return random_tokens(n);
    if (!s.pending.empty()) {
      const size_t n = size_t(uniform(1, int(s.pending.size())));
      Tokens chunk(s.pending.begin(), s.pending.begin() + std::ptrdiff_t(n));
      return chunk;
    }
    return random_tokens(uniform(0, 4) == 0 ? uniform(2, 5) : 1);
  }

  // Appends to one sequence (n tokens if n > 0); returns whether it succeeded.
  bool op_append(SeqId id, int n) {
    ModelSeq& s = seqs_.at(id);
    const Tokens toks = next_tokens(s, n);
    const SeqId one[] = {id};
    const bool can = mgr_.can_append(one, int32_t(toks.size()));
    const PoolSnapshot before = mgr_.snapshot();
    const std::vector<BlockId> old(mgr_.block_table(id).begin(), mgr_.block_table(id).end());
    auto r = mgr_.append_slots(id, toks);
    if (!r.ok()) {
      totals_.append_failures++;
      EXPECT_FALSE(can) << "can_append said yes: " << r.error().message;
      EXPECT_EQ(mgr_.snapshot(), before) << "a failed append changed the state";
      return false;
    }
    check_append_only(old, mgr_.block_table(id), r->copies);
    run_copies(r->copies);
    write(s, toks, r->slots);
    if (!s.pending.empty()) {
      s.pending.erase(s.pending.begin(), s.pending.begin() + std::ptrdiff_t(toks.size()));
    }
    return true;
  }

  // The old table is a prefix of the new one, except that copy-on-write may
  // replace the last block by the copy's destination.
  void check_append_only(const std::vector<BlockId>& old, std::span<const BlockId> now,
                         std::span<const BlockCopy> copies) {
    ASSERT_GE(now.size(), old.size());
    for (size_t i = 0; i < old.size(); ++i) {
      if (old[i] == now[i]) continue;
      const bool cow = i + 1 == old.size() && copies.size() == 1 &&
                       copies[0] == BlockCopy{old[i], now[i]};
      EXPECT_TRUE(cow) << "table entry " << i << " changed without copy-on-write";
    }
    if (mgr_.config().layout == KvLayout::paged) {
      EXPECT_LE(copies.size(), 1u);
    }
  }

  // All-or-nothing decode step for several sequences when can_append says yes.
  void op_group_append() {
    std::vector<SeqId> group;
    for (const auto& [id, s] : seqs_) {
      if (s.pending.empty() && uniform(0, 1) == 0) group.push_back(id);
    }
    if (!mgr_.can_append(group, 1)) return;
    for (SeqId id : group) {
      const size_t before = seqs_.at(id).tokens.size();
      EXPECT_TRUE(op_append(id, 1)) << "can_append(group) said yes";
      EXPECT_EQ(seqs_.at(id).tokens.size(), before + 1);
    }
  }

  void op_fork(SeqId parent, SeqId child) {
    const bool can = mgr_.can_fork(parent);
    if (mgr_.config().layout == KvLayout::paged) {
      EXPECT_TRUE(can) << "paged forks need no blocks";
    }
    auto r = mgr_.fork(parent, child);
    ASSERT_EQ(r.ok(), can);
    if (!r.ok()) return;
    run_copies(*r);
    seqs_.emplace(child, seqs_.at(parent));
  }

  // Beam search: a beam forks into 2..3 candidates and dies.
  void op_beam_step() {
    const SeqId parent = random_seq();
    const int n = uniform(2, 3);
    for (int i = 0; i < n && mgr_.can_fork(parent); ++i) op_fork(parent, next_id_++);
    op_free(parent);
  }

  void op_free(SeqId id) {
    ASSERT_TRUE(mgr_.free(id).ok());
    seqs_.erase(id);
    EXPECT_FALSE(mgr_.contains(id));
  }

  void check_all() {
    auto inv = mgr_.check_invariants();
    ASSERT_TRUE(inv.ok()) << inv.error().message;
    ASSERT_EQ(size_t(mgr_.num_seqs()), seqs_.size());
    const size_t bs = size_t(mgr_.block_size());
    std::set<BlockId> distinct;
    for (const auto& [id, s] : seqs_) {
      ASSERT_EQ(size_t(mgr_.num_tokens(id)), s.tokens.size()) << "seq " << id;
      auto table = mgr_.block_table(id);
      if (mgr_.config().layout == KvLayout::paged) {
        ASSERT_EQ(table.size(), (s.tokens.size() + bs - 1) / bs) << "seq " << id;
      }
      for (size_t p = 0; p < s.tokens.size(); ++p) {
        const size_t slot = size_t(table[p / bs]) * bs + p % bs;
        ASSERT_EQ(kv_[slot], s.fp[p]) << "seq " << id << " position " << p
                                      << ": the KV there is not this sequence's";
      }
      distinct.insert(table.begin(), table.end());
    }
    ASSERT_EQ(size_t(mgr_.num_used_blocks()), distinct.size());
    ASSERT_EQ(mgr_.num_free_blocks() + mgr_.num_cached_blocks() + mgr_.num_used_blocks(),
              mgr_.total_blocks());
  }

  std::mt19937_64 rng_;
  BlockManager mgr_;
  std::vector<uint64_t> kv_;  // [total_blocks * block_size] prefix fingerprints
  std::vector<Tokens> prefixes_;
  std::map<SeqId, ModelSeq> seqs_;
  SeqId next_id_ = 1;
  Totals totals_;
};

void add(Totals& into, const Totals& t) {
  into.hits += t.hits;
  into.evictions += t.evictions;
  into.copies += t.copies;
  into.alloc_failures += t.alloc_failures;
  into.append_failures += t.append_failures;
}

TEST(BlockManagerProperty, PagedWithStrongHash50Seeds) {
  Totals all;
  for (uint64_t seed = 1; seed <= 50 && !HasFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness h(seed, KvLayout::paged, &hash_block);
    h.run(2000);
    add(all, h.totals());
  }
  // The runs must actually exercise what they claim to.
  EXPECT_GT(all.hits, 0u);
  EXPECT_GT(all.evictions, 0u);
  EXPECT_GT(all.copies, 0u);
  EXPECT_GT(all.alloc_failures, 0u);
  EXPECT_GT(all.append_failures, 0u);
}

TEST(BlockManagerProperty, PagedWithCollidingHash20Seeds) {
  Totals all;
  for (uint64_t seed = 101; seed <= 120 && !HasFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness h(seed, KvLayout::paged, seed % 2 == 0 ? &weak_hash : &parent_blind_hash);
    h.run(2000);
    add(all, h.totals());
  }
  EXPECT_GT(all.hits, 0u) << "verified hits still happen under collisions";
}

TEST(BlockManagerProperty, Contiguous10Seeds) {
  Totals all;
  for (uint64_t seed = 201; seed <= 210 && !HasFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness h(seed, KvLayout::contiguous, &hash_block);
    h.run(1000);
    add(all, h.totals());
  }
  EXPECT_EQ(all.hits, 0u);
  EXPECT_GT(all.copies, 0u) << "contiguous forks copy";
}

}  // namespace
}  // namespace pagoda::actors
