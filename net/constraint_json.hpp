// Reading structured-output and token-rule fields from a JSON request
// object (issue 23), shared by the OpenAI routes and /v1/ws (through
// apply_sampling_field, net/sampling_json.hpp), so both accept the same
// forms:
//  - response_format: {type: text} | {type: json_object} |
//    {type: json_schema, json_schema: {name, schema, strict?, description?}} |
//    {type: structural_tag, format: ...} (xgrammar's structural tag);
//  - structured_outputs (vLLM): exactly one of json (a schema object or its
//    JSON text), regex, choice (non-empty array of strings), grammar (EBNF),
//    json_object (true), structural_tag (JSON text); disable_fallback and
//    disable_any_whitespace / disable_additional_properties are accepted and
//    ignored (JSON is always compact and strict here);
//  - vLLM's older guided_json / guided_regex / guided_choice / guided_grammar
//    (and guided_decoding_backend, ignored);
//  - logit_bias {"<token id>": bias in [-100, 100]} (OpenAI), allowed_token_ids
//    [ids], bad_words [strings] (vLLM).
// At most one output constraint per request (a second is a 400). Caps
// (untrusted input): kMaxLogitBias entries, kMaxAllowedIds ids, kMaxBadWords
// words of at most kMaxStopBytes bytes, kMaxConstraintBytes of specification.
// Errors name the field. Whether a schema / regex / grammar compiles is the
// engine's answer (an error starting with actors::kInvalidRequest).
#pragma once

#include <simdjson.h>

#include <string_view>

#include "actors/sampling_options.hpp"
#include "gpu/result.hpp"

namespace pagoda::net {

inline constexpr size_t kMaxLogitBias = 1024;
inline constexpr size_t kMaxAllowedIds = 1 << 17;
inline constexpr size_t kMaxBadWords = 64;
inline constexpr size_t kMaxConstraintBytes = 1 << 20;
inline constexpr size_t kMaxChoices = 1024;

// Applies `key` when it is one of the fields above (true), else false.
// A JSON null leaves the default.
Result<bool> apply_constraint_field(std::string_view key, simdjson::dom::element value,
                                    actors::SamplingOptions& options);

}  // namespace pagoda::net
