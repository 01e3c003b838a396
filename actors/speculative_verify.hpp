// Verification of drafted tokens (speculative decoding, issue 24).
//
// One verification pass scores a sequence's last token plus k drafted tokens
// d[0..k) in one forward pass, with logits at every one of the k + 1 rows.
// Row j's logits are the target model's distribution for output position
// o + j given the committed tokens and d[0..j). The sampler draws row j with
// its usual parameters and step = o + j (the output index: the same draw the
// sequence would make without speculation), giving s[0..k].
//
// Rule: accept d[j] while d[j] == s[j]; at the first j with d[j] != s[j], emit
// s[j] and stop; if every draft is accepted, also emit s[k] (the bonus
// token). The committed tokens are s[0..a], a = the number accepted.
//
// Why this is exact (drafts as point masses, the n-gram proposer and a
// greedy draft model): the sampler's exponential race draws s[j] from the
// target's processed distribution p_j, so d[j] is accepted with probability
// p_j(d[j]), and given a rejection s[j] is distributed as p_j with d[j]
// removed and renormalised: this is rejection sampling of a point mass. And
// because every committed token is the sampler's own draw at its own output
// index, a seeded sequence produces the SAME tokens with speculation as
// without (greedy or sampled), whatever was drafted; drafts only decide how
// many tokens one pass yields. A drafted token after a rejected one is never
// committed, because row j > a was conditioned on the wrong prefix.
//
// Stops (EOS, stop ids, max_tokens) inside the committed run are the caller's
// (it walks the tokens in order and drops the rest after a stop).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::actors {

struct VerifyOutcome {
  int32_t accepted = 0;         // drafts kept (a)
  std::vector<int32_t> tokens;  // s[0..a]: a + 1 tokens to commit, in order
};

// Requires target_samples.size() == drafts.size() + 1.
VerifyOutcome verify_drafts(std::span<const int32_t> drafts,
                            std::span<const int32_t> target_samples);

}  // namespace pagoda::actors
