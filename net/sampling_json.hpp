// Reading the engine's sampling parameters from a JSON request object, shared
// by the OpenAI routes and the /v1/ws protocol so both accept the same names,
// types and ranges. Input comes from simdjson's DOM parser (fully validated:
// see caf-beast-notes §8, untrusted input).
//
// Fields: temperature, top_k, top_p, min_p, repetition_penalty,
// presence_penalty, frequency_penalty, seed, stop (string or array of
// strings), stop_token_ids, max_tokens, min_tokens, ignore_eos, n,
// beam_width, use_beam_search (true: beam_width = max(n, 2) unless
// beam_width is given), length_penalty, early_stopping; and the scheduling
// fields priority (an int32, lower first) and user (a string of at most
// kMaxUserBytes bytes: options.client = "user:" + it, the fair-share key;
// "" leaves the client to the transport, see net/client_limits.hpp); the
// structured-output fields of net/constraint_json.hpp (response_format,
// structured_outputs, guided_*, logit_bias, allowed_token_ids, bad_words); and
// speculative ("off", "ngram", or {method, num_speculative_tokens,
// prompt_lookup_min, prompt_lookup_max}; unset: the server's default). A JSON
// null leaves the default. `logprobs` is API-specific and not read here.
//
// Request caps (untrusted input; each over-cap value is a 400 naming the
// field): stop at most kMaxStopStrings strings of at most kMaxStopBytes
// bytes each; stop_token_ids at most kMaxStopTokenIds ids; n in
// [1, kMaxN] (so best_of, which must equal n, too); beam_width in
// [0, SamplingOptions::kMaxBeamWidth]; logprobs / top_logprobs at most
// gpu::kMaxTopLogprobs (the routes); max_tokens is bounded by the context
// (prompt + max_tokens <= max_model_len), and the size of a non-streamed
// answer by ServerOptions::max_response_bytes.
#pragma once

#include <simdjson.h>

#include <string_view>

#include "actors/sampling_options.hpp"
#include "gpu/result.hpp"

namespace pagoda::net {

inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 256;
inline constexpr size_t kMaxStopTokenIds = 64;
inline constexpr int32_t kMaxN = 16;
inline constexpr size_t kMaxUserBytes = 256;

// Applies `key` when it is a sampling field. Returns true when applied (or
// null), false when `key` is not a sampling field. Errors name the field and
// the expected type (e.g. "temperature must be a number").
Result<bool> apply_sampling_field(std::string_view key, simdjson::dom::element value,
                                  actors::SamplingOptions& options, bool& use_beam_search);

// After all fields: resolves use_beam_search, then options.validate().
Result<void> finish_sampling(actors::SamplingOptions& options, bool use_beam_search);

}  // namespace pagoda::net
