#include "actors/constraint_factory.hpp"

#include <algorithm>
#include <map>

#include "actors/engine_errors.hpp"
#include "model/grammar_vocab.hpp"

namespace pagoda::actors {
namespace {

Error invalid(const std::string& what) { return make_error(std::string(kInvalidRequest) + what); }

// The token sequences that spell word (as written, and after a space).
void add_bad_word(const std::string& word, const model::Tokenizer& tok,
                  std::vector<std::vector<int32_t>>& out) {
  for (const std::string& text : {word, " " + word}) {
    std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false);
    if (ids.empty()) continue;
    if (std::find(out.begin(), out.end(), ids) == out.end()) out.push_back(std::move(ids));
  }
}

}  // namespace

model::GrammarSource grammar_source(const OutputConstraint& c) {
  model::GrammarSource s;
  switch (c.kind) {
    case OutputConstraint::Kind::none:
    case OutputConstraint::Kind::json_object: s.kind = model::GrammarKind::json_object; break;
    case OutputConstraint::Kind::json_schema: s.kind = model::GrammarKind::json_schema; break;
    case OutputConstraint::Kind::regex: s.kind = model::GrammarKind::regex; break;
    case OutputConstraint::Kind::choice: s.kind = model::GrammarKind::choice; break;
    case OutputConstraint::Kind::grammar: s.kind = model::GrammarKind::ebnf; break;
    case OutputConstraint::Kind::structural_tag: s.kind = model::GrammarKind::structural_tag; break;
  }
  s.spec = c.spec;
  s.choices = c.choices;
  s.strict = c.strict;
  return s;
}

Result<model::TokenMaskRules> token_rules(const TokenMaskOptions& m, const model::Tokenizer& tok,
                                          int32_t vocab) {
  model::TokenMaskRules r;
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  std::map<int32_t, float> bias;
  for (const auto& [id, b] : m.logit_bias) {
    if (!in_vocab(id)) return invalid("logit_bias: token id " + std::to_string(id) + " is outside the vocabulary");
    if (!(b >= -100.0f && b <= 100.0f)) return invalid("logit_bias: biases must be in [-100, 100]");
    bias[id] = b;  // the last one given wins
  }
  r.bias.assign(bias.begin(), bias.end());
  for (int32_t id : m.allowed_token_ids) {
    if (!in_vocab(id)) {
      return invalid("allowed_token_ids: token id " + std::to_string(id) + " is outside the vocabulary");
    }
    r.allowed.push_back(id);
  }
  for (const std::string& w : m.bad_words) {
    if (w.empty()) return invalid("bad_words: a bad word is empty");
    add_bad_word(w, tok, r.bad_sequences);
  }
  return r;
}

ConstraintFactory::ConstraintFactory(std::shared_ptr<const model::Tokenizer> tokenizer, int32_t vocab,
                                     std::vector<int32_t> eos_ids, model::GrammarCompilerOptions options)
    : tokenizer_(std::move(tokenizer)), vocab_(vocab), eos_ids_(std::move(eos_ids)), options_(options) {}

Result<model::GrammarCompiler*> ConstraintFactory::compiler() {
  std::call_once(once_, [this] {
    auto info = model::grammar_tokenizer_info(*tokenizer_, vocab_, eos_ids_);
    if (!info) {
      compiler_error_ = info.error().message;
      return;
    }
    compiler_ = std::make_unique<model::GrammarCompiler>(*info, options_);
  });
  if (!compiler_) return make_error("structured output is unavailable: " + compiler_error_);
  return compiler_.get();
}

void ConstraintFactory::prepare(const SamplingOptions& o, Done done) {
  auto prog = std::make_shared<model::ConstraintProgram>();
  prog->vocab = vocab_;
  prog->stop_ids = eos_ids_;
  for (int32_t id : o.stop_token_ids) {
    if (id >= 0 && id < vocab_ && std::find(prog->stop_ids.begin(), prog->stop_ids.end(), id) == prog->stop_ids.end()) {
      prog->stop_ids.push_back(id);
    }
  }
  auto rules = token_rules(o.token_mask, *tokenizer_, vocab_);
  if (!rules) return done(rules.error());
  prog->rules = std::move(rules).value();
  prog->finish();
  if (!o.constraint.active()) return done(ConstraintProgramPtr(std::move(prog)));
  auto c = compiler();
  if (!c) return done(c.error());
  (*c)->compile_async(grammar_source(o.constraint),
                      [prog, done = std::move(done)](Result<model::CompiledGrammarPtr> g) mutable {
                        if (!g) return done(invalid(g.error().message));
                        prog->grammar = std::move(g).value();
                        done(ConstraintProgramPtr(std::move(prog)));
                      });
}

}  // namespace pagoda::actors
