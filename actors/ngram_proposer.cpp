// NgramProposer (see ngram_proposer.hpp).
#include "actors/ngram_proposer.hpp"

#include <algorithm>
#include <string>

namespace pagoda::actors {
namespace {

// One step of a hash over tokens read backwards from an n-gram's end.
uint64_t mix(uint64_t h, int32_t token) {
  h ^= uint64_t(uint32_t(token)) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

}  // namespace

Result<void> NgramConfig::validate() const {
  auto bad = [](const std::string& what) { return make_error("speculative ngram: " + what); };
  if (min_n < 1) return bad("prompt_lookup_min must be >= 1");
  if (max_n < min_n || max_n > kMaxN) {
    return bad("prompt_lookup_max must be in [prompt_lookup_min, " + std::to_string(kMaxN) + "]");
  }
  if (k < 1 || k > kMaxK) {
    return bad("num_speculative_tokens must be in [1, " + std::to_string(kMaxK) + "]");
  }
  return {};
}

Result<void> NgramConfig::validate_given() const {
  NgramConfig c = merged_with(NgramConfig{});
  if (min_n == 0 || max_n == 0) c.max_n = std::max(c.max_n, c.min_n);  // order checked once merged
  return c.validate();
}

NgramConfig NgramConfig::merged_with(const NgramConfig& server) const {
  NgramConfig c = *this;
  if (c.k == 0) c.k = server.k;
  if (c.min_n == 0) c.min_n = server.min_n;
  if (c.max_n == 0) c.max_n = server.max_n;
  return c;
}

NgramProposer::NgramProposer(const NgramConfig& config)
    : config_(config), index_(size_t(config.max_n - config.min_n + 1)) {}

uint64_t NgramProposer::hash_at(int32_t end, int32_t n) const {
  uint64_t h = 0;
  for (int32_t i = 1; i <= n; ++i) h = mix(h, tokens_[size_t(end - i)]);
  return h;
}

bool NgramProposer::same(int32_t end_a, int32_t end_b, int32_t n) const {
  return std::equal(tokens_.begin() + (end_a - n), tokens_.begin() + end_a,
                    tokens_.begin() + (end_b - n));
}

void NgramProposer::append(int32_t token) {
  tokens_.push_back(token);
  // The n-grams ending just before the new token now have a follower: enter
  // them (most recent wins). Hashes are built backwards, so the n-gram of
  // length n extends the one of length n - 1.
  const int32_t end = int32_t(tokens_.size()) - 1;
  uint64_t h = 0;
  for (int32_t n = 1; n <= config_.max_n && n <= end; ++n) {
    h = mix(h, tokens_[size_t(end - n)]);
    if (n >= config_.min_n) index_[size_t(n - config_.min_n)][h] = end;
  }
}

void NgramProposer::append(std::span<const int32_t> tokens) {
  tokens_.reserve(tokens_.size() + tokens.size());
  for (int32_t t : tokens) append(t);
}

void NgramProposer::reset() {
  tokens_.clear();
  for (Index& ix : index_) ix.clear();
}

std::vector<int32_t> NgramProposer::propose(int32_t max_tokens) const {
  const int32_t k = max_tokens > 0 ? std::min(max_tokens, config_.k) : config_.k;
  const int32_t len = size();
  for (int32_t n = std::min(config_.max_n, len - 1); n >= config_.min_n; --n) {
    const Index& ix = index_[size_t(n - config_.min_n)];
    auto it = ix.find(hash_at(len, n));
    if (it == ix.end()) continue;
    const int32_t e = it->second;
    if (!same(e, len, n)) continue;  // a hash collision: no match for this n
    const int32_t stop = std::min(e + k, len);
    return std::vector<int32_t>(tokens_.begin() + e, tokens_.begin() + stop);
  }
  return {};
}

}  // namespace pagoda::actors
