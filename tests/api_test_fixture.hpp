// The fixture the HTTP API handler tests share (openai_api_test,
// api_routes_test): a FakeResponder that records a whole answer or the SSE
// events (and can play a closing connection), one real engine per test
// binary (SmolLM2 GGUF, CPU, quantized precision, max_model_len 1024; the
// tests skip without the model) behind make_api_routes, and JSON helpers.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "formats_test_util.hpp"
#include "net/api_routes.hpp"
#include "server_engine_options.hpp"

namespace pagoda::net {

using namespace std::chrono_literals;

class FakeResponder : public Responder {
 public:
  void respond(int status, std::string content_type, std::string body, HeaderList extra) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    status_ = status;
    content_type_ = std::move(content_type);
    body_ = std::move(body);
    extra_ = std::move(extra);
    done_ = true;
    cv_.notify_all();
  }
  void start_stream(int status) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    streaming_ = true;
  }
  bool send_event(std::string data) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || done_) return false;
    events_.push_back(std::move(data));
    cv_.notify_all();
    return true;
  }
  void end_stream() override {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void on_close(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!closed_) {
      close_fns_.push_back(std::move(fn));
      return;
    }
    lock.unlock();
    fn();
  }
  bool closed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }
  // The peer goes away: runs the on_close callbacks (the transport's job).
  void close() {
    std::vector<std::function<void()>> fns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      fns.swap(close_fns_);
    }
    for (auto& fn : fns) fn();
  }
  bool wait_done(std::chrono::seconds timeout = 120s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done_; });
  }
  bool wait_events(size_t k, std::chrono::seconds timeout = 60s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return events_.size() >= k || done_; });
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  std::string content_type_, body_;
  HeaderList extra_;
  bool streaming_ = false, done_ = false, closed_ = false;
  std::vector<std::string> events_;
  std::vector<std::function<void()>> close_fns_;
};

struct Answer {
  int status = 0;
  std::string body, content_type;
  HeaderList extra;
  bool streaming = false;
  std::vector<std::string> events;
};

class ApiFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = test::real_model_path();
    if (path.empty()) return;
    actors::EngineOptions o = test::server_engine_options(path);
    o.max_model_len = 1024;
    auto engine = actors::Engine::start(o);
    ASSERT_TRUE(engine) << engine.error().message;
    context_ = std::make_shared<ServerContext>();
    context_->engine = std::shared_ptr<actors::Engine>(std::move(engine).value());
    context_->ready = true;
    routes_ = make_api_routes(context_);
  }
  static void TearDownTestSuite() {
    routes_.reset();
    context_.reset();
  }
  void SetUp() override {
    if (!context_) GTEST_SKIP() << "real model absent: set PAGODA_MODEL or run tools/fetch-model";
  }

  static Answer call(const std::string& method, const std::string& path, const std::string& body = "") {
    auto r = std::make_shared<FakeResponder>();
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.body = body;
    EXPECT_TRUE(routes_->handle(req, r)) << path;
    EXPECT_TRUE(r->wait_done()) << "no answer to " << path << " " << body;
    std::lock_guard<std::mutex> lock(r->mu_);
    return Answer{r->status_, r->body_, r->content_type_, r->extra_, r->streaming_, r->events_};
  }
  static Answer post(const std::string& path, const std::string& body) { return call("POST", path, body); }

  static inline std::shared_ptr<ServerContext> context_;
  static inline std::shared_ptr<HttpHandler> routes_;
};

// Parses JSON text (fails the test when it does not parse).
inline simdjson::dom::element parse(simdjson::dom::parser& p, const std::string& text) {
  simdjson::dom::element e;
  EXPECT_EQ(p.parse(text).get(e), simdjson::SUCCESS) << text;
  return e;
}

inline std::string str(simdjson::dom::element e) {
  std::string_view s;
  return e.get_string().get(s) == simdjson::SUCCESS ? std::string(s) : std::string("<not a string>");
}

inline int64_t num(simdjson::dom::element e) {
  int64_t v = -1;
  EXPECT_EQ(e.get_int64().get(v), simdjson::SUCCESS);
  return v;
}

// Waits until the engine holds no request and no KV block.
inline void expect_engine_idle(actors::EngineClient& engine) {
  actors::EngineStats s;
  for (int i = 0; i < 500; ++i) {
    s = engine.stats();
    if (s.running == 0 && s.waiting == 0 && s.kv_blocks_used == 0) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
}

}  // namespace pagoda::net
