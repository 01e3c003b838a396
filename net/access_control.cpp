#include "net/access_control.hpp"

#include <algorithm>
#include <cctype>

#include "net/sha256.hpp"

namespace pagoda::net {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

namespace {

// "host[:port]" -> lower-case "host:port", the port defaulting to `port`.
// IPv6 literals keep their brackets: "[::1]:8000".
std::string host_port(std::string_view hp, std::string_view default_port) {
  std::string h = lower(trim(hp));
  const size_t bracket = h.rfind(']');
  const size_t colon = h.rfind(':');
  const bool has_port = colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
  if (!has_port) return h + ":" + std::string(default_port);
  return h;
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  const Sha256Digest da = sha256(a), db = sha256(b);
  volatile unsigned char diff = 0;  // volatile: no early exit may be compiled in
  for (size_t i = 0; i < da.size(); ++i) diff = diff | static_cast<unsigned char>(da[i] ^ db[i]);
  return diff == 0;
}

bool is_public_path(std::string_view path, bool public_metrics) {
  return path == "/health" || (public_metrics && path == "/metrics");
}

bool bearer_authorized(const std::map<std::string, std::string>& headers, const std::string& key) {
  if (key.empty()) return true;
  auto it = headers.find("authorization");
  if (it == headers.end()) return false;
  std::string_view v = trim(it->second);
  if (v.size() < 7 || lower(v.substr(0, 7)) != "bearer ") return false;
  return constant_time_equal(trim(v.substr(7)), key);
}

WsAuth ws_authorize(const std::string& key, std::string_view protocols,
                    const std::map<std::string, std::string>& query) {
  WsAuth out;
  if (key.empty()) {
    out.ok = true;
    return out;
  }
  while (!protocols.empty()) {
    const size_t comma = protocols.find(',');
    std::string_view token = trim(protocols.substr(0, comma));
    protocols = comma == std::string_view::npos ? std::string_view() : protocols.substr(comma + 1);
    if (token.size() > 7 && lower(token.substr(0, 7)) == "bearer." &&
        constant_time_equal(token.substr(7), key)) {
      out.ok = true;
      out.subprotocol = std::string(token);
      return out;
    }
  }
  auto it = query.find("api_key");
  out.ok = it != query.end() && constant_time_equal(it->second, key);
  return out;
}

bool origin_allowed(std::string_view origin, std::string_view host,
                    const std::vector<std::string>& allowed) {
  origin = trim(origin);
  if (origin.empty()) return true;
  std::string o = lower(origin);
  while (!o.empty() && o.back() == '/') o.pop_back();
  if (!allowed.empty()) {
    return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
      std::string x = lower(trim(a));
      while (!x.empty() && x.back() == '/') x.pop_back();
      return x == "*" || x == o;
    });
  }
  const size_t sep = o.find("://");
  if (sep == std::string::npos || host.empty()) return false;
  const std::string scheme = o.substr(0, sep);
  const std::string_view port = (scheme == "https" || scheme == "wss") ? "443" : "80";
  std::string_view rest = std::string_view(o).substr(sep + 3);
  if (rest.find('/') != std::string_view::npos) return false;  // an Origin has no path
  return host_port(rest, port) == host_port(host, port);
}

}  // namespace pagoda::net
