// OpenAI response JSON: whole responses, SSE chunks and error bodies for
// /v1/completions ("text_completion") and /v1/chat/completions
// ("chat.completion" / "chat.completion.chunk"), in OpenAI's shapes:
//
//  completion choice: {index, text, logprobs, finish_reason}; logprobs is null
//    or {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}
//    (text_offset: byte offsets into the choice's completion text).
//  chat choice: {index, message: {role, content, tool_calls?}, logprobs,
//    finish_reason}; content is null for an answer of tool calls only;
//    tool_calls: [{id, type:"function", function: {name, arguments}}].
//    chunk choice: {index, delta, logprobs, finish_reason} where delta is
//    {role:"assistant", content:""} (first), {content}, {tool_calls: [{index,
//    id, type, function: {name, arguments: ""}}]} (a call's first delta),
//    {tool_calls: [{index, function: {arguments}}]} (its argument
//    fragments) or {} (last);
//    logprobs is null or {content: [{token, logprob, bytes, top_logprobs:
//    [{token, logprob, bytes}]}], refusal: null}.
//  usage: {prompt_tokens, completion_tokens, total_tokens}.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/openai_request.hpp"

namespace pagoda::net {

struct ResponseMeta {
  ApiKind kind = ApiKind::completion;
  std::string id;       // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;  // unix seconds
  std::string model;
};

// A fresh id ("cmpl-" or "chatcmpl-" + 24 random hex digits) and the time now.
ResponseMeta make_response_meta(ApiKind kind, std::string model);

struct TopCandidate {
  std::string token;  // its text (raw bytes; JSON output replaces invalid UTF-8)
  float logprob = 0.0f;
};

struct TokenLogprob {
  std::string token;
  float logprob = 0.0f;
  std::vector<TopCandidate> top;
};

// With speculative decoding, completion_tokens_details carries OpenAI's
// accepted_prediction_tokens / rejected_prediction_tokens (drafted tokens
// kept / dropped); absent when nothing was drafted.
struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int64_t drafted = 0, accepted = 0;
};

// One tool call of a chat answer, or (in a chunk) one piece of it: the
// first piece of a call has `header` (id, type, name), later ones only
// argument fragments.
struct ToolCallOut {
  int32_t index = 0;
  std::string id;  // "call_" + 24 hex digits
  std::string name;
  std::string arguments;  // JSON text (chunk: a fragment)
  bool header = true;
};

// One choice of a response, or one choice's delta in a chunk.
struct ChoiceOut {
  int32_t index = 0;
  std::string text;
  bool has_logprobs = false;          // false: "logprobs": null
  std::vector<TokenLogprob> logprobs;
  int32_t text_offset = 0;            // completions: offset of logprobs[0]'s text
  std::string finish_reason;          // empty: null
  bool role = false;                  // chat chunk: the first delta
  std::vector<ToolCallOut> tool_calls;  // chat: message.tool_calls / delta.tool_calls
  bool content_null = false;          // chat message: "content": null (an answer of tool calls only)
};

// A fresh tool call id: "call_" + 24 random hex digits.
std::string make_tool_call_id();

// {"error":{"message","type","param","code"}}.
std::string error_json(const ApiError& error);
// A non-streaming response.
std::string response_body(const ResponseMeta& meta, const std::vector<ChoiceOut>& choices, const Usage& usage);
// One SSE chunk with one choice; `usage_null` adds "usage": null (what
// OpenAI sends on every chunk when stream_options.include_usage is set).
std::string chunk_body(const ResponseMeta& meta, const ChoiceOut& choice, bool usage_null);
// The usage chunk (choices: []).
std::string usage_chunk_body(const ResponseMeta& meta, const Usage& usage);

}  // namespace pagoda::net
