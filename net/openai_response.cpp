// OpenAI response JSON (net/openai_response.hpp).
#include "net/openai_response.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "net/json_writer.hpp"

namespace pagoda::net {
namespace {

const char* object_name(ApiKind kind, bool chunk) {
  if (kind == ApiKind::completion) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

void write_header(JsonWriter& w, const ResponseMeta& meta, bool chunk) {
  w.key("id").value(meta.id);
  w.key("object").value(object_name(meta.kind, chunk));
  w.key("created").value(meta.created);
  w.key("model").value(meta.model);
  w.key("system_fingerprint").null();
}

// A logprob as the shortest text that reads back to the same float (half
// the digits of the double); -inf (a masked token) becomes null.
void write_float(JsonWriter& w, float v) {
  if (!std::isfinite(v)) {
    w.null();
    return;
  }
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string_view text(buf, size_t(res.ptr - buf));
  w.raw(text.find_first_of(".eE") == std::string_view::npos ? std::string(text) + ".0" : std::string(text));
}

void write_usage(JsonWriter& w, const Usage& usage) {
  w.begin_object();
  w.key("prompt_tokens").value(usage.prompt_tokens);
  w.key("completion_tokens").value(usage.completion_tokens);
  w.key("total_tokens").value(int64_t(usage.prompt_tokens) + usage.completion_tokens);
  if (usage.drafted > 0) {
    w.key("completion_tokens_details").begin_object();
    w.key("accepted_prediction_tokens").value(usage.accepted);
    w.key("rejected_prediction_tokens").value(usage.drafted - usage.accepted);
    w.end_object();
  }
  w.end_object();
}

void write_bytes(JsonWriter& w, const std::string& token) {
  w.key("bytes").begin_array();
  for (char c : token) w.value(int64_t(static_cast<unsigned char>(c)));
  w.end_array();
}

// {tokens, token_logprobs, top_logprobs, text_offset}
void write_completion_logprobs(JsonWriter& w, const ChoiceOut& c) {
  w.begin_object();
  w.key("tokens").begin_array();
  for (const TokenLogprob& t : c.logprobs) w.value(t.token);
  w.end_array();
  w.key("token_logprobs").begin_array();
  for (const TokenLogprob& t : c.logprobs) write_float(w, t.logprob);
  w.end_array();
  w.key("top_logprobs").begin_array();
  for (const TokenLogprob& t : c.logprobs) {
    // Candidates are best first; two that decode to the same text keep the
    // better one (a JSON object has one value per key).
    w.begin_object();
    for (size_t i = 0; i < t.top.size(); ++i) {
      bool seen = false;
      for (size_t j = 0; j < i && !seen; ++j) seen = t.top[j].token == t.top[i].token;
      if (seen) continue;
      w.key(t.top[i].token);
      write_float(w, t.top[i].logprob);
    }
    w.end_object();
  }
  w.end_array();
  w.key("text_offset").begin_array();
  int64_t offset = c.text_offset;
  for (const TokenLogprob& t : c.logprobs) {
    w.value(offset);
    offset += int64_t(t.token.size());
  }
  w.end_array();
  w.end_object();
}

// {content: [{token, logprob, bytes, top_logprobs}], refusal: null}
void write_chat_logprobs(JsonWriter& w, const ChoiceOut& c) {
  w.begin_object().key("content").begin_array();
  for (const TokenLogprob& t : c.logprobs) {
    w.begin_object();
    w.key("token").value(t.token);
    w.key("logprob");
    write_float(w, t.logprob);
    write_bytes(w, t.token);
    w.key("top_logprobs").begin_array();
    for (const TopCandidate& cand : t.top) {
      w.begin_object().key("token").value(cand.token).key("logprob");
      write_float(w, cand.logprob);
      write_bytes(w, cand.token);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array().key("refusal").null().end_object();
}

void write_logprobs(JsonWriter& w, ApiKind kind, const ChoiceOut& c) {
  w.key("logprobs");
  if (!c.has_logprobs) {
    w.null();
  } else if (kind == ApiKind::completion) {
    write_completion_logprobs(w, c);
  } else {
    write_chat_logprobs(w, c);
  }
}

void write_finish(JsonWriter& w, const ChoiceOut& c) {
  w.key("finish_reason");
  if (c.finish_reason.empty()) {
    w.null();
  } else {
    w.value(c.finish_reason);
  }
}

void write_tool_calls(JsonWriter& w, const std::vector<ToolCallOut>& calls, bool chunk) {
  w.key("tool_calls").begin_array();
  for (const ToolCallOut& t : calls) {
    w.begin_object();
    if (chunk) w.key("index").value(t.index);
    if (t.header) w.key("id").value(t.id).key("type").value("function");
    w.key("function").begin_object();
    if (t.header) w.key("name").value(t.name);
    w.key("arguments").value(t.arguments);
    w.end_object().end_object();
  }
  w.end_array();
}

void write_message(JsonWriter& w, const ChoiceOut& c) {
  w.key("message").begin_object().key("role").value("assistant").key("content");
  if (c.content_null) w.null(); else w.value(c.text);
  if (!c.tool_calls.empty()) write_tool_calls(w, c.tool_calls, /*chunk=*/false);
  w.end_object();
}

void write_choice(JsonWriter& w, ApiKind kind, const ChoiceOut& c, bool chunk) {
  w.begin_object();
  w.key("index").value(c.index);
  if (kind == ApiKind::completion) {
    w.key("text").value(c.text);
  } else if (!chunk) {
    write_message(w, c);
  } else {
    w.key("delta").begin_object();
    if (c.role) w.key("role").value("assistant");
    if (c.role || !c.text.empty()) w.key("content").value(c.text);
    if (!c.tool_calls.empty()) write_tool_calls(w, c.tool_calls, /*chunk=*/true);
    w.end_object();
  }
  write_logprobs(w, kind, c);
  write_finish(w, c);
  w.end_object();
}

}  // namespace

std::string make_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return std::string("call_") + hex;
}

ResponseMeta make_response_meta(ApiKind kind, std::string model) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  ResponseMeta meta;
  meta.kind = kind;
  meta.id = std::string(kind == ApiKind::chat ? "chatcmpl-" : "cmpl-") + hex;
  meta.created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
  meta.model = std::move(model);
  return meta;
}

std::string error_json(const ApiError& error) {
  JsonWriter w;
  w.begin_object().key("error").begin_object();
  w.key("message").value(error.message);
  w.key("type").value(error.status >= 500 ? "server_error" : "invalid_request_error");
  w.key("param");
  if (error.param.empty()) w.null(); else w.value(error.param);
  w.key("code");
  if (error.code.empty()) w.null(); else w.value(error.code);
  w.end_object().end_object();
  return w.take();
}

std::string response_body(const ResponseMeta& meta, const std::vector<ChoiceOut>& choices, const Usage& usage) {
  JsonWriter w;
  w.begin_object();
  write_header(w, meta, /*chunk=*/false);
  w.key("choices").begin_array();
  for (const ChoiceOut& c : choices) write_choice(w, meta.kind, c, /*chunk=*/false);
  w.end_array();
  w.key("usage");
  write_usage(w, usage);
  w.end_object();
  return w.take();
}

std::string chunk_body(const ResponseMeta& meta, const ChoiceOut& choice, bool usage_null) {
  JsonWriter w;
  w.begin_object();
  write_header(w, meta, /*chunk=*/true);
  w.key("choices").begin_array();
  write_choice(w, meta.kind, choice, /*chunk=*/true);
  w.end_array();
  if (usage_null) w.key("usage").null();
  w.end_object();
  return w.take();
}

std::string usage_chunk_body(const ResponseMeta& meta, const Usage& usage) {
  JsonWriter w;
  w.begin_object();
  write_header(w, meta, /*chunk=*/true);
  w.key("choices").begin_array().end_array();
  w.key("usage");
  write_usage(w, usage);
  w.end_object();
  return w.take();
}

}  // namespace pagoda::net
