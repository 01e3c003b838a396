// SamplingOptions: the user-facing parameters of one generation request (one
// sequence group), as the OpenAI-style routes and the offline API take them.
//
// Semantics (vLLM's where they exist):
//  - temperature < gpu::kGreedyTemperature means greedy (argmax).
//  - seed: with a value, sample i of the group draws with seed_for(i), so the
//    request's output depends only on (prompt, options), never on the batch;
//    without one the engine picks a random seed at submission.
//  - stop / stop_token_ids: generation of a sample ends at the first match; a
//    stop token id is kept in the token output, a stop string is cut from the
//    text (the request actor's job). EOS ends a sample unless ignore_eos.
//  - max_tokens: new tokens per sample; min_tokens: before a sample has this
//    many tokens, EOS (unless ignore_eos) and stop token ids are masked from
//    sampling, as vLLM does (stop strings may still end it).
//  - logprobs: 0 = the sampled token's logprob only; 1..kMaxTopLogprobs = also
//    that many top candidates per token.
//  - n: parallel samples sharing the prompt's KV blocks (forked after prefill).
//  - beam_width > 0: beam search with that many beams (deterministic; the
//    sampling knobs temperature/top_k/top_p/min_p/seed are ignored). The
//    request returns the n best finished beams (n <= beam_width), ranked by
//    cumulative logprob / length^length_penalty, as transformers does.
//    early_stopping: stop once beam_width hypotheses are finished (true), or
//    keep going while a live beam could still beat the worst kept one (false).
//    Beam search ignores logprobs and the penalties, and takes no stop strings.
//  - priority, client: scheduling, not sampling (actors/scheduling_policy.hpp).
//    priority: lower is admitted first under the `priority` policy (vLLM's
//    meaning), FCFS within a value. client: the key fair sharing counts
//    service under (the request's `user`, else its address; empty: one
//    anonymous client). Neither changes the output.
//  - speculative: n-gram prompt-lookup speculation (issue 24; off by default).
//    Exact: the same tokens as without it (actors/speculative_verify.hpp).
//    Supported for n = 1 without beams or penalties
//    (speculation_supported()), also with structured-output constraints and
//    token masks (each drafted row gets the matcher's mask after the drafts
//    before it: actors/constraint_book.hpp); validate() refuses the others.
//  - constraint, token_mask: structured output and per-token biases/bans
//    (actors/output_constraint.hpp, issue 23).
// A plain value; thread-safe to copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/ngram_proposer.hpp"
#include "actors/output_constraint.hpp"
#include "gpu/ops.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

// set: the request chose (ngram on or off); unset, the engine's default
// applies where the request supports it (SchedulerConfig::speculative).
struct SpeculativeOptions {
  bool set = false;
  bool ngram = false;  // prompt-lookup drafting (actors/ngram_proposer.hpp)
  // Draft-model drafting: the engine's draft model (actors/draft_runner.hpp;
  // refused by an engine without one). ngram and draft exclude each other.
  bool draft = false;
  // k = num_speculative_tokens, prompt_lookup_min/max. In a request, a 0
  // field takes the server's value (SchedulerCore::add merges them).
  NgramConfig config;
  bool active() const { return ngram || draft; }
};

// Speculative decoding totals of one proposer: tokens drafted and, of those,
// accepted by verification (engine-wide counters; per request they travel in
// the token events).
struct SpecCounters {
  uint64_t drafted = 0, accepted = 0;
  SpecCounters& operator+=(const SpecCounters& o) {
    drafted += o.drafted;
    accepted += o.accepted;
    return *this;
  }
};

// The counters by proposer (/metrics labels them proposer="ngram" / "draft").
struct SpecStats {
  SpecCounters ngram, draft;
  SpecCounters total() const {
    SpecCounters t = ngram;
    return t += draft;
  }
  SpecStats& operator+=(const SpecStats& o) {
    ngram += o.ngram;
    draft += o.draft;
    return *this;
  }
};

struct SamplingOptions {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  int32_t logprobs = 0;
  int32_t n = 1;
  static constexpr int32_t kMaxBeamWidth = gpu::kMaxTopLogprobs / 2;
  int32_t beam_width = 0;      // 0: sampling; > 0: beam search (at most kMaxBeamWidth)
  float length_penalty = 1.0f;
  bool early_stopping = true;
  int32_t priority = 0;
  std::string client;
  SpeculativeOptions speculative;
  OutputConstraint constraint;
  TokenMaskOptions token_mask;

  // The seed of sample i (requires seed to hold a value): seed itself for
  // sample 0, a fixed mix of (seed, i) for the others.
  uint64_t seed_for(int32_t i) const {
    uint64_t x = *seed;
    if (i == 0) return x;
    x += 0x9e3779b97f4a7c15ULL * uint64_t(i);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

  // Whether any penalty needs the token history on the device.
  bool uses_history() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }

  // Whether these options can run with speculative decoding at all.
  bool speculation_supported() const {
    return n == 1 && beam_width == 0 && !uses_history();
  }
  // The draft model proposes without the grammar and its drafts are known
  // only inside the executor, after the masks of the drafted rows are set:
  // it is not combined with constraints or token masks (n-gram is).
  bool draft_supported() const {
    return speculation_supported() && !constraint.active() && !token_mask.active();
  }

  // Range checks, with a message naming the field.
  Result<void> validate() const {
    auto bad = [](const std::string& what) { return make_error("sampling options: " + what); };
    if (!(temperature >= 0.0f)) return bad("temperature must be >= 0");
    if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p must be in (0, 1]");
    if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p must be in [0, 1]");
    if (!(repetition_penalty > 0.0f)) return bad("repetition_penalty must be > 0");
    if (max_tokens < 1) return bad("max_tokens must be >= 1");
    if (min_tokens < 0 || min_tokens > max_tokens) return bad("min_tokens must be in [0, max_tokens]");
    if (logprobs < 0 || logprobs > gpu::kMaxTopLogprobs) {
      return bad("logprobs must be in [0, " + std::to_string(gpu::kMaxTopLogprobs) + "]");
    }
    if (n < 1 || n > 64) return bad("n must be in [1, 64]");
    // Each beam needs its best 2 * beam_width tokens from the sampler.
    if (beam_width < 0 || beam_width > kMaxBeamWidth) {
      return bad("beam_width must be in [0, " + std::to_string(kMaxBeamWidth) + "]");
    }
    if (beam_width > 0 && n > beam_width) return bad("n must be <= beam_width for beam search");
    if (beam_width > 0 && !stop.empty()) return bad("stop strings are not supported with beam search");
    if (beam_width > 0 && !(length_penalty == length_penalty)) return bad("length_penalty must be a number");
    if (speculative.active()) {
      if (auto ok = speculative.config.validate_given(); !ok) return ok;
      if (speculative.ngram && speculative.draft) return bad("speculative: ngram or draft, not both");
      if (speculative.draft && !draft_supported() && speculation_supported()) {
        return bad("speculative draft does not support structured-output constraints or token "
                   "masks (logit_bias, allowed_token_ids, bad_words); \"ngram\" does");
      }
      if (!speculation_supported()) {
        return bad("speculative decoding supports n = 1 without beam search and without "
                   "repetition, presence or frequency penalties");
      }
    }
    for (const std::string& s : stop) {
      if (s.empty()) return bad("stop strings must not be empty");
    }
    return validate_constraint();
  }

  // The structured-output part of validate() (issue 23).
  Result<void> validate_constraint() const {
    auto bad = [](const std::string& what) { return make_error("sampling options: " + what); };
    using K = OutputConstraint::Kind;
    if (constraint.kind == K::choice && constraint.choices.empty()) return bad("the choice list is empty");
    if ((constraint.kind == K::json_schema || constraint.kind == K::regex || constraint.kind == K::grammar ||
         constraint.kind == K::structural_tag) && constraint.spec.empty()) {
      return bad("the constraint's specification is empty");
    }
    for (const auto& [id, b] : token_mask.logit_bias) {
      if (id < 0) return bad("logit_bias: token ids must be >= 0");
      if (!(b >= -100.0f && b <= 100.0f)) return bad("logit_bias: biases must be in [-100, 100]");
    }
    for (int32_t id : token_mask.allowed_token_ids) {
      if (id < 0) return bad("allowed_token_ids: token ids must be >= 0");
    }
    for (const std::string& w : token_mask.bad_words) {
      if (w.empty()) return bad("bad_words: a bad word is empty");
    }
    return {};
  }
};

}  // namespace pagoda::actors
