// BeamSearch: the ranking and bookkeeping of one beam-search request, as
// plain C++ (the scheduler core drives it; tests feed it hand-built
// candidate lists). It reproduces HF transformers' `_beam_search`
// (generate(num_beams=k, do_sample=False, length_penalty, early_stopping)):
//
//   - Live beams start as one empty beam (the prompt). Each step every live
//     beam b brings its best tokens with their logprobs (log_softmax of the raw
//     logits, no temperature or penalties); candidate cumulative logprob =
//     beam's + token's. All candidates are ranked together, best first (ties:
//     lower beam, then lower token), and the best max(2, 1 + #stop) * k kept.
//   - A candidate "hits a stop" when its token is a stop token (EOS unless
//     ignore_eos, stop_token_ids) or the output reaches max_new_tokens (then
//     every candidate hits). Stop tokens are not candidates while the output
//     has fewer than min_new_tokens tokens (HF's min_new_tokens processor).
//   - A hitting candidate among the first k ranks becomes a finished
//     hypothesis with score = cumulative / L^length_penalty, L = generated
//     tokens including the new one (prompt excluded); none is added once k
//     are finished and early_stopping, nor after the heuristic below closed.
//     The finished list keeps the k best scores (on equal scores the older).
//   - The next live beams are the first k non-hitting candidates.
//   - The heuristic (sticky): after a step, with k finished, the search can
//     still improve only while best_live_cumulative / L^length_penalty >
//     worst finished score, L = the live beams' generated length.
//   - Done when no live beam is left, the heuristic closed, or (early_stopping)
//     k hypotheses are finished. Live beams left then are dropped.
//   - The result: the finished hypotheses, best score first.
// Scores and cumulative logprobs are kept in double (HF: float32).
// Not thread-safe; a plain value.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/sequence.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

struct BeamConfig {
  int32_t beam_width = 1;             // k >= 1
  float length_penalty = 1.0f;
  bool early_stopping = true;
  int32_t max_new_tokens = 16;        // >= 1: generated tokens at most
  int32_t min_new_tokens = 0;
  std::vector<TokenId> stop_tokens;   // EOS ids (unless ignore_eos) + stop_token_ids
};

// One candidate continuation of a beam.
struct BeamToken {
  TokenId token = -1;
  float logprob = 0.0f;
};

struct LiveBeam {
  std::vector<TokenId> tokens;        // generated so far (prompt excluded)
  double cumulative_logprob = 0.0;
};

// A hypothesis (finished, or live with finish == none in ranked()).
struct BeamResult {
  std::vector<TokenId> tokens;        // generated (prompt excluded), stop token kept
  double cumulative_logprob = 0.0;
  double score = 0.0;
  FinishReason finish = FinishReason::none;
};

class BeamSearch {
 public:
  explicit BeamSearch(BeamConfig config);

  // How many best tokens per live beam step() needs for an exact ranking:
  // max(2k, k + #stop tokens) (capped by the caller at what it can get).
  static int32_t candidates_per_beam(const BeamConfig& config);

  const BeamConfig& config() const { return config_; }
  const std::vector<LiveBeam>& live() const { return live_; }
  const std::vector<BeamResult>& finished() const { return finished_; }  // best first
  bool done() const { return done_; }
  int32_t generated() const { return generated_; }  // tokens per live beam

  // One step. candidates[b] are the best tokens of live()[b] (any order;
  // tokens < 0 and non-finite logprobs are skipped). Returns, for each new
  // live beam j, the index of its parent in the previous live(). Errors:
  // done() already, or candidates.size() != live().size().
  Result<std::vector<int32_t>> step(const std::vector<std::vector<BeamToken>>& candidates);

  // Finished and live beams together, best score first (live: cumulative /
  // generated^length_penalty, generated >= 1).
  std::vector<BeamResult> ranked() const;
  // The n best finished hypotheses (fewer only if fewer finished: then the
  // best live beams follow, their finish `abort`).
  std::vector<BeamResult> best(int32_t n) const;
  double score(double cumulative_logprob, int32_t length) const;

 private:
  struct Candidate {
    int32_t beam = 0;
    TokenId token = -1;
    double cumulative = 0.0;
  };

  bool is_stop(TokenId t) const;
  std::vector<Candidate> rank(const std::vector<std::vector<BeamToken>>& candidates) const;
  void add_finished(const std::vector<Candidate>& ranked, int32_t new_len);
  void update_heuristic();

  BeamConfig config_;
  std::vector<LiveBeam> live_;
  std::vector<BeamResult> finished_;
  int32_t generated_ = 0;
  bool improvable_ = true;  // HF's is_early_stop_heuristic_unsatisfied
  bool done_ = false;
};

// A beam group's state in the scheduler core: the search, and per live beam
// slot the candidates of its last sample (a step ranks once every live beam
// has sampled; beams of one group may sample in different steps when the
// token budget splits them, or after a preemption's recompute).
struct BeamState {
  explicit BeamState(BeamConfig c) : search(std::move(c)) {}
  BeamSearch search;
  std::vector<std::vector<BeamToken>> pending;  // [live beams]
  std::vector<bool> has_pending;                // [live beams]
  int32_t num_candidates = 0;                   // top tokens asked per beam
};

}  // namespace pagoda::actors
