// The transport's pure rules (no sockets): Origin allow-list and same-host
// checks, API key extraction (HTTP bearer, WebSocket subprotocol / query),
// request-target decoding, SSE chunk framing and static-file content types.
// Expected values are written from RFC 6455 / RFC 9112 / the WHATWG SSE
// format by hand, not recorded from the code.
#include <gtest/gtest.h>

#include "net/access_control.hpp"
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
  EXPECT_TRUE(is_public_path("/metrics"));
  EXPECT_FALSE(is_public_path("/v1/models"));
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

}  // namespace
}  // namespace pagoda::net
