// NgramProposer: prompt-lookup drafting for speculative decoding (issue 24),
// with no second model. For one sequence it keeps an index of the n-grams of
// its committed tokens (prompt + accepted output) and proposes the tokens
// that followed the previous occurrence of the sequence's current suffix.
//
// Rule (vLLM's `ngram` method, prompt_lookup_min/max): for n from max_n down
// to min_n, take the last n tokens; if they occurred earlier (an occurrence
// ending before the last token), the draft is the up to k tokens that
// followed the MOST RECENT such occurrence (recent context is the likeliest
// to be copied: the file being edited, the passage being quoted). The first
// n that matches wins, so a longer match is always preferred. No match: an
// empty draft.
//
// Costs: append() is O(max_n - min_n + 1) expected (one hash probe per n;
// hashes are rolled from the stored tokens, O(max_n) per append); propose()
// is O(max_n * (max_n - min_n + 1) + k): candidates are checked token by token,
// so a hash collision never yields a wrong match. Memory: one map entry per
// (position, n). Only committed tokens are appended: drafted tokens that were
// rejected never enter the index, and a preempted sequence is rebuilt from
// its tokens (reset + append).
// A value owned by one sequence's owner; not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "gpu/result.hpp"

namespace pagoda::actors {

struct NgramConfig {
  int32_t min_n = 1;  // prompt_lookup_min (>= 1)
  int32_t max_n = 4;  // prompt_lookup_max (>= min_n, <= kMaxN)
  int32_t k = 4;      // drafted tokens per step (>= 1, <= kMaxK)
  static constexpr int32_t kMaxN = 16;
  static constexpr int32_t kMaxK = 32;

  // Range checks, with a message naming the field.
  Result<void> validate() const;
  // A request's fields, where 0 means "the server's value": range checks of
  // the fields given (the order of min and max is checked once merged).
  Result<void> validate_given() const;
  // This request config with its 0 fields taken from `server`.
  NgramConfig merged_with(const NgramConfig& server) const;
};

class NgramProposer {
 public:
  // Requires config.validate() to have passed.
  explicit NgramProposer(const NgramConfig& config);

  // Adds committed tokens (ids >= 0) at the end of the sequence.
  void append(std::span<const int32_t> tokens);
  void append(int32_t token);
  // Forgets everything (before rebuilding a preempted sequence).
  void reset();

  // Up to `max_tokens` (<= config k; 0 means k) drafted tokens for the
  // position after the last appended token; empty when nothing matches.
  std::vector<int32_t> propose(int32_t max_tokens = 0) const;

  int32_t size() const { return int32_t(tokens_.size()); }
  std::span<const int32_t> tokens() const { return tokens_; }

 private:
  // Index of n-grams of length n: hash -> end position (one past the last
  // token) of the most recent occurrence seen, excluding the current suffix
  // (an occurrence is entered only once a later token exists).
  using Index = std::unordered_map<uint64_t, int32_t>;

  uint64_t hash_at(int32_t end, int32_t n) const;  // tokens_[end - n, end)
  bool same(int32_t end_a, int32_t end_b, int32_t n) const;

  NgramConfig config_;
  std::vector<int32_t> tokens_;
  std::vector<Index> index_;  // [max_n - min_n + 1], slot i holds n = min_n + i
};

}  // namespace pagoda::actors
