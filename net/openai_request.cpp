// OpenAI request bodies to GenerateRequest (net/openai_request.hpp).
#include "net/openai_request.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "net/sampling_json.hpp"

namespace pagoda::net {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr std::string_view kIgnoredFields[] = {"metadata", "store", "service_tier"};
// logit_bias and response_format are read before these lists are consulted
// (apply_sampling_field -> apply_constraint_field, net/constraint_json.hpp).
constexpr std::string_view kCommonFields[] = {"model", "stream", "stream_options"};
constexpr std::string_view kCompletionFields[] = {"prompt", "logprobs", "echo", "suffix", "best_of"};
constexpr std::string_view kChatFields[] = {
    "messages", "logprobs", "top_logprobs", "max_completion_tokens", "tools", "functions",
    "tool_choice", "function_call", "modalities", "audio", "prediction",
    "parallel_tool_calls"};

template <size_t N>
bool listed(const std::string_view (&names)[N], std::string_view key) {
  return std::find(std::begin(names), std::end(names), key) != std::end(names);
}

bool is_api_field(ApiKind kind, std::string_view key) {
  if (listed(kIgnoredFields, key) || listed(kCommonFields, key)) return true;
  return kind == ApiKind::chat ? listed(kChatFields, key) : listed(kCompletionFields, key);
}

// What the fields leave for the checks that need all of them.
struct FieldState {
  std::string model;
  bool have_prompt = false;
  bool have_stream_options = false;
  bool use_beam_search = false;
  std::optional<int64_t> best_of;
  std::optional<int32_t> top_logprobs;          // chat
  std::optional<int32_t> max_completion_tokens;  // chat
};

std::optional<int64_t> read_int(element v) {
  int64_t i = 0;
  if (v.type() == element_type::INT64 && v.get_int64().get(i) == simdjson::SUCCESS) return i;
  double d = 0.0;
  if (v.type() == element_type::DOUBLE && v.get_double().get(d) == simdjson::SUCCESS &&
      std::fabs(d) < 9.0e18 && d == double(int64_t(d))) {
    return int64_t(d);
  }
  return std::nullopt;
}

std::optional<ApiError> read_int_in(std::string_view key, element v, int64_t lo, int64_t hi, int32_t& out) {
  auto i = read_int(v);
  if (!i) return bad_request(std::string(key) + " must be an integer", std::string(key));
  if (*i < lo || *i > hi) {
    return bad_request(std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                       std::string(key));
  }
  out = int32_t(*i);
  return std::nullopt;
}

std::optional<ApiError> read_bool(std::string_view key, element v, bool& out) {
  if (v.get_bool().get(out) != simdjson::SUCCESS) {
    return bad_request(std::string(key) + " must be a boolean", std::string(key));
  }
  return std::nullopt;
}

std::optional<ApiError> read_stream_options(element v, OpenAiRequest& req) {
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    return bad_request("stream_options must be an object", "stream_options");
  }
  for (auto field : obj) {
    if (field.key != "include_usage") {
      const std::string name = "stream_options." + std::string(field.key);
      return bad_request("unknown field '" + name + "'", name);
    }
    if (field.value.is_null()) continue;
    if (auto e = read_bool("stream_options.include_usage", field.value, req.include_usage)) return e;
  }
  return std::nullopt;
}

// Fields accepted only at their neutral value (see the header).
std::optional<ApiError> neutral_or_error(bool neutral, std::string_view key, std::string_view allowed) {
  if (neutral) return std::nullopt;
  return bad_request(std::string(key) + " is not supported (only " + std::string(allowed) + ")",
                     std::string(key));
}

std::optional<ApiError> read_neutral_field(std::string_view key, element v) {
  std::string_view s;
  bool b = false;
  simdjson::dom::array arr;
  if (key == "echo") return neutral_or_error(v.get_bool().get(b) == simdjson::SUCCESS && !b, key, "false");
  if (key == "suffix") {
    return neutral_or_error(v.get_string().get(s) == simdjson::SUCCESS && s.empty(), key, "null or \"\"");
  }
  if (key == "modalities") {
    const bool text_only = v.get_array().get(arr) == simdjson::SUCCESS && arr.size() == 1 &&
                           arr.at(0).get_string().get(s) == simdjson::SUCCESS && s == "text";
    return neutral_or_error(text_only, key, "[\"text\"]");
  }
  return neutral_or_error(false, key, "null");  // audio, prediction
}

std::optional<ApiError> read_api_field(ApiKind kind, std::string_view key, element v, OpenAiRequest& req,
                                       FieldState& st) {
  const bool chat = kind == ApiKind::chat;
  if (listed(kIgnoredFields, key)) return std::nullopt;
  if (key == "model") {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) return bad_request("model must be a string", "model");
    st.model = std::string(s);
    return std::nullopt;
  }
  if (key == "prompt") {
    st.have_prompt = true;
    return read_prompt(v, req.generate.prompt, req.generate.prompt_ids);
  }
  if (key == "messages") {
    st.have_prompt = true;
    return read_messages(v, req.generate.messages);
  }
  if (key == "stream") return read_bool(key, v, req.stream);
  if (key == "stream_options") {
    st.have_stream_options = true;
    return read_stream_options(v, req);
  }
  if (key == "logprobs" && chat) return read_bool(key, v, req.logprobs);
  if (key == "logprobs") {
    req.logprobs = true;
    return read_int_in(key, v, 0, gpu::kMaxTopLogprobs, req.top_logprobs);
  }
  if (key == "top_logprobs") {
    int32_t k = 0;
    if (auto e = read_int_in(key, v, 0, gpu::kMaxTopLogprobs, k)) return e;
    st.top_logprobs = k;
    return std::nullopt;
  }
  if (key == "max_completion_tokens") {
    int32_t m = 0;
    if (auto e = read_int_in(key, v, 1, std::numeric_limits<int32_t>::max(), m)) return e;
    st.max_completion_tokens = m;
    return std::nullopt;
  }
  if (key == "tools" || key == "functions") return read_tools(key, v, req.tools);
  if (key == "tool_choice" || key == "function_call") return read_tool_choice(key, v, req.tools);
  if (key == "parallel_tool_calls") return read_bool(key, v, req.tools.parallel);
  if (key == "best_of") {
    st.best_of = read_int(v);
    if (!st.best_of) return bad_request("best_of must be an integer", "best_of");
    return std::nullopt;
  }
  return read_neutral_field(key, v);
}

std::optional<ApiError> read_field(ApiKind kind, std::string_view key, element v, OpenAiRequest& req,
                                   FieldState& st) {
  auto sampling = apply_sampling_field(key, v, req.generate.sampling, st.use_beam_search);
  if (!sampling) return bad_request(sampling.error().message, std::string(key));
  if (*sampling) {
    if (key == "max_tokens" && !v.is_null()) req.max_tokens_given = true;
    return std::nullopt;
  }
  if (!is_api_field(kind, key)) return bad_request("unknown field '" + std::string(key) + "'", std::string(key));
  if (v.is_null()) return std::nullopt;
  return read_api_field(kind, key, v, req, st);
}

// The checks that need every field.
std::optional<ApiError> finish_request(OpenAiRequest& req, const FieldState& st, std::string_view model_id) {
  const bool chat = req.kind == ApiKind::chat;
  if (!st.have_prompt) {
    return chat ? bad_request("messages is required", "messages") : bad_request("prompt is required", "prompt");
  }
  if (chat) {
    if (auto e = finish_tools(req.tools)) return e;
  }
  if (!st.model.empty() && st.model != model_id) {
    return ApiError{404, "The model `" + st.model + "` does not exist.", "model", "model_not_found"};
  }
  if (st.have_stream_options && !req.stream) {
    return bad_request("stream_options is only allowed when stream is true", "stream_options");
  }
  auto& sampling = req.generate.sampling;
  if (st.best_of && *st.best_of != sampling.n) {
    return bad_request("best_of is not supported (only null or n)", "best_of");
  }
  if (st.top_logprobs) {
    if (!req.logprobs) return bad_request("top_logprobs requires logprobs to be true", "top_logprobs");
    req.top_logprobs = *st.top_logprobs;
  }
  if (st.max_completion_tokens) {
    sampling.max_tokens = *st.max_completion_tokens;
    req.max_tokens_given = true;
  }
  // Chat without a limit: the rest of the context (resolve_prompt sets it).
  if (chat && !req.max_tokens_given) sampling.max_tokens = std::numeric_limits<int32_t>::max();
  sampling.logprobs = req.top_logprobs;
  if (auto ok = finish_sampling(sampling, st.use_beam_search); !ok) {
    const std::string& m = ok.error().message;
    return bad_request(m, m.substr(0, m.find(' ')));
  }
  if (sampling.beam_width > 0 && req.logprobs) {
    return bad_request("logprobs are not supported with beam search", "logprobs");
  }
  return std::nullopt;
}

std::optional<ApiError> read_token_ids(simdjson::dom::array arr, std::vector<int32_t>& ids) {
  for (element item : arr) {
    auto i = read_int(item);
    if (!i || *i < 0 || *i > std::numeric_limits<int32_t>::max()) {
      return bad_request("prompt token ids must be non-negative integers", "prompt");
    }
    ids.push_back(int32_t(*i));
  }
  return std::nullopt;
}

std::optional<ApiError> read_content(size_t index, element v, std::string& out) {
  const std::string name = "messages[" + std::to_string(index) + "].content";
  std::string_view s;
  if (v.is_null()) return std::nullopt;
  if (v.get_string().get(s) == simdjson::SUCCESS) {
    out = std::string(s);
    return std::nullopt;
  }
  simdjson::dom::array parts;
  if (v.get_array().get(parts) != simdjson::SUCCESS) {
    return bad_request(name + " must be a string or an array of content parts", name);
  }
  for (element part : parts) {
    std::string_view type, text;
    if (part["type"].get_string().get(type) != simdjson::SUCCESS || type != "text") {
      return bad_request(name + ": only {\"type\":\"text\"} content parts are supported", name);
    }
    if (part["text"].get_string().get(text) != simdjson::SUCCESS) {
      return bad_request(name + ": a text part needs a string \"text\"", name);
    }
    if (!out.empty()) out += '\n';
    out += text;
  }
  return std::nullopt;
}

std::optional<ApiError> read_message(size_t index, element v, actors::ChatMessage& msg) {
  const std::string name = "messages[" + std::to_string(index) + "]";
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return bad_request(name + " must be an object", "messages");
  bool have_role = false, have_content = false;
  for (auto field : obj) {
    if (field.key == "role") {
      std::string_view role;
      if (field.value.get_string().get(role) != simdjson::SUCCESS ||
          (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool" &&
           role != "function")) {
        return bad_request(name + ".role must be one of system, developer, user, assistant, tool", name + ".role");
      }
      msg.role = role == "developer" ? "system" : role == "function" ? "tool" : std::string(role);
      have_role = true;
    } else if (field.key == "content") {
      if (auto e = read_content(index, field.value, msg.content)) return e;
      have_content = !field.value.is_null();
    } else if (field.key == "tool_calls" || field.key == "function_call" || field.key == "tool_call_id") {
      if (auto e = read_message_tool_field(name, field.key, field.value, msg)) return e;
    } else if (field.key == "name") {
      std::string_view who;
      if (!field.value.is_null() && field.value.get_string().get(who) != simdjson::SUCCESS) {
        return bad_request(name + ".name must be a string", name + ".name");
      }
      msg.name = std::string(who);
    } else {
      const std::string bad = name + "." + std::string(field.key);
      return bad_request("unknown field '" + bad + "'", bad);
    }
  }
  if (!have_role) return bad_request(name + ".role is required", name + ".role");
  if (!msg.tool_calls_json.empty() && msg.role != "assistant") {
    return bad_request(name + ".tool_calls is only allowed on assistant messages", name + ".tool_calls");
  }
  // As OpenAI: only an assistant message may omit its content (or send null).
  if (!have_content && msg.role != "assistant") {
    return bad_request(name + ".content is required for role '" + msg.role + "'", name + ".content");
  }
  return std::nullopt;
}

}  // namespace

ApiError bad_request(std::string message, std::string param) {
  return ApiError{400, std::move(message), std::move(param), {}};
}

std::optional<ApiError> read_prompt(element value, std::string& text, std::vector<int32_t>& ids) {
  std::string_view s;
  if (value.get_string().get(s) == simdjson::SUCCESS) {
    text = std::string(s);
    return std::nullopt;
  }
  simdjson::dom::array arr;
  if (value.get_array().get(arr) != simdjson::SUCCESS) {
    return bad_request("prompt must be a string, an array of one string, or an array of token ids", "prompt");
  }
  if (arr.size() == 0) return bad_request("prompt must not be empty", "prompt");
  const element first = arr.at(0).value_unsafe();
  const bool nested = first.type() == element_type::ARRAY || first.type() == element_type::STRING;
  if (nested && arr.size() > 1) {
    return bad_request("batched prompts are not supported: send one prompt per request", "prompt");
  }
  if (first.get_string().get(s) == simdjson::SUCCESS) {
    text = std::string(s);
    return std::nullopt;
  }
  simdjson::dom::array inner;
  if (first.get_array().get(inner) == simdjson::SUCCESS) {
    if (inner.size() == 0) return bad_request("prompt must not be empty", "prompt");
    return read_token_ids(inner, ids);
  }
  return read_token_ids(arr, ids);
}

std::optional<ApiError> read_messages(element value, std::vector<actors::ChatMessage>& out) {
  simdjson::dom::array arr;
  if (value.get_array().get(arr) != simdjson::SUCCESS) return bad_request("messages must be an array", "messages");
  if (arr.size() == 0) return bad_request("messages must not be empty", "messages");
  for (element item : arr) {
    actors::ChatMessage msg;
    if (auto e = read_message(out.size(), item, msg)) return e;
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

ParsedRequest parse_openai_request(ApiKind kind, std::string_view body, std::string_view model_id) {
  ParsedRequest out;
  out.request.kind = kind;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(body.data(), body.size()).get(root); err != simdjson::SUCCESS) {
    out.error = bad_request(std::string("the body is not valid JSON: ") + simdjson::error_message(err));
    return out;
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    out.error = bad_request("the body must be a JSON object");
    return out;
  }
  FieldState st;
  for (auto field : obj) {
    out.error = read_field(kind, field.key, field.value, out.request, st);
    if (out.error) return out;
  }
  out.error = finish_request(out.request, st, model_id);
  return out;
}

std::optional<ApiError> resolve_prompt(const ServerContext& ctx, OpenAiRequest& req) {
  const std::string param = req.kind == ApiKind::chat ? "messages" : "prompt";
  const int32_t vocab = ctx.engine->vocab_size();
  for (int32_t id : req.generate.prompt_ids) {
    if (id < 0 || id >= vocab) {
      return bad_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(vocab) + ")", param);
    }
  }
  auto ids = ctx.engine->tokenize(req.generate);
  if (!ids) return bad_request(ids.error().message, param);
  const int32_t n = int32_t(ids->size());
  if (n == 0) return bad_request("the prompt has no tokens", param);
  const int32_t max_len = ctx.engine->max_model_len();
  auto too_long = [&](const std::string& detail) {
    return ApiError{400, "This model's maximum context length is " + std::to_string(max_len) +
                             " tokens. However, " + detail + " Please reduce the length of the " +
                             (req.kind == ApiKind::chat ? "messages" : "prompt") + " or completion.",
                    param, "context_length_exceeded"};
  };
  if (n > ctx.prompt_token_limit()) {
    return too_long("your prompt has " + std::to_string(n) + " tokens (this server's prompt limit is " +
                    std::to_string(ctx.prompt_token_limit()) + ").");
  }
  auto& sampling = req.generate.sampling;
  const int32_t rest = max_len - n;
  if (!req.max_tokens_given) {
    sampling.max_tokens = std::min(sampling.max_tokens, rest);
  } else if (sampling.max_tokens > rest) {
    return too_long("you requested " + std::to_string(int64_t(n) + sampling.max_tokens) + " tokens (" +
                    std::to_string(n) + " in the prompt, " + std::to_string(sampling.max_tokens) +
                    " in the completion).");
  }
  sampling.min_tokens = std::min(sampling.min_tokens, sampling.max_tokens);
  req.generate.prompt_ids = std::move(ids).value();
  return std::nullopt;
}

}  // namespace pagoda::net
