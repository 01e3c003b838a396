// Fuzz target: HTTP request target and header handling. The input is fed to
// Beast's request parser with the limits the server uses (net/http_session:
// header_limit, body_limit), then the parsed target goes through
// net/http_target (parse_target, percent_decode) and the headers through
// net/access_control (bearer_authorized, ws_authorize, origin_allowed) and
// net/request_policy (framing_refusal, host_name / host_allowed,
// admission_refusal, cors_headers, preflight_headers) as net/http_session
// applies them. The first line alone is also parsed as a target, so that
// targets Beast would reject still reach parse_target.
// Invariants: decoding text that has no '%' is the identity; nothing
// crashes or hangs.
#include <boost/beast/http.hpp>

#include "fuzz_util.hpp"
#include "net/access_control.hpp"
#include "net/http_target.hpp"
#include "net/request_policy.hpp"

using namespace pagoda;
namespace http = boost::beast::http;

namespace {

void check_target(std::string_view target) {
  auto t = net::parse_target(target);
  if (t) {
    for (const auto& [k, v] : t->query) (void)net::percent_decode(k, true), (void)v;
  }
  auto d = net::percent_decode(target, false);
  if (d && d->find('%') == std::string::npos) {
    auto again = net::percent_decode(*d, false);
    FUZZ_CHECK(again && *again == *d, "decoding text without '%' is the identity");
  }
}

// The admission rules of net/request_policy on the parsed request.
void check_policy(const http::request<http::string_body>& req,
                  const std::map<std::string, std::string>& headers) {
  net::HeaderList fields;
  for (const auto& field : req) fields.emplace_back(field.name_string(), field.value());
  (void)net::framing_refusal(fields);
  net::HttpRequest r;
  r.method = std::string(req.method_string());
  if (auto t = net::parse_target(std::string_view(req.target().data(), req.target().size()))) {
    r.path = t->path;
    r.query = t->query;
  }
  r.headers = headers;
  r.body = req.body();
  static const net::ServerOptions open_options;
  static const net::ServerOptions strict_options = [] {
    net::ServerOptions o;
    o.host = "0.0.0.0";
    o.allowed_origins = {"http://localhost:8000", "https://example.com/"};
    return o;
  }();
  for (const net::ServerOptions* o : {&open_options, &strict_options}) {
    if (auto host = headers.find("host"); host != headers.end()) {
      (void)net::host_name(host->second);
      (void)net::host_allowed(host->second, *o);
    }
    auto refusal = net::admission_refusal(r, *o);
    if (refusal) FUZZ_CHECK(refusal->status >= 400 && refusal->status < 500, "a refusal is a 4xx");
    (void)net::cors_headers(r, *o);
    (void)net::preflight_headers(r, *o);
  }
}

void check_headers(const http::request<http::string_body>& req) {
  std::map<std::string, std::string> headers;
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    headers[name] = std::string(field.value());
  }
  check_policy(req, headers);
  (void)net::bearer_authorized(headers, "sk-fuzz-key");
  (void)net::bearer_authorized(headers, "");
  std::map<std::string, std::string> query;
  if (auto t = net::parse_target(std::string_view(req.target().data(), req.target().size()))) {
    query = t->query;
  }
  const std::string protocols = headers.count("sec-websocket-protocol")
                                    ? headers["sec-websocket-protocol"] : std::string();
  (void)net::ws_authorize("sk-fuzz-key", protocols, query);
  const std::string origin = headers.count("origin") ? headers["origin"] : std::string();
  const std::string host = headers.count("host") ? headers["host"] : std::string();
  (void)net::origin_allowed(origin, host, {});
  (void)net::origin_allowed(origin, host, {"http://localhost:8000", "https://example.com/"});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = fuzz::as_text(data, size);
  check_target(fuzz::split_once(in, "\n").first);
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < in.size() && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(in.data() + used, in.size() - used), ec);
    if (ec == http::error::need_more) break;
    if (ec) return 0;
    if (n == 0) break;
    used += n;
  }
  if (!parser.is_header_done()) return 0;
  const auto& req = parser.get();
  const std::string_view target(req.target().data(), req.target().size());
  check_target(target);
  check_headers(req);
  return 0;
}
