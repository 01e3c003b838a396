// The plain-C++ cores of scale-out (docs/scaling.md), unit-tested without
// actors or sockets:
//   prompt_block_hashes  the chained hashes (actors/block_hash.hpp) of a
//                        token sequence's full blocks, as prefix caching
//                        names them;
//   choose_node          where a new request goes: the best score of prefix
//                        affinity (the longest leading run of the prompt's
//                        block hashes a node reported) and load (waiting +
//                        running sequences, free KV blocks), with weights;
//   on_node_lost         what happens to a request whose node went down;
//   HashLru              a node's bounded record of the block hashes it
//                        served last (what it reports).
// Pure functions / a value type; not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/block_hash.hpp"

namespace pagoda::actors {

// Hashes of the full blocks of tokens[0, min(size, max_tokens)): hash i is
// hash_block(hash i-1, block i), starting from kRootBlockHash.
// Requires block_size >= 1.
std::vector<uint64_t> prompt_block_hashes(std::span<const TokenId> tokens, int32_t block_size,
                                          size_t max_tokens);

// How many leading hashes of `hashes` are in `cached`.
size_t cached_prefix_blocks(const std::unordered_set<uint64_t>& cached, std::span<const uint64_t> hashes);

struct RouteWeights {
  double prefix = 1.0;  // x fraction of the prompt's full blocks the node caches
  double load = 1.0;    // x (node load) / (largest load of the up nodes + 1)
  double free = 0.1;    // x fraction of the node's KV blocks that are free
};

// One node as the router sees it. load = max(reported waiting + running
// sequences, requests this router has in flight there).
struct NodeView {
  bool up = false;
  int32_t waiting = 0, running_seqs = 0, in_flight = 0;
  int32_t blocks_free = 0, blocks_total = 0;
  const std::unordered_set<uint64_t>* cached = nullptr;  // may be null
  // The prompt's block hashes with this node's block size (may be empty).
  std::span<const uint64_t> prompt_hashes;
};

struct RouteChoice {
  int32_t node = -1;     // -1: no node is up
  double score = 0.0;
  size_t prefix_blocks = 0;
};

// The up node of best score; ties (within 1e-9) go to the first one at or
// after `rotation` (mod size), so equal idle nodes take turns.
RouteChoice choose_node(const std::vector<NodeView>& nodes, const RouteWeights& weights, size_t rotation);

enum class LossAction { retry, fail };

// A request on a node that went down: retried elsewhere only if nothing of
// it reached the client (no token, no beam) and it has retries left.
LossAction on_node_lost(bool streamed, int32_t retries, int32_t max_retries);

// The most recently touched block hashes, at most `capacity` (older ones
// are forgotten first).
class HashLru {
 public:
  explicit HashLru(size_t capacity) : capacity_(capacity) {}
  void touch(uint64_t hash);
  bool contains(uint64_t hash) const { return where_.count(hash) != 0; }
  size_t size() const { return order_.size(); }
  // Newest first, at most `max`.
  std::vector<uint64_t> recent(size_t max) const;

 private:
  size_t capacity_;
  std::list<uint64_t> order_;  // newest first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

}  // namespace pagoda::actors
