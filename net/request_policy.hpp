// The transport's admission rules for an HTTP request, applied before the API
// key and routing (pure functions, thread-safe; net/http_session.cpp calls
// them on the session strand):
//   - framing (request smuggling, RFC 9112 §6): a Transfer-Encoding other
//     than exactly one `chunked`, or Transfer-Encoding together with
//     Content-Length, is a 400 and the connection closes;
//   - Host (DNS rebinding): the Host header's name must be one the server
//     answers to: localhost, an IP literal (a rebinding attack needs a DNS
//     name), the --host the server is bound to, or an --allowed-host entry
//     ("*" allows any). A request without Host (non-browser HTTP/1.0) passes.
//     Otherwise 403 host_not_allowed;
//   - Origin: a request carrying Origin must pass origin_allowed() (the
//     --allowed-origin list, else same host:port as Host). Otherwise 403
//     origin_not_allowed. This stops "simple" cross-site POSTs as well;
//   - Content-Type: a POST (every POST route takes JSON) must be
//     `application/json` (parameters such as charset allowed), else 415
//     unsupported_media_type: a page cannot send a body without a preflight.
// CORS is answered deliberately: only an Origin in the --allowed-origin list
// gets `Access-Control-Allow-Origin: <that origin>` (never `*`, never
// Allow-Credentials: the API key travels in a header, not a cookie), with
// `Vary: Origin`. OPTIONS is a preflight: 204 with the allowed methods and
// headers for an allowed Origin (no API key needed: browsers send none).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/http_exchange.hpp"
#include "net/server_context.hpp"

namespace pagoda::net {

struct Refusal {
  int status = 400;
  std::string message;
  std::string code;
};

// `fields`: the raw header fields in order (names as sent, any case).
std::optional<Refusal> framing_refusal(const HeaderList& fields);

// The Host header value's name (lower case, port and a trailing dot removed,
// IPv6 brackets kept): "LocalHost:8000" -> "localhost", "[::1]:80" -> "[::1]".
std::string host_name(std::string_view host);
bool host_allowed(std::string_view host, const ServerOptions& options);

// Host, Origin and Content-Type (see above) for a parsed request.
std::optional<Refusal> admission_refusal(const HttpRequest& request, const ServerOptions& options);

// The CORS headers for the answer to `request` (empty: none).
HeaderList cors_headers(const HttpRequest& request, const ServerOptions& options);
// The answer headers of an OPTIONS (preflight) request.
HeaderList preflight_headers(const HttpRequest& request, const ServerOptions& options);

}  // namespace pagoda::net
