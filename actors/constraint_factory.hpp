// ConstraintFactory: turns a request's OutputConstraint and TokenMaskOptions
// (actors/output_constraint.hpp) into the model::ConstraintProgram its
// matchers share (issue 23). Grammars compile on the GrammarCompiler's own
// threads, with its cache (model/grammar_compiler.hpp); the request actor
// waits for the answer as a message, so neither the scheduler nor other
// requests wait for a compile.
//
// The program's stop ids (what a finished grammar allows) are the model's
// EOS ids plus the request's stop_token_ids. Bad words are tokenized as
// written and with a leading space (vLLM's rule); logit_bias keeps the last
// bias given for an id.
//
// The compiler (and its TokenizerInfo, ~0.08 s for a 49k vocabulary) is
// made on first use, on the thread of the first constrained prepare() (a
// request actor's worker: once per engine; later callers wait for it).
// Thread-safe: any thread may call prepare().
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/sampling_options.hpp"
#include "gpu/result.hpp"
#include "model/grammar_compiler.hpp"
#include "model/token_matcher.hpp"
#include "model/tokenizer.hpp"

namespace pagoda::actors {

using ConstraintProgramPtr = std::shared_ptr<const model::ConstraintProgram>;

// The grammar of c (requires c.active()).
model::GrammarSource grammar_source(const OutputConstraint& c);

// The token rules of m for a vocabulary of `vocab` ids. Errors: an id
// outside the vocabulary, a bias outside [-100, 100], an empty bad word.
Result<model::TokenMaskRules> token_rules(const TokenMaskOptions& m, const model::Tokenizer& tok,
                                          int32_t vocab);

class ConstraintFactory {
 public:
  using Done = std::function<void(Result<ConstraintProgramPtr>)>;

  ConstraintFactory(std::shared_ptr<const model::Tokenizer> tokenizer, int32_t vocab,
                    std::vector<int32_t> eos_ids, model::GrammarCompilerOptions options = {});

  // Requires o.constraint.active() or o.token_mask.active(). done runs once,
  // on the compiler's thread or on the caller's (no compile needed, a cache
  // hit, an error); an Error's message starts with kInvalidRequest.
  void prepare(const SamplingOptions& o, Done done);
  // The compiler (made on first use); errors when the vocabulary cannot be bridged.
  Result<model::GrammarCompiler*> compiler();

 private:
  std::shared_ptr<const model::Tokenizer> tokenizer_;
  int32_t vocab_;
  std::vector<int32_t> eos_ids_;
  model::GrammarCompilerOptions options_;
  std::once_flag once_;
  std::unique_ptr<model::GrammarCompiler> compiler_;
  std::string compiler_error_;
};

}  // namespace pagoda::actors
