// Block hashing for automatic prefix caching.
//
// A FULL KV block is named by a 64-bit hash chained from its parent block's
// hash and its own token ids, so equal hashes mean (with overwhelming
// probability) equal whole prefixes. The hash is only a lookup key: the block
// pool VERIFIES every hit against the stored token ids and the parent block's
// identity, so a collision can cost a cache miss but never a wrong block.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>

namespace pagoda::actors {

using TokenId = int32_t;

// The chain's start: the "parent hash" of a sequence's first block.
inline constexpr uint64_t kRootBlockHash = 0x6a09e667f3bcc908ULL;

// A hash function of (parent hash, the block's tokens). The default is
// hash_block; tests inject weak ones to exercise collision handling.
using BlockHashFn = uint64_t (*)(uint64_t parent_hash, std::span<const TokenId> tokens);

// The default: a 64-bit multiply-xorshift construction that absorbs two
// tokens per round and folds in the length; every round is fully avalanched.
uint64_t hash_block(uint64_t parent_hash, std::span<const TokenId> tokens);

}  // namespace pagoda::actors
