// The transport's admission rules (net/request_policy.hpp).
#include "net/request_policy.hpp"

#include <algorithm>
#include <cctype>

#include "net/access_control.hpp"

namespace pagoda::net {
namespace {

std::string_view header(const HttpRequest& r, const char* name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string_view() : std::string_view(it->second);
}

bool has_header(const HttpRequest& r, const char* name) { return r.headers.contains(name); }

bool is_ipv4_literal(std::string_view s) {
  int parts = 0;
  while (true) {
    size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
    if (digits == 0 || digits > 3 || std::stoi(std::string(s.substr(0, digits))) > 255) return false;
    ++parts;
    s.remove_prefix(digits);
    if (s.empty()) return parts == 4;
    if (s.front() != '.' || parts == 4) return false;
    s.remove_prefix(1);
  }
}

bool is_ipv6_literal(std::string_view s) {
  if (s.size() < 4 || s.front() != '[' || s.back() != ']') return false;
  s = s.substr(1, s.size() - 2);
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
  }) && s.find(':') != std::string_view::npos;
}

bool origin_listed(std::string_view origin, const ServerOptions& o) {
  return !o.allowed_origins.empty() && !trim(origin).empty() && origin_allowed(origin, "", o.allowed_origins);
}

}  // namespace

std::optional<Refusal> framing_refusal(const HeaderList& fields) {
  int te = 0, cl = 0;
  std::string te_value;
  for (const auto& [name, value] : fields) {
    const std::string n = lower(name);
    if (n == "transfer-encoding") {
      ++te;
      te_value = lower(trim(value));
    } else if (n == "content-length") {
      ++cl;
    }
  }
  if (te == 0) return std::nullopt;
  if (te > 1 || te_value != "chunked") {
    return Refusal{400, "Transfer-Encoding must be exactly \"chunked\" (one field)", "bad_transfer_encoding"};
  }
  if (cl > 0) {
    return Refusal{400, "Transfer-Encoding and Content-Length must not both be sent", "bad_transfer_encoding"};
  }
  return std::nullopt;
}

std::string host_name(std::string_view host) {
  std::string h = lower(trim(host));
  const size_t bracket = h.rfind(']');
  const size_t colon = h.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) h.resize(colon);
  while (!h.empty() && h.back() == '.') h.pop_back();
  return h;
}

bool host_allowed(std::string_view host, const ServerOptions& options) {
  const std::string name = host_name(host);
  if (name.empty()) return false;
  if (name == "localhost" || is_ipv4_literal(name) || is_ipv6_literal(name)) return true;
  if (name == host_name(options.host)) return true;
  return std::any_of(options.allowed_hosts.begin(), options.allowed_hosts.end(), [&](const std::string& a) {
    return trim(a) == "*" || host_name(a) == name;
  });
}

std::optional<Refusal> admission_refusal(const HttpRequest& request, const ServerOptions& options) {
  if (has_header(request, "host") && !host_allowed(header(request, "host"), options)) {
    return Refusal{403, "Host '" + host_name(header(request, "host")).substr(0, 100) +
                            "' is not served here (use --allowed-host)", "host_not_allowed"};
  }
  if (has_header(request, "origin") &&
      !origin_allowed(header(request, "origin"), header(request, "host"), options.allowed_origins)) {
    return Refusal{403, "Origin not allowed (use --allowed-origin)", "origin_not_allowed"};
  }
  if (request.method == "POST") {
    std::string_view type = header(request, "content-type");
    type = trim(type.substr(0, type.find(';')));
    if (lower(type) != "application/json") {
      return Refusal{415, "the body must be JSON sent with Content-Type: application/json", "unsupported_media_type"};
    }
  }
  return std::nullopt;
}

HeaderList cors_headers(const HttpRequest& request, const ServerOptions& options) {
  HeaderList out;
  if (!options.allowed_origins.empty()) out.emplace_back("Vary", "Origin");
  const std::string_view origin = header(request, "origin");
  if (origin_listed(origin, options)) out.emplace_back("Access-Control-Allow-Origin", std::string(trim(origin)));
  return out;
}

HeaderList preflight_headers(const HttpRequest& request, const ServerOptions& options) {
  HeaderList out = cors_headers(request, options);
  out.emplace_back("Allow", "GET, HEAD, POST, OPTIONS");
  if (origin_listed(header(request, "origin"), options)) {
    out.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST");
    out.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
    out.emplace_back("Access-Control-Max-Age", "600");
  }
  return out;
}

}  // namespace pagoda::net
