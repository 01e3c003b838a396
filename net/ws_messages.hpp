// The frames of the /v1/ws protocol (docs/protocol.md): client frames parsed
// into typed commands, and server frames serialized to JSON text.
//
// Parsing uses simdjson's DOM parser, which validates the whole frame
// (caf-beast-notes §8): trailing garbage and invalid UTF-8 are `bad_json`.
// Generate frames are strict: an unknown or repeated field is `bad_request`
// naming it. Sampling fields are read by net/sampling_json.hpp, so the HTTP
// routes and this protocol accept the same names, types and ranges.
//
// Thread-safety: a WsFrameParser is used by one thread at a time (it owns a
// simdjson parser); the serializers are pure functions, callable anywhere.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "actors/engine.hpp"

namespace pagoda::net {

struct ServerContext;

inline constexpr int32_t kWsProtocolVersion = 1;
inline constexpr size_t kWsMaxIdBytes = 128;

// The closed set of error codes (docs/protocol.md, "error").
enum class WsErrorCode : uint8_t {
  bad_json,
  bad_request,
  unknown_type,
  duplicate_id,
  unknown_id,
  too_many_requests,
  overloaded,
  prompt_too_long,
  not_ready,
  shutting_down,
  binary_frame,
  frame_too_big,
  engine_error,
  engine_unavailable,  // a remote engine node was lost mid-request (docs/scaling.md)
  internal,
};
const char* ws_error_code_name(WsErrorCode code);

// Client frames, parsed.
struct WsGenerate {
  std::string id;
  actors::GenerateRequest request;  // prompt or messages, and the sampling options
  bool want_logprobs = false;       // `logprobs` given: token frames carry logprob fields
};
struct WsCancel {
  std::string id;
};
struct WsKvSubscribe {
  bool subscribe = true;  // false: kv_unsubscribe
};
// A frame that is answered with an error frame (the id when one was readable).
struct WsBadFrame {
  WsErrorCode code = WsErrorCode::bad_request;
  std::optional<std::string> id;
  std::string message;
  bool generate = false;  // a generate frame with a readable id (its rejection)
};
using WsCommand = std::variant<WsGenerate, WsCancel, WsKvSubscribe, WsBadFrame>;

class WsFrameParser {
 public:
  // Any input is accepted (never crashes); `frame` need not be padded.
  WsCommand parse(std::string_view frame);

 private:
  simdjson::dom::parser parser_;
};

// Server frames. `id` strings are client-chosen and are escaped by JsonWriter.
std::string ws_hello_frame(const ServerContext& context);
std::string ws_accepted_frame(std::string_view id, int32_t prompt_tokens,
                              const actors::SamplingOptions& sampling);
// A `token` frame. With want_logprobs the frame carries `logprob` and, when
// delta.top_tokens is non-empty, `top_logprobs` whose texts come from
// engine.detokenize (one token each). A delta without a token id carries
// only its text.
std::string ws_token_frame(std::string_view id, const actors::TokenDelta& delta, bool want_logprobs,
                           const actors::EngineClient& engine);
std::string ws_beams_frame(std::string_view id, const actors::BeamsUpdate& update);
// shutting_down: an `abort` finish is reported as "shutdown".
std::string ws_done_frame(std::string_view id, const actors::RequestDone& done, bool shutting_down);
// terminal: the error ends request `id` (a rejected generate frame, or an
// accepted request that failed); always false without an id.
std::string ws_error_frame(const std::optional<std::string>& id, WsErrorCode code, std::string_view message,
                           bool terminal);

}  // namespace pagoda::net
