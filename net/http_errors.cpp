#include "net/http_errors.hpp"

#include "model/model_inspect.hpp"

namespace pagoda::net {

std::string_view error_type_for_status(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(int status, std::string_view message, std::string_view code) {
  std::string out = "{\"error\":{\"message\":";
  out += model::json_quote(message);
  out += ",\"type\":";
  out += model::json_quote(error_type_for_status(status));
  out += ",\"param\":null,\"code\":";
  out += model::json_quote(code);
  out += "}}";
  return out;
}

}  // namespace pagoda::net
