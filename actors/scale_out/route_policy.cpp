#include "actors/scale_out/route_policy.hpp"

#include <algorithm>

namespace pagoda::actors {

std::vector<uint64_t> prompt_block_hashes(std::span<const TokenId> tokens, int32_t block_size,
                                          size_t max_tokens) {
  std::vector<uint64_t> out;
  if (block_size < 1) return out;
  const size_t n = std::min(tokens.size(), max_tokens) / size_t(block_size);
  uint64_t parent = kRootBlockHash;
  for (size_t b = 0; b < n; ++b) {
    parent = hash_block(parent, tokens.subspan(b * size_t(block_size), size_t(block_size)));
    out.push_back(parent);
  }
  return out;
}

size_t cached_prefix_blocks(const std::unordered_set<uint64_t>& cached, std::span<const uint64_t> hashes) {
  size_t k = 0;
  while (k < hashes.size() && cached.count(hashes[k]) != 0) ++k;
  return k;
}

namespace {

int32_t load_of(const NodeView& v) { return std::max(v.waiting + v.running_seqs, v.in_flight); }

double score_of(const NodeView& v, const RouteWeights& w, int32_t max_load, size_t* prefix) {
  *prefix = v.cached ? cached_prefix_blocks(*v.cached, v.prompt_hashes) : 0;
  const double affinity = v.prompt_hashes.empty() ? 0.0 : double(*prefix) / double(v.prompt_hashes.size());
  const double load = double(load_of(v)) / double(max_load + 1);
  const double free = v.blocks_total > 0 ? double(v.blocks_free) / double(v.blocks_total) : 0.0;
  return w.prefix * affinity - w.load * load + w.free * free;
}

}  // namespace

RouteChoice choose_node(const std::vector<NodeView>& nodes, const RouteWeights& weights, size_t rotation) {
  RouteChoice best;
  if (nodes.empty()) return best;
  int32_t max_load = 0;
  for (const NodeView& v : nodes) {
    if (v.up) max_load = std::max(max_load, load_of(v));
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    const size_t i = (rotation + k) % nodes.size();
    if (!nodes[i].up) continue;
    size_t prefix = 0;
    const double s = score_of(nodes[i], weights, max_load, &prefix);
    if (best.node < 0 || s > best.score + 1e-9) best = RouteChoice{int32_t(i), s, prefix};
  }
  return best;
}

LossAction on_node_lost(bool streamed, int32_t retries, int32_t max_retries) {
  return !streamed && retries < max_retries ? LossAction::retry : LossAction::fail;
}

void HashLru::touch(uint64_t hash) {
  if (capacity_ == 0) return;
  if (auto it = where_.find(hash); it != where_.end()) {
    order_.splice(order_.begin(), order_, it->second);
    return;
  }
  order_.push_front(hash);
  where_[hash] = order_.begin();
  if (order_.size() > capacity_) {
    where_.erase(order_.back());
    order_.pop_back();
  }
}

std::vector<uint64_t> HashLru::recent(size_t max) const {
  std::vector<uint64_t> out;
  for (uint64_t h : order_) {
    if (out.size() >= max) break;
    out.push_back(h);
  }
  return out;
}

}  // namespace pagoda::actors
