// SchedulerCore, speculative decoding: drafting before a step and keeping
// the verified run after it (see scheduler_core.hpp and
// actors/speculative_verify.hpp).
#include <algorithm>

#include "actors/scheduler_core.hpp"
#include "actors/speculative_verify.hpp"

namespace pagoda::actors {

// Drafts for s's next decode step: at most k, the budget left, and what the
// sequence may still produce (a step emits up to drafts + 1 tokens).
std::vector<TokenId> SchedulerCore::propose_drafts(const SequenceGroup& g, Sequence& s,
                                                   int32_t budget) const {
  const int64_t limit = std::min<int64_t>(
      {g.options.speculative.config.k, budget, int64_t(g.options.max_tokens) - s.output_len() - 1,
       int64_t(config_.max_model_len) - int64_t(s.tokens.size()) - 1});
  if (limit <= 0) return {};
  // A draft model: k slots the executor fills (the last token as filler).
  if (g.options.speculative.draft) return std::vector<TokenId>(size_t(limit), s.tokens.back());
  if (!s.proposer) return {};
  NgramProposer& p = *s.proposer;
  if (p.size() > int32_t(s.tokens.size())) p.reset();  // never expected: tokens only grow
  p.append(std::span<const TokenId>(s.tokens).subspan(size_t(p.size())));
  return p.propose(int32_t(limit));
}

void SchedulerCore::apply_drafts(SequenceGroup& g, Sequence& s, const StepResult& result,
                                 size_t first) {
  if (g.options.speculative.draft) {  // the ids the executor's draft model put in the slots
    for (const DraftedRun& r : result.drafted) {
      if (r.seq == s.id && r.tokens.size() == s.drafts.size()) s.drafts = r.tokens;
    }
  }
  const int32_t d = int32_t(s.drafts.size());
  std::vector<TokenId> sampled(size_t(d) + 1);
  for (int32_t j = 0; j <= d; ++j) sampled[size_t(j)] = result.samples[first + size_t(j)].token;
  const VerifyOutcome v = verify_drafts(s.drafts, sampled);
  s.drafts.clear();
  // K/V is valid for the step's input token and the accepted drafts; the
  // rejected drafts' slots go back (block manager, executor state).
  const int32_t valid = s.num_scheduled - d + v.accepted;
  if (valid < s.num_scheduled) {
    rollbacks_.push_back({s.id, valid});
    truncates_.push_back({s.id, valid});
  }
  s.num_scheduled = valid;
  s.num_computed = std::min(s.num_computed, valid);
  s.drafted += d;
  s.accepted += v.accepted;
  note_drafts(s, d, v.accepted);
  SpecCounters& by = g.options.speculative.draft ? spec_.draft : spec_.ngram;
  by += SpecCounters{uint64_t(d), uint64_t(v.accepted)};
  for (size_t j = 0; j < v.tokens.size() && !s.finished(); ++j) {
    on_token(g, s, result.samples[first + j]);
  }
}

// Turn-down bookkeeping after a drafting attempt (drafted == 0: no match).
void SchedulerCore::note_drafts(Sequence& s, int32_t drafted, int32_t accepted) {
  // Measured on the CPU (docs/benchmarks.md, tools/bench-speculative): open
  // chat accepts 23-34% of its drafts and loses throughput while it drafts;
  // copying workloads accept 71-80%. A window of 8 drafted tokens (two
  // attempts at k = 4) under 50% accepted pauses drafting for 16, 32, ... 256.
  constexpr int32_t kWindow = 8, kMisses = 4, kFirstCooldown = 16, kMaxCooldown = 256;
  constexpr double kMinRate = 0.5;
  s.window_misses = drafted == 0 ? s.window_misses + 1 : 0;
  s.window_drafted += drafted;
  s.window_accepted += accepted;
  const bool poor = s.window_drafted >= kWindow && s.window_accepted < kMinRate * s.window_drafted;
  if (!poor && s.window_misses < kMisses) {
    if (s.window_drafted >= kWindow) s.window_drafted = s.window_accepted = 0, s.spec_backoff /= 2;
    return;
  }
  s.spec_backoff = std::clamp(s.spec_backoff * 2, kFirstCooldown, kMaxCooldown);
  s.spec_cooldown = s.spec_backoff;
  s.window_drafted = s.window_accepted = s.window_misses = 0;
}

}  // namespace pagoda::actors
