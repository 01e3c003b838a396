// Access control for the transport: the API key (HTTP `Authorization:
// Bearer KEY`; WebSocket `Sec-WebSocket-Protocol: bearer.KEY` or
// `?api_key=KEY`) and the Origin allow-list (HTTP and WebSocket; the Host
// header is checked first, net/request_policy.hpp). Pure functions,
// thread-safe; keys are compared as SHA-256 digests in constant time, so the
// time leaks neither where they differ nor the configured key's length.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::net {

// ASCII lower-case of s (header names, scheme/host tokens).
std::string lower(std::string_view s);
// s without leading and trailing spaces and tabs (HTTP optional whitespace).
std::string_view trim(std::string_view s);

// Paths served without the API key: /health, and /metrics only when
// `public_metrics` (--public-metrics). Static files are also public; the
// transport decides that after the API declined a path.
bool is_public_path(std::string_view path, bool public_metrics = false);

// True when `key` is empty (no auth) or the headers (lower-case names) carry
// `Authorization: Bearer <key>` (scheme case-insensitive).
bool bearer_authorized(const std::map<std::string, std::string>& headers, const std::string& key);

// A WebSocket upgrade's authorisation: `ok`, and the subprotocol to echo in
// the handshake answer (the offered `bearer.<key>` token; empty: none).
struct WsAuth {
  bool ok = false;
  std::string subprotocol;
};
// `protocols`: the Sec-WebSocket-Protocol header (comma-separated tokens).
WsAuth ws_authorize(const std::string& key, std::string_view protocols,
                    const std::map<std::string, std::string>& query);

// The Origin check for HTTP requests and WebSocket upgrades. An empty `origin` (non-browser
// client) is allowed. With a non-empty `allowed` list the origin must equal
// one entry (case-insensitive, trailing '/' ignored) or the list holds "*".
// With an empty list the origin's host:port must equal the Host header's
// (a missing port means the scheme's default: 80 for http/ws, 443 for https/wss).
bool origin_allowed(std::string_view origin, std::string_view host,
                    const std::vector<std::string>& allowed);

// Equal contents: compares SHA-256(a) with SHA-256(b) (32 bytes each, every
// byte, no early exit). The time depends on the lengths only through the
// hashing of each input, not on where or whether they differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace pagoda::net
