// The transport's pure rules (no sockets): Origin allow-list and same-host
// checks, API key extraction (HTTP bearer, WebSocket subprotocol / query),
// request-target decoding, SSE chunk framing, static-file content types and
// traversal, the admission rules (framing, Host, Origin, Content-Type, CORS),
// SHA-256 and the per-client request limits.
// Expected values are written from RFC 6455 / RFC 9112 / the WHATWG SSE
// format by hand, not recorded from the code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "net/access_control.hpp"
#include "net/client_limits.hpp"
#include "net/request_policy.hpp"
#include "net/sha256.hpp"
#include "net/http_target.hpp"
#include "net/session_responder.hpp"
#include "net/static_files.hpp"

namespace pagoda::net {
namespace {

TEST(OriginAllowed, SameHostByDefault) {
  EXPECT_TRUE(origin_allowed("", "127.0.0.1:8000", {}));  // non-browser client
  EXPECT_TRUE(origin_allowed("http://127.0.0.1:8000", "127.0.0.1:8000", {}));
  EXPECT_TRUE(origin_allowed("http://LOCALHOST:8000", "localhost:8000", {}));
  EXPECT_TRUE(origin_allowed("http://example.com", "example.com:80", {}));
  EXPECT_TRUE(origin_allowed("https://example.com", "example.com", {}));
  EXPECT_TRUE(origin_allowed("http://[::1]:8000", "[::1]:8000", {}));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1:8001", "127.0.0.1:8000", {}));
  EXPECT_FALSE(origin_allowed("http://evil.example", "127.0.0.1:8000", {}));
  EXPECT_FALSE(origin_allowed("https://example.com", "example.com:80", {}));
  EXPECT_FALSE(origin_allowed("null", "127.0.0.1:8000", {}));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1:8000", "", {}));
}

TEST(OriginAllowed, ExplicitList) {
  const std::vector<std::string> list = {"https://ui.example/", "http://localhost:3000"};
  EXPECT_TRUE(origin_allowed("https://UI.example", "127.0.0.1:8000", list));
  EXPECT_TRUE(origin_allowed("http://localhost:3000", "127.0.0.1:8000", list));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1:8000", "127.0.0.1:8000", list));
  EXPECT_TRUE(origin_allowed("http://anything", "x", {"*"}));
}

TEST(ApiKey, BearerHeader) {
  EXPECT_TRUE(bearer_authorized({}, ""));
  EXPECT_FALSE(bearer_authorized({}, "k1"));
  EXPECT_TRUE(bearer_authorized({{"authorization", "Bearer k1"}}, "k1"));
  EXPECT_TRUE(bearer_authorized({{"authorization", "bearer  k1 "}}, "k1"));
  EXPECT_FALSE(bearer_authorized({{"authorization", "Bearer k12"}}, "k1"));
  EXPECT_FALSE(bearer_authorized({{"authorization", "Basic k1"}}, "k1"));
  EXPECT_TRUE(is_public_path("/health"));
  EXPECT_FALSE(is_public_path("/metrics"));  // needs the key unless --public-metrics
  EXPECT_TRUE(is_public_path("/metrics", true));
  EXPECT_FALSE(is_public_path("/v1/models"));
  EXPECT_FALSE(is_public_path("/v1/models", true));
  // Same-length and different-length wrong keys are both refused; a prefix is not a match.
  EXPECT_FALSE(bearer_authorized({{"authorization", "Bearer k2"}}, "k1"));
  EXPECT_FALSE(bearer_authorized({{"authorization", "Bearer k"}}, "k1"));
  EXPECT_FALSE(bearer_authorized({{"authorization", "Bearer "}}, "k1"));
}

TEST(ApiKey, WebSocketSubprotocolOrQuery) {
  WsAuth a = ws_authorize("k1", "pagoda.v1, bearer.k1", {});
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.subprotocol, "bearer.k1");
  EXPECT_FALSE(ws_authorize("k1", "bearer.k2", {}).ok);
  WsAuth q = ws_authorize("k1", "", {{"api_key", "k1"}});
  EXPECT_TRUE(q.ok);
  EXPECT_EQ(q.subprotocol, "");
  EXPECT_FALSE(ws_authorize("k1", "", {{"api_key", "k"}}).ok);
  EXPECT_TRUE(ws_authorize("", "", {}).ok);
}

TEST(Target, DecodesPathAndQuery) {
  std::optional<Target> t = parse_target("/a%20b/c?x=1&y=hello+world%21&flag&x=2");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->path, "/a b/c");
  EXPECT_EQ(t->query.at("x"), "2");
  EXPECT_EQ(t->query.at("y"), "hello world!");
  EXPECT_EQ(t->query.at("flag"), "");
  EXPECT_FALSE(parse_target("/bad%2"));
  EXPECT_FALSE(parse_target("/bad%zz"));
  EXPECT_EQ(parse_target("/%2e%2e/x")->path, "/../x");
}

TEST(Sse, ChunkFraming) {
  // 0x0d = 13 bytes: "data: hello\n\n".
  EXPECT_EQ(sse_chunk("hello"), "d\r\ndata: hello\n\n\r\n");
  // A payload with a newline becomes two data lines of one event (17 = 0x11 bytes).
  EXPECT_EQ(sse_chunk("a\nb"), "11\r\ndata: a\ndata: b\n\n\r\n");
}

TEST(StaticFiles, ContentTypes) {
  EXPECT_EQ(content_type_for("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_for("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_for("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(content_type_for("a.json"), "application/json");
  EXPECT_EQ(content_type_for("a.svg"), "image/svg+xml");
  EXPECT_EQ(content_type_for("a.png"), "image/png");
  EXPECT_EQ(content_type_for("favicon.ico"), "image/x-icon");
  EXPECT_EQ(content_type_for("a.txt"), "text/plain; charset=utf-8");
  EXPECT_EQ(content_type_for("a.bin"), "application/octet-stream");
  EXPECT_FALSE(load_static_file("/nonexistent-root", "GET", "/"));
  EXPECT_FALSE(load_static_file("/etc", "POST", "/hostname"));
  EXPECT_FALSE(load_static_file("/etc", "GET", "/../etc/hostname"));
}

std::string hex(const Sha256Digest& d) {
  std::string out;
  char buf[3];
  for (uint8_t b : d) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    out += buf;
  }
  return out;
}

TEST(Sha256, FipsVectors) {
  // FIPS 180-2 appendix B examples and the empty string.
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_TRUE(constant_time_equal("key", "key"));
  EXPECT_FALSE(constant_time_equal("key", "kez"));
  EXPECT_FALSE(constant_time_equal("key", "key0"));
  EXPECT_FALSE(constant_time_equal("", "k"));
}

TEST(Framing, SmugglingShapesAreRefused) {
  EXPECT_FALSE(framing_refusal({{"Host", "x"}, {"Content-Length", "5"}}));
  EXPECT_FALSE(framing_refusal({{"Transfer-Encoding", "chunked"}}));
  EXPECT_FALSE(framing_refusal({{"transfer-encoding", " Chunked "}}));
  EXPECT_TRUE(framing_refusal({{"Transfer-Encoding", "gzip"}}));
  EXPECT_TRUE(framing_refusal({{"Transfer-Encoding", "gzip, chunked"}}));
  EXPECT_TRUE(framing_refusal({{"Transfer-Encoding", "chunked, chunked"}}));
  EXPECT_TRUE(framing_refusal({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}}));
  EXPECT_TRUE(framing_refusal({{"Transfer-Encoding", "chunked"}, {"Content-Length", "5"}}));
  EXPECT_TRUE(framing_refusal({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}}));
  EXPECT_EQ(framing_refusal({{"Transfer-Encoding", "identity"}})->status, 400);
}

TEST(HostCheck, ServedNamesOnly) {
  ServerOptions o;  // host 127.0.0.1
  EXPECT_EQ(host_name("LocalHost:8000"), "localhost");
  EXPECT_EQ(host_name("[::1]:80"), "[::1]");
  EXPECT_EQ(host_name("example.com."), "example.com");
  EXPECT_TRUE(host_allowed("localhost:8000", o));
  EXPECT_TRUE(host_allowed("127.0.0.1:8000", o));
  EXPECT_TRUE(host_allowed("[::1]:8000", o));
  EXPECT_TRUE(host_allowed("10.1.2.3", o));  // an IP literal cannot be rebound
  EXPECT_FALSE(host_allowed("evil.example:8000", o));
  EXPECT_FALSE(host_allowed("127.0.0.1.evil.example", o));
  EXPECT_FALSE(host_allowed("1.2.3.4.5", o));
  EXPECT_FALSE(host_allowed("256.1.1.1", o));
  EXPECT_FALSE(host_allowed("", o));
  o.host = "my-box.lan";
  EXPECT_TRUE(host_allowed("MY-BOX.lan:8000", o));
  o.allowed_hosts = {"api.example"};
  EXPECT_TRUE(host_allowed("api.example", o));
  EXPECT_FALSE(host_allowed("other.example", o));
  o.allowed_hosts = {"*"};
  EXPECT_TRUE(host_allowed("other.example", o));
}

HttpRequest request_with(std::string method, std::map<std::string, std::string> headers) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = "/v1/completions";
  r.headers = std::move(headers);
  return r;
}

TEST(Admission, HostOriginAndContentType) {
  ServerOptions o;
  auto code = [&](const HttpRequest& r) {
    auto refusal = admission_refusal(r, o);
    return refusal ? refusal->code : std::string("ok");
  };
  const std::string json = "application/json";
  EXPECT_EQ(code(request_with("POST", {{"host", "127.0.0.1:8000"}, {"content-type", json}})), "ok");
  EXPECT_EQ(code(request_with("POST", {{"content-type", "Application/JSON; charset=utf-8"}})), "ok");
  // The attack: a "simple" cross-site POST with text/plain.
  EXPECT_EQ(code(request_with("POST", {{"host", "127.0.0.1:8000"}, {"content-type", "text/plain"},
                                       {"origin", "http://evil.example"}})),
            "origin_not_allowed");
  EXPECT_EQ(code(request_with("POST", {{"host", "127.0.0.1:8000"}, {"content-type", "text/plain"}})),
            "unsupported_media_type");
  EXPECT_EQ(code(request_with("POST", {{"host", "127.0.0.1:8000"}})), "unsupported_media_type");
  EXPECT_EQ(code(request_with("GET", {{"host", "127.0.0.1:8000"}})), "ok");
  // DNS rebinding: the attacker's name in Host, Origin equal to it.
  EXPECT_EQ(code(request_with("POST", {{"host", "evil.example:8000"}, {"origin", "http://evil.example:8000"},
                                       {"content-type", json}})),
            "host_not_allowed");
  EXPECT_EQ(admission_refusal(request_with("GET", {{"host", "evil.example"}}), o)->status, 403);
  EXPECT_EQ(code(request_with("GET", {{"host", "127.0.0.1:8000"}, {"origin", "http://127.0.0.1:8000"}})), "ok");
  o.allowed_origins = {"https://ui.example"};
  EXPECT_EQ(code(request_with("GET", {{"host", "127.0.0.1:8000"}, {"origin", "https://ui.example"}})), "ok");
  EXPECT_EQ(code(request_with("GET", {{"host", "127.0.0.1:8000"}, {"origin", "http://127.0.0.1:8000"}})),
            "origin_not_allowed");
}

std::string header_value(const HeaderList& h, std::string_view name) {
  for (const auto& [n, v] : h) {
    if (n == name) return v;
  }
  return "<absent>";
}

TEST(Cors, OnlyListedOriginsAndNeverStar) {
  ServerOptions o;
  HttpRequest same = request_with("GET", {{"host", "127.0.0.1:8000"}, {"origin", "http://127.0.0.1:8000"}});
  EXPECT_TRUE(cors_headers(same, o).empty());  // same origin: nothing to allow
  o.allowed_origins = {"https://ui.example"};
  HttpRequest listed = request_with("OPTIONS", {{"origin", "https://ui.example"},
                                                {"access-control-request-method", "POST"}});
  HeaderList h = cors_headers(listed, o);
  EXPECT_EQ(header_value(h, "Access-Control-Allow-Origin"), "https://ui.example");
  EXPECT_EQ(header_value(h, "Vary"), "Origin");
  EXPECT_EQ(header_value(h, "Access-Control-Allow-Credentials"), "<absent>");
  HeaderList pre = preflight_headers(listed, o);
  EXPECT_EQ(header_value(pre, "Access-Control-Allow-Headers"), "Authorization, Content-Type");
  EXPECT_EQ(header_value(pre, "Access-Control-Allow-Methods"), "GET, HEAD, POST");
  HttpRequest other = request_with("OPTIONS", {{"origin", "http://evil.example"}});
  EXPECT_EQ(header_value(cors_headers(other, o), "Access-Control-Allow-Origin"), "<absent>");
  EXPECT_EQ(header_value(preflight_headers(other, o), "Access-Control-Allow-Methods"), "<absent>");
  o.allowed_origins = {"*"};
  EXPECT_EQ(header_value(cors_headers(other, o), "Access-Control-Allow-Origin"), "http://evil.example");
}

TEST(StaticFiles, NoTraversalAndSecurityHeaders) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("pagoda-static-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base / "root" / "sub");
  std::ofstream(base / "root" / "index.html") << "<p>ui</p>";
  std::ofstream(base / "root" / "sub" / "a.js") << "1";
  std::ofstream(base / "secret.txt") << "secret";
  std::ofstream(base / "root" / ".hidden") << "h";
  fs::create_symlink(base / "secret.txt", base / "root" / "link.txt");
  fs::create_directory_symlink(base, base / "root" / "up");
  const std::string root = (base / "root").string();
  auto get = [&](std::string_view target) -> std::optional<StaticFile> {
    std::optional<Target> t = parse_target(target);
    if (!t) return std::nullopt;
    return load_static_file(root, "GET", t->path);
  };
  ASSERT_TRUE(get("/"));
  EXPECT_EQ(get("/")->body, "<p>ui</p>");
  ASSERT_TRUE(get("/sub/a.js"));
  for (const char* bad : {"/../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E%2Fsecret.txt", "/sub/..%2f..%2fsecret.txt",
                          "/..%5csecret.txt", "/sub\\..\\..\\secret.txt", "/%5c..%5csecret.txt", "/link.txt",
                          "/up/secret.txt", "/.hidden", "/%2ehidden", "/sub/%00a.js"}) {
    EXPECT_FALSE(get(bad)) << bad;
  }
  const StaticFile f = *get("/");
  EXPECT_NE(header_value(f.headers, "Content-Security-Policy").find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_NE(header_value(f.headers, "Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(header_value(f.headers, "Content-Security-Policy").find("unsafe-inline"), std::string::npos);
  EXPECT_EQ(header_value(f.headers, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(header_value(f.headers, "X-Frame-Options"), "DENY");
  fs::remove_all(base);
}

TEST(ClientLimits, CapPerClientReleasedWithTheTicket) {
  ClientLimits limits;
  auto a1 = limits.acquire("10.0.0.1", 2);
  auto a2 = limits.acquire("10.0.0.1", 2);
  ASSERT_TRUE(a1 && a2);
  EXPECT_FALSE(limits.acquire("10.0.0.1", 2));
  EXPECT_TRUE(limits.acquire("10.0.0.2", 2));  // another client is not affected
  EXPECT_EQ(limits.in_flight("10.0.0.1"), 2);
  auto copy = a1;
  a1.reset();
  EXPECT_FALSE(limits.acquire("10.0.0.1", 2));  // a copy still holds the slot
  copy.reset();
  EXPECT_TRUE(limits.acquire("10.0.0.1", 2));
  EXPECT_EQ(limits.in_flight("10.0.0.2"), 0);
  EXPECT_TRUE(limits.acquire("x", 0));  // 0: no cap
}

}  // namespace
}  // namespace pagoda::net
