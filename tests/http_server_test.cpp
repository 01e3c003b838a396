// The Beast transport (net/http_server.*, http_session.*, ws_session.*)
// driven over loopback by a real Beast client, with a fake HttpHandler and a
// fake WebSocket handler (no engine): keep-alive, 404/413/401 error JSON,
// static files, SSE order and [DONE], disconnect = on_close, slow consumers
// (HTTP and WebSocket), WebSocket echo/binary/oversize/Origin/API key,
// max_connections, header timeout, graceful stop.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "net/http_server.hpp"
#include "tests/http_client_util.hpp"

namespace pagoda::net {
namespace {

using namespace std::chrono_literals;
using namespace pagoda::testing;

// What the fake handlers observed; waited on by the tests.
struct Observed {
  std::mutex mu;
  std::condition_variable cv;
  int http_closed = 0, ws_closed = 0, too_big = 0;
  bool flood_refused = false;
  size_t flood_accepted = 0;
  std::vector<std::thread> threads;

  void update(const std::function<void()>& fn) {
    {
      std::lock_guard<std::mutex> lock(mu);
      fn();
    }
    cv.notify_all();
  }
  bool wait(const std::function<bool()>& pred, std::chrono::milliseconds limit = 5s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, limit, pred);
  }
  void spawn(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu);
    threads.emplace_back(std::move(fn));
  }
};

class FakeApi : public HttpHandler {
 public:
  explicit FakeApi(Observed* seen) : seen_(seen) {}
  bool handle(const HttpRequest& req, std::shared_ptr<Responder> res) override {
    if (req.path == "/health") {
      res->respond(200, "text/plain", "ok");
    } else if (req.path == "/echo") {
      res->respond(200, "text/plain", req.method + " " + req.path + " " + req.body);
    } else if (req.path == "/sse") {
      const int n = std::stoi(req.query.count("n") ? req.query.at("n") : "3");
      seen_->spawn([res, n] {  // events come from another thread, as engine sinks do
        res->start_stream();
        for (int i = 0; i < n; ++i) res->send_event("{\"i\":" + std::to_string(i) + "}");
        res->send_event("[DONE]");
        res->end_stream();
      });
    } else if (req.path == "/hold") {
      res->start_stream();
      res->send_event("first");
      res->on_close([seen = seen_] { seen->update([seen] { ++seen->http_closed; }); });
    } else if (req.path == "/flood") {
      res->start_stream();
      res->on_close([seen = seen_] { seen->update([seen] { ++seen->http_closed; }); });
      seen_->spawn([res, seen = seen_] {
        const std::string event(16 * 1024, 'x');
        size_t accepted = 0;
        for (int i = 0; i < 100000 && res->send_event(event); ++i) accepted += event.size();
        seen->update([&] {
          seen->flood_refused = true;
          seen->flood_accepted = accepted;
        });
      });
    } else {
      return false;
    }
    return true;
  }

 private:
  Observed* seen_;
};

class EchoWs : public WsHandler {
 public:
  EchoWs(std::shared_ptr<WsChannel> channel, Observed* seen) : channel_(std::move(channel)), seen_(seen) {}
  void on_text(std::string_view frame) override {
    if (frame == "flood") {
      while (channel_->send_text(std::string(16 * 1024, 'x'))) {
      }
      return;
    }
    channel_->send_text("echo:" + std::string(frame));
  }
  void on_binary(size_t size) override { channel_->send_text("binary:" + std::to_string(size)); }
  void on_too_big() override { seen_->update([s = seen_] { ++s->too_big; }); }
  void on_closed() override { seen_->update([s = seen_] { ++s->ws_closed; }); }

 private:
  std::shared_ptr<WsChannel> channel_;
  Observed* seen_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = std::make_shared<ServerContext>();
    ctx_->options.port = 0;
    ctx_->options.io_threads = 2;
  }
  void TearDown() override {
    if (server_) server_->stop();
    for (auto& t : seen_.threads) t.join();
    std::error_code ec;
    if (!web_root_.empty()) std::filesystem::remove_all(web_root_.parent_path(), ec);
  }
  void start() {
    auto api = std::make_shared<FakeApi>(&seen_);
    auto factory = [this](std::shared_ptr<WsChannel> ch) { return std::make_unique<EchoWs>(std::move(ch), &seen_); };
    auto server = HttpServer::start(ctx_, api, factory);
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(*server);
    port_ = server_->port();
    ASSERT_NE(port_, 0);
  }
  static bool is_error_json(const Response& res, const std::string& type) {
    const std::string& b = res.body();
    return b.rfind("{\"error\":{\"message\":", 0) == 0 && b.find("\"type\":\"" + type + "\"") != std::string::npos &&
           b.find("\"param\":null") != std::string::npos && b.find("\"code\":") != std::string::npos &&
           res[http::field::content_type] == "application/json";
  }

  std::shared_ptr<ServerContext> ctx_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
  Observed seen_;
  std::filesystem::path web_root_;
};

TEST_F(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  start();
  HttpClient c(port_);
  ASSERT_TRUE(c.connected());
  Response a = c.request(http::verb::post, "/echo", "one");
  EXPECT_EQ(a.result_int(), 200);
  EXPECT_EQ(a.body(), "POST /echo one");
  EXPECT_TRUE(a.keep_alive());
  Response b = c.request(http::verb::get, "/echo?x=1");
  EXPECT_EQ(b.result_int(), 200) << c.last_error().message();
  EXPECT_EQ(b.body(), "GET /echo ");
  EXPECT_EQ(ctx_->http_requests.load(), 2u);
}

TEST_F(HttpServerTest, UnknownPathIs404Json) {
  start();
  HttpClient c(port_);
  Response r = c.request(http::verb::get, "/nope");
  EXPECT_EQ(r.result_int(), 404);
  EXPECT_TRUE(is_error_json(r, "not_found_error")) << r.body();
}

TEST_F(HttpServerTest, BodyOverLimitIs413AndCloses) {
  ctx_->options.max_body_bytes = 1024;
  start();
  HttpClient c(port_);
  Response ok = c.request(http::verb::post, "/echo", std::string(1024, 'a'));
  EXPECT_EQ(ok.result_int(), 200);
  Response r = c.request(http::verb::post, "/echo", std::string(200 * 1024, 'b'));
  EXPECT_EQ(r.result_int(), 413) << c.last_error().message();
  EXPECT_TRUE(is_error_json(r, "request_too_large")) << r.body();
  EXPECT_FALSE(r.keep_alive());
  EXPECT_EQ(c.read_until_closed(5000ms), asio::error::eof);
}

TEST_F(HttpServerTest, ApiKeyGuardsApiPathsButNotHealth) {
  ctx_->options.api_key = "sekrit";
  start();
  HttpClient c(port_);
  Response none = c.request(http::verb::get, "/echo");
  EXPECT_EQ(none.result_int(), 401);
  EXPECT_TRUE(is_error_json(none, "authentication_error")) << none.body();
  HttpClient c2(port_);
  Response wrong = c2.request(http::verb::get, "/echo", "", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong.result_int(), 401);
  HttpClient c3(port_);
  Response good = c3.request(http::verb::get, "/echo", "", {{"Authorization", "Bearer sekrit"}});
  EXPECT_EQ(good.result_int(), 200);
  Response health = c3.request(http::verb::get, "/health");
  EXPECT_EQ(health.result_int(), 200);
}

// The memory attack: an endless chunk-size line. The transport must
// answer 431 and close after a small fixed bound (kMaxUnparsed), however many
// bytes the peer is still sending.
TEST_F(HttpServerTest, EndlessChunkSizeLineIsCutAt431) {
  start();
  HttpClient c(port_);
  ASSERT_FALSE(c.send_raw("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n1;"));
  // 64 KiB of line: an unbounded parser would wait for the line's end (and
  // the read below would time out); the bounded one answers after 32 KiB.
  ASSERT_FALSE(c.send_raw(std::string(64 * 1024, 'a')));
  Response r;
  EXPECT_FALSE(c.read(r, std::chrono::seconds(5)));
  EXPECT_EQ(r.result_int(), 431);
  EXPECT_TRUE(is_error_json(r, "invalid_request_error")) << r.body();
  EXPECT_NE(r.body().find("header_too_large"), std::string::npos);
  EXPECT_FALSE(r.keep_alive());
}

TEST_F(HttpServerTest, SmugglingHostAndContentTypeAreRefused) {
  start();
  auto raw = [&](const std::string& bytes) {
    HttpClient c(port_);
    EXPECT_FALSE(c.send_raw(bytes));
    Response r;
    c.read(r);
    return r;
  };
  Response te = raw("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Transfer-Encoding: gzip\r\n\r\nGET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(te.result_int(), 400);
  EXPECT_NE(te.body().find("bad_transfer_encoding"), std::string::npos) << te.body();
  EXPECT_FALSE(te.keep_alive());
  Response both = raw("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(both.result_int(), 400);
  Response host = raw("GET /echo HTTP/1.1\r\nHost: evil.example\r\n\r\n");
  EXPECT_EQ(host.result_int(), 403);
  EXPECT_NE(host.body().find("host_not_allowed"), std::string::npos);
  HttpClient c(port_);
  Response text = c.request(http::verb::post, "/echo", "{}", {{"Content-Type", "text/plain"}});
  EXPECT_EQ(text.result_int(), 415);
  Response origin = c.request(http::verb::get, "/echo", "", {{"Origin", "http://evil.example"}});
  EXPECT_EQ(origin.result_int(), 403);
  Response pre = c.request(http::verb::options, "/echo", "", {{"Origin", "http://127.0.0.1"}});
  EXPECT_EQ(pre.result_int(), 204);
  EXPECT_EQ(pre[http::field::allow], "GET, HEAD, POST, OPTIONS");
  EXPECT_EQ(pre["X-Content-Type-Options"], "nosniff");
  // Dispatched: host, text, origin, pre; the refused framings and the smuggled GET never were.
  EXPECT_EQ(ctx_->http_requests.load(), 4u);
}

TEST_F(HttpServerTest, StaticFilesWithTypesCachingAndNoTraversal) {
  const auto base = std::filesystem::temp_directory_path() / ("pagoda_web_" + std::to_string(::getpid()));
  web_root_ = base / "web";
  std::filesystem::create_directories(web_root_);
  std::ofstream(web_root_ / "index.html") << "<html>hi</html>";
  std::ofstream(web_root_ / "app.js") << "console.log(1);";
  std::ofstream(web_root_ / "style.css") << "body{}";
  std::ofstream(base / "secret.txt") << "TOPSECRET";
  ctx_->options.web_root = web_root_.string();
  ctx_->options.api_key = "k";  // static files need no key
  start();
  HttpClient c(port_);
  Response index = c.request(http::verb::get, "/");
  EXPECT_EQ(index.result_int(), 200);
  EXPECT_EQ(index.body(), "<html>hi</html>");
  EXPECT_EQ(index[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_EQ(index[http::field::cache_control], "no-cache");
  Response js = c.request(http::verb::get, "/app.js");
  EXPECT_EQ(js.body(), "console.log(1);");
  EXPECT_EQ(js[http::field::content_type], "text/javascript; charset=utf-8");
  EXPECT_EQ(js[http::field::cache_control], "max-age=3600");
  Response css = c.request(http::verb::get, "/style.css");
  EXPECT_EQ(css[http::field::content_type], "text/css; charset=utf-8");
  for (const char* evil : {"/../secret.txt", "/%2e%2e/secret.txt", "/a/../../secret.txt", "/..%2fsecret.txt"}) {
    HttpClient e(port_);
    Response r = e.request(http::verb::get, evil);
    EXPECT_NE(r.result_int(), 200) << evil;
    EXPECT_EQ(r.body().find("TOPSECRET"), std::string::npos) << evil;
  }
  HttpClient h(port_);
  http::request<http::string_body> head{http::verb::head, "/app.js", 11};
  head.set(http::field::host, "127.0.0.1");
  ASSERT_FALSE(h.send(head));
  http::response_parser<http::string_body> p;
  p.skip(true);  // a HEAD answer has no body
  ASSERT_FALSE(h.read_header(p));
  EXPECT_EQ(p.get().result_int(), 200);
  EXPECT_EQ(p.get()[http::field::content_length], "15");
}

TEST_F(HttpServerTest, SseEventsArriveInOrderEndingWithDone) {
  start();
  HttpClient c(port_);
  Response r = c.request(http::verb::get, "/sse?n=5");
  ASSERT_EQ(r.result_int(), 200) << c.last_error().message();
  EXPECT_EQ(r[http::field::content_type], "text/event-stream");
  EXPECT_EQ(r[http::field::cache_control], "no-cache");
  EXPECT_TRUE(r.chunked());
  std::string want;
  for (int i = 0; i < 5; ++i) want += "data: {\"i\":" + std::to_string(i) + "}\n\n";
  want += "data: [DONE]\n\n";
  EXPECT_EQ(r.body(), want);
  Response again = c.request(http::verb::get, "/echo");  // keep-alive after a stream
  EXPECT_EQ(again.result_int(), 200);
}

TEST_F(HttpServerTest, PipelinedRequestWaitsForTheStreamBeforeIt) {
  start();
  HttpClient c(port_);
  ASSERT_FALSE(c.send_raw("GET /sse?n=2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                          "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\nabc"));
  Response first, second;
  ASSERT_FALSE(c.read(first));
  EXPECT_EQ(first.body(), "data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: [DONE]\n\n");
  ASSERT_FALSE(c.read(second));
  EXPECT_EQ(second.body(), "POST /echo abc");
}

TEST_F(HttpServerTest, ClientLeavingMidStreamRunsOnClose) {
  start();
  HttpClient c(port_);
  http::request<http::string_body> req{http::verb::get, "/hold", 11};
  req.set(http::field::host, "127.0.0.1");
  ASSERT_FALSE(c.send(req));
  http::response_parser<http::string_body> p;
  ASSERT_FALSE(c.read_header(p));
  EXPECT_FALSE(seen_.wait([&] { return seen_.http_closed > 0; }, 100ms));
  c.close();
  EXPECT_TRUE(seen_.wait([&] { return seen_.http_closed == 1; }, 3s));
}

TEST_F(HttpServerTest, SlowHttpConsumerIsDisconnectedWithBoundedMemory) {
  ctx_->options.max_queued_bytes = 256 * 1024;
  start();
  HttpClient c(port_);
  http::request<http::string_body> req{http::verb::get, "/flood", 11};
  req.set(http::field::host, "127.0.0.1");
  ASSERT_FALSE(c.send(req));  // and never read
  ASSERT_TRUE(seen_.wait([&] { return seen_.flood_refused && seen_.http_closed == 1; }, 20s));
  // Accepted = what the kernel's socket buffers took + at most the queue limit.
  EXPECT_LT(seen_.flood_accepted, size_t(64) << 20);
}

TEST_F(HttpServerTest, WebSocketEchoBinaryAndClose) {
  start();
  WsClient ws(port_);
  ASSERT_FALSE(ws.connect("/v1/ws"));
  ASSERT_FALSE(ws.write("hello"));
  std::string got;
  ASSERT_FALSE(ws.read(got));
  EXPECT_EQ(got, "echo:hello");
  ASSERT_FALSE(ws.write(std::string(5, '\0'), false));
  ASSERT_FALSE(ws.read(got));
  EXPECT_EQ(got, "binary:5");
  ASSERT_FALSE(ws.close());
  EXPECT_TRUE(seen_.wait([&] { return seen_.ws_closed == 1; }));
}

TEST_F(HttpServerTest, WebSocketOversizeMessageCloses1009) {
  ctx_->options.max_frame_bytes = 1024;
  start();
  WsClient ws(port_);
  ASSERT_FALSE(ws.connect("/v1/ws"));
  ASSERT_FALSE(ws.write(std::string(4096, 'a')));
  std::string got;
  // The server fails the connection: the client gets the 1009 close frame,
  // and its read ends with `closed` or a socket error (its close reply may
  // find the socket already gone).
  EXPECT_TRUE(ws.read(got));
  EXPECT_EQ(ws.reason().code, 1009);
  EXPECT_TRUE(seen_.wait([&] { return seen_.too_big == 1 && seen_.ws_closed == 1; }));
}

TEST_F(HttpServerTest, WebSocketOversizeMessageIsDrainedBeforeAnOrderlyClose) {
  // A message far over the limit: the server must read past the rest of it
  // rather than close with it unread (a TCP reset, which can destroy the 1009
  // close frame before the client reads it), so the client's write completes
  // and its read ends with a clean `closed` carrying 1009.
  ctx_->options.max_frame_bytes = 1024;
  start();
  WsClient ws(port_);
  ASSERT_FALSE(ws.connect("/v1/ws"));
  EXPECT_FALSE(ws.write(std::string(8 << 20, 'a')));
  std::string got;
  EXPECT_EQ(ws.read(got), boost::beast::websocket::error::closed);
  EXPECT_EQ(ws.reason().code, 1009);
  EXPECT_TRUE(seen_.wait([&] { return seen_.too_big == 1 && seen_.ws_closed == 1; }));
}

TEST_F(HttpServerTest, SlowWebSocketConsumerIsClosed1008) {
  ctx_->options.max_queued_bytes = 256 * 1024;
  start();
  WsClient ws(port_);
  ASSERT_FALSE(ws.connect("/v1/ws"));
  ASSERT_FALSE(ws.write("flood"));
  std::string got;
  error_code ec;
  for (int i = 0; i < 1000 && !ec; ++i) ec = ws.read(got);
  EXPECT_EQ(ec, websocket::error::closed);
  EXPECT_EQ(ws.reason().code, 1008);
  EXPECT_TRUE(seen_.wait([&] { return seen_.ws_closed == 1; }));
}

TEST_F(HttpServerTest, WebSocketOriginChecks) {
  start();
  WsClient evil(port_);
  EXPECT_TRUE(evil.connect("/v1/ws", {{"Origin", "http://evil.example"}}));
  EXPECT_EQ(evil.response().result_int(), 403);
  WsClient same(port_);
  EXPECT_FALSE(same.connect("/v1/ws", {{"Origin", "http://127.0.0.1:" + std::to_string(port_)}}));
  WsClient other_port(port_);
  EXPECT_TRUE(other_port.connect("/v1/ws", {{"Origin", "http://127.0.0.1:1"}}));
  EXPECT_EQ(other_port.response().result_int(), 403);
}

TEST_F(HttpServerTest, WebSocketAllowListAndApiKey) {
  ctx_->options.allowed_origins = {"https://ui.example"};
  ctx_->options.api_key = "sekrit";
  start();
  WsClient listed(port_);
  EXPECT_FALSE(listed.connect("/v1/ws?api_key=sekrit", {{"Origin", "https://ui.example"}}));
  WsClient unlisted(port_);
  EXPECT_TRUE(unlisted.connect("/v1/ws?api_key=sekrit", {{"Origin", "http://127.0.0.1:" + std::to_string(port_)}}));
  EXPECT_EQ(unlisted.response().result_int(), 403);
  WsClient no_key(port_);
  EXPECT_TRUE(no_key.connect("/v1/ws"));
  EXPECT_EQ(no_key.response().result_int(), 401);
  WsClient proto(port_);
  ASSERT_FALSE(proto.connect("/v1/ws", {{"Sec-WebSocket-Protocol", "pagoda.v1, bearer.sekrit"}}));
  EXPECT_EQ(proto.response()[http::field::sec_websocket_protocol], "bearer.sekrit");
  ASSERT_FALSE(proto.write("x"));
  std::string got;
  ASSERT_FALSE(proto.read(got));
  EXPECT_EQ(got, "echo:x");
}

TEST_F(HttpServerTest, MaxConnectionsAnswers503) {
  ctx_->options.max_connections = 1;
  start();
  auto first = std::make_unique<HttpClient>(port_);
  EXPECT_EQ(first->request(http::verb::get, "/echo").result_int(), 200);
  HttpClient second(port_);
  Response r = second.request(http::verb::get, "/echo");
  EXPECT_EQ(r.result_int(), 503);
  EXPECT_TRUE(is_error_json(r, "server_error")) << r.body();
  first->close();
  first.reset();
  for (int i = 0; i < 100 && ctx_->connections.load() > 0; ++i) std::this_thread::sleep_for(20ms);
  HttpClient third(port_);
  EXPECT_EQ(third.request(http::verb::get, "/echo").result_int(), 200);
}

TEST_F(HttpServerTest, SlowRequestHeadersTimeOut) {
  ctx_->options.header_timeout = 1s;
  start();
  HttpClient c(port_);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(c.send_raw("GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n"));  // never finished
  EXPECT_TRUE(c.read_until_closed(5000ms));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 900ms);
  EXPECT_LT(waited, 4s);
}

TEST_F(HttpServerTest, StopClosesOpenStreamsAndRunsOnClose) {
  start();
  HttpClient c(port_);
  http::request<http::string_body> req{http::verb::get, "/hold", 11};
  req.set(http::field::host, "127.0.0.1");
  ASSERT_FALSE(c.send(req));
  http::response_parser<http::string_body> p;
  ASSERT_FALSE(c.read_header(p));
  WsClient ws(port_);
  ASSERT_FALSE(ws.connect("/v1/ws"));
  const auto t0 = std::chrono::steady_clock::now();
  server_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_TRUE(seen_.wait([&] { return seen_.http_closed == 1 && seen_.ws_closed == 1; }, 100ms));
  EXPECT_TRUE(c.read_until_closed(2000ms));
  HttpClient late(port_);
  EXPECT_FALSE(late.connected() && late.request(http::verb::get, "/echo").result_int() == 200);
}

}  // namespace
}  // namespace pagoda::net
