// TokenMatcher: one constrained sequence's state (issue 23). It follows the
// tokens the sequence produces and says which tokens may come next, as a
// bitmask over the model's vocabulary: the grammar's answer (an xgrammar
// GrammarMatcher over a CompiledGrammar), AND the allowed ids, minus the bad
// words whose earlier tokens the output just produced. Per-token biases
// (OpenAI logit_bias) ride along for the sampler.
//
// Mask layout: words[ceil(vocab / 32)], bit (t & 31) of words[t >> 5] set
// when token t may be sampled (xgrammar's layout); ids >= vocab are 0.
// A finished grammar allows only the stop ids (EOS and the request's stop
// tokens); a matcher that accepted a stop id is terminated.
//
// Thread-safety: a TokenMatcher is used by one thread at a time (the
// executor's mask filler); the ConstraintProgram it shares is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <xgrammar/matcher.h>

#include "model/grammar_compiler.hpp"

namespace pagoda::model {

// Token-level rules: OpenAI logit_bias, vLLM allowed_token_ids / bad_words
// (each bad word as the token ids that spell it).
struct TokenMaskRules {
  std::vector<std::pair<int32_t, float>> bias;       // (id, additive logit bias)
  std::vector<int32_t> allowed;                      // empty: every id (else only these, EOS too: vLLM's rule)
  std::vector<std::vector<int32_t>> bad_sequences;   // non-empty sequences
  bool restricts() const { return !allowed.empty() || !bad_sequences.empty(); }
};

// What every matcher of one request shares.
struct ConstraintProgram {
  CompiledGrammarPtr grammar;        // nullptr: no grammar (token rules only)
  TokenMaskRules rules;
  std::vector<int32_t> stop_ids;     // end a finished grammar
  int32_t vocab = 0;                 // the model's logits width
  std::vector<uint32_t> allowed_words;  // rules.allowed as a mask (empty: all); made by finish()

  // Builds allowed_words; call once after filling the fields.
  void finish();
  int32_t mask_words() const { return (vocab + 31) / 32; }
  // Whether a mask is ever needed (a grammar or restricting rules).
  bool masks() const { return grammar != nullptr || rules.restricts(); }
};

class TokenMatcher {
 public:
  explicit TokenMatcher(std::shared_ptr<const ConstraintProgram> program);

  // Takes token id as the sequence's next token. False (state unchanged)
  // when the grammar rejects it, or after termination.
  bool accept(int32_t id);
  // Undoes the last n accepted tokens (n <= num_accepted()).
  void rollback(int32_t n);
  int32_t num_accepted() const { return int32_t(history_.size()); }
  const std::vector<int32_t>& history() const { return history_; }

  // Fills words[program.mask_words()] with the tokens allowed next.
  // Returns false (words untouched) when every token is allowed.
  bool fill_mask(uint32_t* words);
  // The grammar reached its end and accepted a stop id.
  bool terminated() const;
  // The grammar may end here (a stop id is allowed next).
  bool completed() const;

  TokenMatcher fork() const;
  const ConstraintProgram& program() const { return *prog_; }

 private:
  TokenMatcher(std::shared_ptr<const ConstraintProgram> program, std::optional<xgrammar::GrammarMatcher> gm,
               std::vector<int32_t> history);
  void apply_rules(uint32_t* words) const;

  std::shared_ptr<const ConstraintProgram> prog_;
  std::optional<xgrammar::GrammarMatcher> gm_;
  std::vector<int32_t> history_;
};

}  // namespace pagoda::model
