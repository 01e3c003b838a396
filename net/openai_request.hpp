// OpenAI-style request bodies (/v1/completions, /v1/chat/completions) to an
// engine GenerateRequest plus the API's own flags, with OpenAI-shaped errors.
//
// Parsing: simdjson's DOM parser (full validation: malformed JSON and
// trailing garbage are 400s; caf-beast-notes §8). The body must be one JSON
// object.
//
// Field policy (what the official `openai` client sends: only the fields the
// caller passed, with extra_body merged at the top level):
//  - read: model, prompt (completions) / messages (chat), stream,
//    stream_options.include_usage, logprobs (completions: int = top-N;
//    chat: bool) and top_logprobs (chat), max_completion_tokens (chat), and
//    every field of net/sampling_json.hpp (temperature, top_p, n, stop, seed,
//    max_tokens, presence/frequency_penalty, top_k, min_p,
//    repetition_penalty, use_beam_search, beam_width, length_penalty,
//    early_stopping, min_tokens, ignore_eos, stop_token_ids, speculative),
//    and through it the structured-output fields of net/constraint_json.hpp
//    (response_format, structured_outputs, guided_*, logit_bias,
//    allowed_token_ids, bad_words; issue 23).
//  - chat tool calling: tools / functions, tool_choice / function_call,
//    parallel_tool_calls (net/tool_request.hpp).
//  - accepted and ignored: user, metadata, store, service_tier (they change
//    nothing about the generated text).
//  - accepted only at their neutral value, else 400 "... is not supported":
//    echo (false), suffix (null / ""), best_of (null or = n), modalities
//    (null / ["text"]), audio, prediction (null).
//  - anything else: 400 "unknown field 'x'" with param "x" (vLLM ignores
//    extras; we reject them so that a misspelt parameter is not silently
//    dropped).
// A JSON null for any optional field means "absent".
// Beam search (use_beam_search / beam_width): the n best beams are the
// choices; with stream: true each beam's whole text comes in one chunk at
// the end (the engine streams no tokens for beams); logprobs with beam search
// are a 400.
//
// Prompts: a string, an array of one string, an array of token ids, or an
// array holding one array of token ids. Several prompts (batch) are a 400
// (send one request per prompt). Chat messages: [{role, content, name?}]
// with role system / developer (= system) / user / assistant / tool (legacy
// function = tool) and content a string, null, or an array of
// {"type":"text","text":...} parts (joined); an assistant message may carry
// tool_calls (or legacy function_call), a tool message tool_call_id
// (net/tool_request.hpp).
//
// Thread-safety: pure functions; resolve_prompt calls only the engine's
// thread-safe tokenize().
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/engine.hpp"
#include "net/server_context.hpp"
#include "net/tool_request.hpp"

namespace pagoda::net {

enum class ApiKind : uint8_t { completion, chat };

// An OpenAI error: {"error":{"message","type","param","code"}}; the type is
// "invalid_request_error" for 4xx and "server_error" for 5xx.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // empty: null
  std::string code;   // empty: null
};

struct OpenAiRequest {
  ApiKind kind = ApiKind::completion;
  actors::GenerateRequest generate;  // prompt_ids set by resolve_prompt
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool logprobs = false;        // report per-token logprobs
  int32_t top_logprobs = 0;     // candidates per token (0..kMaxTopLogprobs)
  bool max_tokens_given = false;
  ToolRequest tools;            // chat: tools, tool_choice, parallel_tool_calls
};

// Exactly one of request / error is meaningful: error when has_value().
struct ParsedRequest {
  OpenAiRequest request;
  std::optional<ApiError> error;
};

// Parses and validates a body (no tokenization yet). `model_id` is the name
// the server answers to: a request naming another model gets 404
// model_not_found; an absent model is accepted.
ParsedRequest parse_openai_request(ApiKind kind, std::string_view body, std::string_view model_id);

// Tokenizes the prompt (chat template for messages) with the engine, checks
// token ids against the vocabulary and the length limits
// (ctx.prompt_token_limit(), prompt + max_tokens <= max_model_len), sets the
// default max_tokens (chat: the rest of the context; completions: 16, cut to
// what fits), and stores the ids in request.generate.prompt_ids.
std::optional<ApiError> resolve_prompt(const ServerContext& ctx, OpenAiRequest& request);

// The pieces /tokenize shares: a prompt value and a messages array.
// `prompt` receives text or ids (exactly one non-empty on success).
std::optional<ApiError> read_prompt(simdjson::dom::element value, std::string& text, std::vector<int32_t>& ids);
std::optional<ApiError> read_messages(simdjson::dom::element value, std::vector<actors::ChatMessage>& out);

// A 400 invalid_request_error naming `param`.
ApiError bad_request(std::string message, std::string param = {});

}  // namespace pagoda::net
