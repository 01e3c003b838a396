// The whole front end (HttpServer + make_api_routes + make_ws_protocol) with
// the real model, driven by a C++ Beast client: greedy /v1/completions and a
// WebSocket `generate` both equal Engine::generate's greedy text on the same
// prompt (the independent reference: the offline API, no network layer), and
// a client leaving a streaming completion cancels it (the engine's blocks go
// back). Needs the SmolLM2 GGUF (env PAGODA_MODEL or the default cache path);
// skips with a reason otherwise.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "actors/engine.hpp"
#include "net/api_routes.hpp"
#include "net/http_server.hpp"
#include "server_engine_options.hpp"
#include "tests/http_client_util.hpp"

namespace pagoda::net {
namespace {

using namespace std::chrono_literals;
using namespace pagoda::testing;

constexpr const char* kPrompt = "The capital of France is";

std::string model_path() {
  if (const char* env = std::getenv("PAGODA_MODEL")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class ServerClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(model_path())) return;
    auto engine = actors::Engine::start(test::server_engine_options(model_path()));
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    ctx_ = std::make_shared<ServerContext>();
    ctx_->options.port = 0;
    ctx_->engine = std::shared_ptr<actors::Engine>(std::move(*engine));
    ctx_->ready.store(true);
    auto server = HttpServer::start(ctx_, make_api_routes(ctx_));
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(*server);
  }
  static void TearDownTestSuite() {
    if (!ctx_) return;
    ctx_->shutting_down.store(true);
    ctx_->engine->shutdown();
    server_->stop();
    server_.reset();
    ctx_.reset();
  }
  void SetUp() override {
    if (!ctx_) GTEST_SKIP() << "model not found at " << model_path() << " (set PAGODA_MODEL)";
  }
  static std::string reference_greedy(int max_tokens) {
    actors::SamplingOptions s;
    s.temperature = 0.0f;
    s.max_tokens = max_tokens;
    std::vector<actors::GenerateResult> r = ctx_->engine->generate({kPrompt}, s);
    EXPECT_TRUE(r.size() == 1 && r[0].error.empty());
    return r.empty() || r[0].samples.empty() ? std::string() : r[0].samples[0].text;
  }

  static std::shared_ptr<ServerContext> ctx_;
  static std::unique_ptr<HttpServer> server_;
};

std::shared_ptr<ServerContext> ServerClientTest::ctx_;
std::unique_ptr<HttpServer> ServerClientTest::server_;

TEST_F(ServerClientTest, GreedyCompletionEqualsEngineGenerate) {
  const std::string want = reference_greedy(8);
  ASSERT_FALSE(want.empty());
  HttpClient c(server_->port());
  const std::string body = "{\"model\":\"" + ctx_->model_id() + "\",\"prompt\":\"" + kPrompt +
                           "\",\"max_tokens\":8,\"temperature\":0}";
  Response r = c.request(http::verb::post, "/v1/completions", body, {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(r.body()).get(doc)) << r.body();
  std::string_view text;
  ASSERT_FALSE(doc["choices"].at(0)["text"].get(text)) << r.body();
  EXPECT_EQ(text, want);
}

TEST_F(ServerClientTest, WebSocketGenerateStreamsAcceptedTokensDone) {
  const std::string want = reference_greedy(8);
  WsClient ws(server_->port());
  ASSERT_FALSE(ws.connect("/v1/ws"));
  ASSERT_FALSE(ws.write(std::string("{\"type\":\"generate\",\"id\":\"a\",\"prompt\":\"") + kPrompt +
                        "\",\"max_tokens\":8,\"temperature\":0}"));
  std::vector<std::string> types;
  std::string text;
  simdjson::dom::parser parser;
  for (int i = 0; i < 100; ++i) {
    std::string frame;
    ASSERT_FALSE(ws.read(frame, 30s));
    simdjson::dom::element doc;
    ASSERT_FALSE(parser.parse(frame).get(doc)) << frame;
    std::string_view type, delta;
    ASSERT_FALSE(doc["type"].get(type)) << frame;
    types.emplace_back(type);
    if (type == "token" && !doc["text"].get(delta)) text += delta;
    if (type == "done" || type == "error") break;
  }
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(types.front(), "hello");
  EXPECT_EQ(types[1], "accepted");
  EXPECT_EQ(types.back(), "done");
  for (size_t i = 2; i + 1 < types.size(); ++i) EXPECT_EQ(types[i], "token");
  EXPECT_EQ(text, want);
  EXPECT_FALSE(ws.close());
}

TEST_F(ServerClientTest, LeavingAStreamingCompletionCancelsIt) {
  HttpClient c(server_->port());
  const std::string body = "{\"model\":\"" + ctx_->model_id() + "\",\"prompt\":\"" + kPrompt +
                           "\",\"max_tokens\":2000,\"ignore_eos\":true,\"stream\":true}";
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  ASSERT_FALSE(c.send(req));
  http::response_parser<http::string_body> p;
  ASSERT_FALSE(c.read_header(p));
  ASSERT_EQ(p.get().result_int(), 200);
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i, std::this_thread::sleep_for(10ms)) running = ctx_->engine->stats().running > 0;
  ASSERT_TRUE(running);
  c.close();
  actors::EngineStats s;
  for (int i = 0; i < 300; ++i, std::this_thread::sleep_for(10ms)) {
    s = ctx_->engine->stats();
    if (s.running == 0 && s.waiting == 0 && s.kv_blocks_used == 0) break;
  }
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_blocks_used, 0) << "blocks still held after the client left";
  EXPECT_LT(s.generation_tokens, 2000u);
}

}  // namespace
}  // namespace pagoda::net
