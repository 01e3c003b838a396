#include "actors/block_hash.hpp"

namespace pagoda::actors {
namespace {

// A bijective 64-bit mixer (xorshift-multiply, full avalanche).
uint64_t avalanche(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kRoundKey = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio

uint64_t pack(TokenId lo, TokenId hi) {
  return uint64_t(uint32_t(lo)) | (uint64_t(uint32_t(hi)) << 32);
}

}  // namespace

uint64_t hash_block(uint64_t parent_hash, std::span<const TokenId> tokens) {
  uint64_t h = avalanche(parent_hash ^ (kRoundKey * (tokens.size() + 1)));
  size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    h = avalanche(h ^ pack(tokens[i], tokens[i + 1])) + kRoundKey;
  }
  if (i < tokens.size()) {
    // An odd tail token is paired with a fixed filler; the length folded in
    // at the start keeps [.., t] apart from [.., t, filler].
    h = avalanche(h ^ pack(tokens[i], TokenId(0x5bd1e995))) + kRoundKey;
  }
  return avalanche(h);
}

}  // namespace pagoda::actors
