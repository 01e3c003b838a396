// OpenAI-style error bodies for the transport's own answers (401, 403, 404,
// 413, 503, ...): {"error":{"message":..,"type":..,"param":null,"code":..}}.
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace pagoda::net {

// The OpenAI error `type` for an HTTP status, e.g. 401 -> "authentication_error",
// 404 -> "not_found_error", 4xx -> "invalid_request_error", 5xx -> "server_error".
std::string_view error_type_for_status(int status);

// The JSON body; `code` is a short machine-readable reason (e.g. "body_too_large").
std::string error_body(int status, std::string_view message, std::string_view code);

}  // namespace pagoda::net
