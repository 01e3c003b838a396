// The /v1/ws frames (net/ws_messages.hpp): client frame parsing first, then
// the server frames' serializers.
#include "net/ws_messages.hpp"

#include <cmath>
#include <set>
#include <utility>

#include "net/json_writer.hpp"
#include "net/sampling_json.hpp"
#include "net/server_context.hpp"

namespace pagoda::net {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

WsBadFrame bad(WsErrorCode code, std::optional<std::string> id, std::string message,
               bool generate = false) {
  return WsBadFrame{code, std::move(id), std::move(message), generate};
}

// An integer in [lo, hi]; integral floats are accepted (as sampling_json does).
bool read_small_int(element v, int64_t lo, int64_t hi, int64_t& out) {
  if (v.type() == element_type::INT64) {
    out = v.get_int64().value_unsafe();
  } else if (v.type() == element_type::DOUBLE) {
    const double d = v.get_double().value_unsafe();
    if (d != std::floor(d) || d < double(lo) || d > double(hi)) return false;
    out = int64_t(d);
  } else {
    return false;
  }
  return out >= lo && out <= hi;
}

// messages: a non-empty array of {"role": string, "content": string}.
std::optional<std::string> read_messages(element v, std::vector<actors::ChatMessage>& out) {
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return "messages must be an array";
  size_t i = 0;
  for (element item : arr) {
    const std::string where = "messages[" + std::to_string(i++) + "]";
    object msg;
    if (item.get_object().get(msg) != simdjson::SUCCESS) return where + " must be an object";
    actors::ChatMessage m;
    bool has_role = false, has_content = false;
    for (auto field : msg) {
      std::string_view s;
      const bool is_string = field.value.get_string().get(s) == simdjson::SUCCESS;
      if (field.key == "role" || field.key == "content") {
        if (!is_string) return where + "." + std::string(field.key) + " must be a string";
        (field.key == "role" ? m.role : m.content) = std::string(s);
        (field.key == "role" ? has_role : has_content) = true;
      } else {
        return where + ": unknown field '" + std::string(field.key) + "'";
      }
    }
    if (!has_role || !has_content) return where + " needs role and content";
    out.push_back(std::move(m));
  }
  if (out.empty()) return "messages must not be empty";
  return std::nullopt;
}

// The request fields of a generate frame (everything but type, id, v).
std::optional<std::string> read_generate_field(std::string_view key, element value, WsGenerate& g,
                                               bool& use_beam_search, bool& has_prompt,
                                               bool& has_messages) {
  if (key == "prompt") {
    if (value.is_null()) return std::nullopt;
    std::string_view s;
    if (value.get_string().get(s) != simdjson::SUCCESS) return "prompt must be a string";
    g.request.prompt = std::string(s);
    has_prompt = true;
    return std::nullopt;
  }
  if (key == "messages") {
    if (value.is_null()) return std::nullopt;
    has_messages = true;
    return read_messages(value, g.request.messages);
  }
  if (key == "logprobs") {
    if (value.is_null()) return std::nullopt;
    int64_t k = 0;
    if (!read_small_int(value, 0, gpu::kMaxTopLogprobs, k)) {
      return "logprobs must be an integer in [0, " + std::to_string(gpu::kMaxTopLogprobs) + "]";
    }
    g.request.sampling.logprobs = int32_t(k);
    g.want_logprobs = true;
    return std::nullopt;
  }
  auto applied = apply_sampling_field(key, value, g.request.sampling, use_beam_search);
  if (!applied) return applied.error().message;
  if (!*applied) return "unknown field '" + std::string(key) + "'";
  return std::nullopt;
}

WsCommand parse_generate(object obj, std::string id) {
  WsGenerate g;
  g.id = std::move(id);
  bool use_beam_search = false, has_prompt = false, has_messages = false;
  std::set<std::string_view> seen;
  for (auto field : obj) {
    if (!seen.insert(field.key).second) {
      return bad(WsErrorCode::bad_request, g.id, "field '" + std::string(field.key) + "' is repeated", true);
    }
    if (field.key == "type" || field.key == "id" || field.key == "v") continue;
    auto err = read_generate_field(field.key, field.value, g, use_beam_search, has_prompt, has_messages);
    if (err) return bad(WsErrorCode::bad_request, g.id, std::move(*err), true);
  }
  if (has_prompt == has_messages) {
    return bad(WsErrorCode::bad_request, g.id, "give exactly one of prompt and messages", true);
  }
  auto ok = finish_sampling(g.request.sampling, use_beam_search);
  if (!ok) return bad(WsErrorCode::bad_request, g.id, ok.error().message, true);
  return g;
}

// Frames with no fields but type, v (and id for cancel).
std::optional<std::string> only_fields(object obj, bool with_id) {
  for (auto field : obj) {
    if (field.key == "type" || field.key == "v" || (with_id && field.key == "id")) continue;
    return "unknown field '" + std::string(field.key) + "'";
  }
  return std::nullopt;
}

// The id of a frame: nullopt + message when absent or invalid.
std::optional<std::string> read_id(object obj, std::string& problem) {
  element v;
  if (obj.at_key("id").get(v) != simdjson::SUCCESS) {
    problem = "id is required";
    return std::nullopt;
  }
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) {
    problem = "id must be a string";
    return std::nullopt;
  }
  if (s.empty() || s.size() > kWsMaxIdBytes) {
    problem = "id must have 1 to " + std::to_string(kWsMaxIdBytes) + " bytes";
    return std::nullopt;
  }
  return std::string(s);
}

}  // namespace

const char* ws_error_code_name(WsErrorCode code) {
  switch (code) {
    case WsErrorCode::bad_json: return "bad_json";
    case WsErrorCode::bad_request: return "bad_request";
    case WsErrorCode::unknown_type: return "unknown_type";
    case WsErrorCode::duplicate_id: return "duplicate_id";
    case WsErrorCode::unknown_id: return "unknown_id";
    case WsErrorCode::too_many_requests: return "too_many_requests";
    case WsErrorCode::overloaded: return "overloaded";
    case WsErrorCode::prompt_too_long: return "prompt_too_long";
    case WsErrorCode::not_ready: return "not_ready";
    case WsErrorCode::shutting_down: return "shutting_down";
    case WsErrorCode::binary_frame: return "binary_frame";
    case WsErrorCode::frame_too_big: return "frame_too_big";
    case WsErrorCode::engine_error: return "engine_error";
    case WsErrorCode::engine_unavailable: return "engine_unavailable";
    case WsErrorCode::internal: return "internal";
  }
  return "internal";
}

WsCommand WsFrameParser::parse(std::string_view frame) {
  element root;
  if (auto e = parser_.parse(frame.data(), frame.size()).get(root); e != simdjson::SUCCESS) {
    return bad(WsErrorCode::bad_json, std::nullopt,
               std::string("invalid JSON: ") + simdjson::error_message(e));
  }
  object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return bad(WsErrorCode::bad_request, std::nullopt, "a frame must be a JSON object");
  }
  std::string id_problem;
  std::optional<std::string> id = read_id(obj, id_problem);
  element type_el;
  std::string_view type;
  if (obj.at_key("type").get(type_el) != simdjson::SUCCESS) {
    return bad(WsErrorCode::bad_request, id, "type is required");
  }
  if (type_el.get_string().get(type) != simdjson::SUCCESS) {
    return bad(WsErrorCode::bad_request, id, "type must be a string");
  }
  element v;
  int64_t version = 0;
  if (obj.at_key("v").get(v) == simdjson::SUCCESS &&
      !(read_small_int(v, kWsProtocolVersion, kWsProtocolVersion, version))) {
    return bad(WsErrorCode::bad_request, id, "v must be " + std::to_string(kWsProtocolVersion),
               type == "generate");
  }
  if (type == "generate" || type == "cancel") {
    if (!id) return bad(WsErrorCode::bad_request, std::nullopt, id_problem);
    if (type == "generate") return parse_generate(obj, std::move(*id));
    if (auto err = only_fields(obj, true)) return bad(WsErrorCode::bad_request, id, std::move(*err));
    return WsCancel{std::move(*id)};
  }
  if (type == "kv_subscribe" || type == "kv_unsubscribe") {
    if (auto err = only_fields(obj, false)) return bad(WsErrorCode::bad_request, std::nullopt, std::move(*err));
    return WsKvSubscribe{type == "kv_subscribe"};
  }
  return bad(WsErrorCode::unknown_type, id, "unknown type '" + std::string(type) + "'");
}

// ---- server frames ----------------------------------------------------------

namespace {

void write_beam(JsonWriter& w, const actors::BeamHypothesis& b) {
  w.begin_object();
  w.key("text").value(b.text);
  w.key("token_ids").begin_array();
  for (int32_t t : b.token_ids) w.value(t);
  w.end_array();
  w.key("cumulative_logprob").value(b.cumulative_logprob);
  w.key("score").value(b.score);
  w.key("finished").value(b.finish != actors::FinishReason::none);
  w.key("finish_reason");
  if (b.finish == actors::FinishReason::none) {
    w.null();
  } else {
    w.value(actors::finish_reason_name(b.finish));
  }
  w.end_object();
}

void write_beams(JsonWriter& w, const std::vector<actors::BeamHypothesis>& beams) {
  w.key("beams").begin_array();
  for (const auto& b : beams) write_beam(w, b);
  w.end_array();
}

}  // namespace

std::string ws_hello_frame(const ServerContext& context) {
  JsonWriter w;
  w.begin_object().key("type").value("hello").key("v").value(kWsProtocolVersion);
  w.key("model").value(context.model_id());
  const actors::EngineClient* engine = context.engine.get();
  w.key("max_model_len").value(engine ? engine->max_model_len() : 0);
  w.key("max_prompt_tokens").value(context.prompt_token_limit());
  w.key("max_requests_per_connection").value(context.options.max_requests_per_connection);
  w.key("max_frame_bytes").value(uint64_t(context.options.max_frame_bytes));
  w.key("kv_interval_ms").value(int64_t(context.options.kv_interval.count()));
  w.key("block_size").value(engine ? engine->options().block_size : 0);
  w.key("kv_blocks_total").value(engine ? engine->num_kv_blocks() : 0);
  return w.end_object().take();
}

std::string ws_accepted_frame(std::string_view id, int32_t prompt_tokens,
                              const actors::SamplingOptions& sampling) {
  JsonWriter w;
  w.begin_object().key("type").value("accepted").key("id").value(id);
  w.key("prompt_tokens").value(prompt_tokens);
  w.key("n").value(sampling.n).key("beam_width").value(sampling.beam_width);
  return w.end_object().take();
}

std::string ws_token_frame(std::string_view id, const actors::TokenDelta& delta, bool want_logprobs,
                           const actors::EngineClient& engine) {
  JsonWriter w;
  w.begin_object().key("type").value("token").key("id").value(id);
  w.key("index").value(delta.index).key("text").value(delta.text);
  if (delta.token_id >= 0) {
    w.key("token_id").value(delta.token_id);
    if (want_logprobs) {
      w.key("logprob").value(double(delta.logprob));
      if (!delta.top_tokens.empty()) {
        w.key("top_logprobs").begin_array();
        for (size_t i = 0; i < delta.top_tokens.size(); ++i) {
          auto text = engine.detokenize({delta.top_tokens[i]});
          w.begin_object().key("token_id").value(delta.top_tokens[i]);
          w.key("text").value(text ? std::string_view(*text) : std::string_view());
          const float lp = i < delta.top_logprobs.size() ? delta.top_logprobs[i] : 0.0f;
          w.key("logprob").value(double(lp)).end_object();
        }
        w.end_array();
      }
    }
  }
  return w.end_object().take();
}

std::string ws_beams_frame(std::string_view id, const actors::BeamsUpdate& update) {
  JsonWriter w;
  w.begin_object().key("type").value("beams").key("id").value(id);
  write_beams(w, update.beams);
  return w.end_object().take();
}

std::string ws_done_frame(std::string_view id, const actors::RequestDone& done, bool shutting_down) {
  JsonWriter w;
  w.begin_object().key("type").value("done").key("id").value(id);
  w.key("finish_reasons").begin_array();
  for (actors::FinishReason r : done.finish) {
    const bool shutdown = shutting_down && r == actors::FinishReason::abort;
    w.value(shutdown ? "shutdown" : actors::finish_reason_name(r));
  }
  w.end_array();
  w.key("usage").begin_object();
  w.key("prompt_tokens").value(done.prompt_tokens);
  w.key("completion_tokens").value(done.completion_tokens);
  w.key("total_tokens").value(done.prompt_tokens + done.completion_tokens);
  if (done.spec_drafted > 0) {  // as the HTTP routes' usage (net/openai_response.hpp)
    w.key("completion_tokens_details").begin_object();
    w.key("accepted_prediction_tokens").value(done.spec_accepted);
    w.key("rejected_prediction_tokens").value(done.spec_drafted - done.spec_accepted);
    w.end_object();
  }
  w.end_object();
  if (!done.beams.empty()) write_beams(w, done.beams);
  return w.end_object().take();
}

std::string ws_error_frame(const std::optional<std::string>& id, WsErrorCode code, std::string_view message,
                           bool terminal) {
  JsonWriter w;
  w.begin_object().key("type").value("error").key("id");
  if (id) {
    w.value(*id);
  } else {
    w.null();
  }
  w.key("code").value(ws_error_code_name(code)).key("message").value(message);
  w.key("terminal").value(terminal && id.has_value());
  return w.end_object().take();
}

}  // namespace pagoda::net
