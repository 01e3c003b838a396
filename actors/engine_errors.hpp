// Error messages with a meaning the front end maps to a protocol code
// (RequestSink::on_error carries a string). Header-only, pure.
#pragma once

#include <string_view>

namespace pagoda::actors {

// The start of the message of a request whose remote engine node was lost
// after it had streamed (RemoteEngine, docs/scaling.md): the WebSocket error
// code and the OpenAI error code `engine_unavailable`, HTTP 503.
inline constexpr std::string_view kEngineUnavailable = "engine_unavailable";

inline bool is_engine_unavailable(std::string_view message) {
  return message.substr(0, kEngineUnavailable.size()) == kEngineUnavailable;
}

}  // namespace pagoda::actors

namespace pagoda::actors {

// The start of the message of a request the engine refused for its content
// (an output constraint that does not compile: a bad schema, regex or
// grammar): HTTP 400, WebSocket `invalid_request`.
inline constexpr std::string_view kInvalidRequest = "invalid request: ";

inline bool is_invalid_request(std::string_view message) {
  return message.substr(0, kInvalidRequest.size()) == kInvalidRequest;
}

}  // namespace pagoda::actors
