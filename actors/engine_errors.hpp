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
