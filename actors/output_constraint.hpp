// OutputConstraint: what a request's output must match (issue 23), as the
// API layer hands it to the engine. Plain data, thread-safe to copy; the
// engine compiles it (against the model's tokenizer) off the scheduler's
// thread and masks every sampled token with it.
//
// Kinds (the spec's meaning per kind):
//  - none: unconstrained (spec and choices empty).
//  - json_object: any JSON object (OpenAI `response_format: json_object`).
//  - json_schema: spec = a JSON Schema document (`json_schema.schema`,
//    vLLM's `structured_outputs.json`); strict = OpenAI's `strict`.
//  - regex: spec = a regular expression the whole output matches.
//  - choice: choices = the allowed outputs (exactly one is produced).
//  - grammar: spec = an EBNF grammar (xgrammar's dialect, root rule `root`).
//  - structural_tag: spec = an xgrammar structural-tag JSON document (tool
//    calls: free text until a trigger, then the tag's schema-constrained body).
// TokenMaskOptions: per-token biases and bans that go through the same
// masking path (OpenAI's `logit_bias`, vLLM's `allowed_token_ids` and
// `bad_words`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::actors {

struct OutputConstraint {
  enum class Kind { none, json_object, json_schema, regex, choice, grammar, structural_tag };
  Kind kind = Kind::none;
  std::string spec;
  std::vector<std::string> choices;
  bool strict = false;

  bool active() const { return kind != Kind::none; }
};

struct TokenMaskOptions {
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias in [-100, 100])
  std::vector<int32_t> allowed_token_ids;             // empty: every token allowed
  std::vector<std::string> bad_words;                 // texts never produced

  bool active() const { return !logit_bias.empty() || !allowed_token_ids.empty() || !bad_words.empty(); }
};

}  // namespace pagoda::actors
