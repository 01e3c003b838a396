// The /v1/ws protocol handler (net/ws_protocol.hpp, docs/protocol.md) driven
// through a fake WsChannel that records frames, with a real Engine on the
// real SmolLM2 GGUF (CPU, quantized; skips without it). References are the
// engine's own offline API (Engine::generate) and its statistics:
//  - greedy text / ids / finish / usage equal Engine::generate's (prompt and
//    chat messages), logprobs equal its per-token logprobs;
//  - multiplexing: two requests interleave, exactly one terminal frame each;
//  - n = 2 seeded sampling: each index equals Engine::generate's sample;
//  - beam search frames (skipped while the engine returns no beams);
//  - cancel, close and destruction free every KV block;
//  - every malformed input gets its documented error frame and the handler
//    still serves afterwards; limits (duplicate id, too many, prompt length,
//    not ready, shutting down);
//  - kv subscription frames: counts match the engine, this socket's request
//    appears with its client id, rate bounded, none after unsubscribe or
//    while the outgoing queue is full;
//  - error frames say whether they end their id (`terminal`).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "actors/engine.hpp"
#include "formats_test_util.hpp"
#include "net/server_context.hpp"
#include "net/ws_protocol.hpp"
#include "server_engine_options.hpp"
#include "ws_fake_channel.hpp"

namespace pagoda::net {
namespace {

using namespace std::chrono_literals;
using test::FakeChannel;
using test::Frame;


bool is_terminal_for(const Frame& f, const std::string& id) {
  return f.id == id && (f.type == "done" || (f.type == "error" && f.terminal));
}

std::vector<Frame> of_id(const std::vector<Frame>& frames, const std::string& id, const std::string& type) {
  std::vector<Frame> out;
  for (const Frame& f : frames) {
    if (f.id == id && f.type == type) out.push_back(f);
  }
  return out;
}

class WsProtocolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = ::pagoda::test::real_model_path();
    if (path.empty()) return;
    auto e = actors::Engine::start(::pagoda::test::server_engine_options(path));
    ASSERT_TRUE(e.ok()) << e.error().message;
    engine_ = std::shared_ptr<actors::Engine>(std::move(e).value());
  }
  static void TearDownTestSuite() { engine_.reset(); }

  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "real model absent: set PAGODA_MODEL or run tools/fetch-model";
  }
  void TearDown() override {
    if (engine_) wait_blocks_free();
  }

  static std::shared_ptr<ServerContext> make_context() {
    auto ctx = std::make_shared<ServerContext>();
    ctx->engine = engine_;
    ctx->ready = true;
    ctx->options.kv_interval = 50ms;
    return ctx;
  }
  // Every KV block back (no running request); the engine publishes stats
  // after its steps, so poll.
  static void wait_blocks_free() {
    for (int i = 0; i < 500; ++i) {
      auto s = engine_->stats();
      if (s.kv_blocks_used == 0 && s.running == 0 && s.waiting == 0) return;
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "KV blocks still used: " << engine_->stats().kv_blocks_used;
  }
  static actors::SamplingOptions greedy(int32_t max_tokens) {
    actors::SamplingOptions s;
    s.temperature = 0.0f;
    s.max_tokens = max_tokens;
    return s;
  }

  static std::shared_ptr<actors::Engine> engine_;
};
std::shared_ptr<actors::Engine> WsProtocolTest::engine_;

// A handler on a fake channel.
struct Client {
  explicit Client(std::shared_ptr<ServerContext> ctx)
      : channel(std::make_shared<FakeChannel>()), handler(make_ws_protocol(std::move(ctx), channel)) {}
  void send(const std::string& frame) { handler->on_text(frame); }
  // Waits for the terminal frame of `id` and returns it.
  // Waits for the first terminal frame of `id` at or after frame `from`.
  Frame wait_terminal(const std::string& id, size_t from = 0) {
    EXPECT_TRUE(channel->wait([&](const auto& fs) {
      return fs.size() > from && std::any_of(fs.begin() + std::ptrdiff_t(from), fs.end(),
                                             [&](const Frame& f) { return is_terminal_for(f, id); });
    })) << "no terminal frame for " << id;
    const auto fs = channel->frames();
    for (size_t i = from; i < fs.size(); ++i) {
      if (is_terminal_for(fs[i], id)) return fs[i];
    }
    return Frame{};
  }
  size_t terminals(const std::string& id) {
    auto fs = channel->frames();
    return size_t(std::count_if(fs.begin(), fs.end(), [&](const Frame& f) { return is_terminal_for(f, id); }));
  }
  std::string text(const std::string& id, int64_t index = 0) {
    std::string out;
    for (const Frame& f : of_id(channel->frames(), id, "token")) {
      if (f.index == index) out += f.text;
    }
    return out;
  }
  std::vector<int64_t> token_ids(const std::string& id, int64_t index = 0) {
    std::vector<int64_t> out;
    for (const Frame& f : of_id(channel->frames(), id, "token")) {
      if (f.index == index && f.token_id >= 0) out.push_back(f.token_id);
    }
    return out;
  }
  std::shared_ptr<FakeChannel> channel;
  std::unique_ptr<WsHandler> handler;
};

std::vector<int64_t> widen(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

TEST_F(WsProtocolTest, HelloThenGreedyEqualsEngineGenerate) {
  auto ctx = make_context();
  Client c(ctx);
  ASSERT_GE(c.channel->count(), 1u);
  const Frame hello = c.channel->frames()[0];
  EXPECT_EQ(hello.type, "hello");
  EXPECT_EQ(hello.blocks_total, engine_->num_kv_blocks());
  EXPECT_NE(hello.raw.find("\"v\":1"), std::string::npos) << hello.raw;

  const auto ref = engine_->generate({"The capital of France is"}, greedy(8));
  ASSERT_TRUE(ref[0].error.empty()) << ref[0].error;
  c.send(R"({"type":"generate","id":"g1","prompt":"The capital of France is","temperature":0,"max_tokens":8})");
  const Frame done = c.wait_terminal("g1");
  ASSERT_EQ(done.type, "done") << done.raw;
  auto accepted = of_id(c.channel->frames(), "g1", "accepted");
  ASSERT_EQ(accepted.size(), 1u);
  EXPECT_EQ(accepted[0].prompt_tokens, ref[0].prompt_tokens);
  EXPECT_EQ(c.text("g1"), ref[0].samples[0].text);
  EXPECT_EQ(c.token_ids("g1"), widen(ref[0].samples[0].token_ids));
  ASSERT_EQ(done.finish.size(), 1u);
  EXPECT_EQ(done.finish[0], actors::finish_reason_name(ref[0].samples[0].finish));
  EXPECT_EQ(done.completion_tokens, int64_t(ref[0].samples[0].token_ids.size()));
  EXPECT_EQ(done.prompt_tokens, ref[0].prompt_tokens);
  // accepted precedes every token, done follows them; no frame without logprobs asked
  const auto frames = c.channel->frames();
  for (const Frame& f : frames) EXPECT_FALSE(f.has_logprob) << f.raw;
  EXPECT_EQ(frames[1].type, "accepted");
  EXPECT_EQ(frames.back().type, "done");
}

TEST_F(WsProtocolTest, ChatMessagesAndLogprobsEqualEngine) {
  actors::GenerateRequest req;
  req.messages = {{"system", "Be brief."}, {"user", "Name a colour."}};
  req.sampling = greedy(6);
  req.sampling.logprobs = 2;
  const auto ref = engine_->generate(std::vector<actors::GenerateRequest>{req});
  ASSERT_TRUE(ref[0].error.empty()) << ref[0].error;
  Client c(make_context());
  c.send(R"({"type":"generate","id":"chat","messages":[{"role":"system","content":"Be brief."},)"
         R"({"role":"user","content":"Name a colour."}],"temperature":0,"max_tokens":6,"logprobs":2})");
  ASSERT_EQ(c.wait_terminal("chat").type, "done");
  EXPECT_EQ(of_id(c.channel->frames(), "chat", "accepted")[0].prompt_tokens, ref[0].prompt_tokens);
  EXPECT_EQ(c.text("chat"), ref[0].samples[0].text);
  std::vector<Frame> tokens;
  for (const Frame& f : of_id(c.channel->frames(), "chat", "token")) {
    if (f.token_id >= 0) tokens.push_back(f);
  }
  ASSERT_EQ(tokens.size(), ref[0].samples[0].logprobs.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ASSERT_TRUE(tokens[i].has_logprob) << tokens[i].raw;
    EXPECT_NEAR(tokens[i].logprob, ref[0].samples[0].logprobs[i], 1e-5);
    ASSERT_EQ(tokens[i].top_ids.size(), 2u) << tokens[i].raw;
    EXPECT_EQ(tokens[i].top_ids[0], tokens[i].token_id);  // greedy: the best candidate
    EXPECT_NEAR(tokens[i].top_lps[0], tokens[i].logprob, 1e-5);
    EXPECT_GE(tokens[i].top_lps[0], tokens[i].top_lps[1]);
  }
}

TEST_F(WsProtocolTest, TwoRequestsInterleaveWithOneDoneEach) {
  const auto ref = engine_->generate({"Once upon a time", "The best way to learn"}, greedy(16));
  Client c(make_context());
  c.send(R"({"type":"generate","id":"a","prompt":"Once upon a time","temperature":0,"max_tokens":16})");
  c.send(R"({"type":"generate","id":"b","prompt":"The best way to learn","temperature":0,"max_tokens":16})");
  c.wait_terminal("a");
  c.wait_terminal("b");
  EXPECT_EQ(c.terminals("a"), 1u);
  EXPECT_EQ(c.terminals("b"), 1u);
  EXPECT_EQ(c.text("a"), ref[0].samples[0].text);
  EXPECT_EQ(c.text("b"), ref[1].samples[0].text);
  // Interleaved: some token of b comes before the last token of a and vice versa.
  const auto fs = c.channel->frames();
  auto first = [&](const std::string& id) {
    for (size_t i = 0; i < fs.size(); ++i) if (fs[i].id == id && fs[i].type == "token") return i;
    return fs.size();
  };
  auto last = [&](const std::string& id) {
    size_t l = 0;
    for (size_t i = 0; i < fs.size(); ++i) if (fs[i].id == id && fs[i].type == "token") l = i;
    return l;
  };
  EXPECT_LT(first("b"), last("a"));
  EXPECT_LT(first("a"), last("b"));
  // Nothing after a request's done.
  for (const std::string id : {"a", "b"}) {
    bool ended = false;
    for (const Frame& f : fs) {
      if (f.id != id) continue;
      EXPECT_FALSE(ended) << "frame after done: " << f.raw;
      ended = ended || f.type == "done";
    }
  }
}

TEST_F(WsProtocolTest, ParallelSamplesStreamBothIndices) {
  actors::SamplingOptions s;
  s.temperature = 0.9f;
  s.seed = 7;
  s.n = 2;
  s.max_tokens = 6;
  const auto ref = engine_->generate({"My favourite food is"}, s);
  ASSERT_EQ(ref[0].samples.size(), 2u);
  Client c(make_context());
  c.send(R"({"type":"generate","id":"n2","prompt":"My favourite food is","temperature":0.9,"seed":7,)"
         R"("n":2,"max_tokens":6})");
  const Frame done = c.wait_terminal("n2");
  ASSERT_EQ(done.type, "done");
  ASSERT_EQ(done.finish.size(), 2u);
  size_t total = 0;
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(c.text("n2", i), ref[0].samples[size_t(i)].text) << "sample " << i;
    EXPECT_EQ(c.token_ids("n2", i), widen(ref[0].samples[size_t(i)].token_ids));
    EXPECT_FALSE(c.token_ids("n2", i).empty());
    total += c.token_ids("n2", i).size();
  }
  EXPECT_EQ(done.completion_tokens, int64_t(total));
}

TEST_F(WsProtocolTest, BeamSearchSendsBeamsAndRankedDone) {
  Client c(make_context());
  c.send(R"({"type":"generate","id":"bs","prompt":"The capital of France is","beam_width":2,"n":2,)"
         R"("max_tokens":6})");
  const Frame done = c.wait_terminal("bs");
  ASSERT_EQ(done.type, "done") << done.raw;
  if (done.beams.empty()) GTEST_SKIP() << "the engine returned no beams (beam search not implemented yet)";
  EXPECT_FALSE(of_id(c.channel->frames(), "bs", "beams").empty());
  EXPECT_TRUE(of_id(c.channel->frames(), "bs", "token").empty());
  ASSERT_EQ(done.beams.size(), 2u);
  EXPECT_EQ(done.finish.size(), 2u);
  for (size_t i = 0; i < done.beams.size(); ++i) {
    const auto& b = done.beams[i];
    ASSERT_FALSE(b.ids.empty());
    EXPECT_LE(b.ids.size(), 6u);
    EXPECT_LT(b.cumulative, 0.0);
    EXPECT_LT(b.score, 0.0);
    EXPECT_GT(b.score, b.cumulative);  // divided by a length > 1 (length_penalty 1)
    if (i > 0) {
      EXPECT_GE(done.beams[i - 1].score, b.score);
    }
  }
}

TEST_F(WsProtocolTest, CancelMidStreamAbortsAndFreesBlocks) {
  Client c(make_context());
  c.send(R"({"type":"generate","id":"long","prompt":"Count: 1, 2, 3,","max_tokens":400,"ignore_eos":true})");
  ASSERT_TRUE(c.channel->wait([](const auto& fs) { return of_id(fs, "long", "token").size() >= 2; }));
  c.send(R"({"type":"cancel","id":"long"})");
  const Frame done = c.wait_terminal("long");
  ASSERT_EQ(done.type, "done");
  ASSERT_EQ(done.finish.size(), 1u);
  EXPECT_EQ(done.finish[0], "abort");
  EXPECT_LT(done.completion_tokens, 400);
  wait_blocks_free();
  c.send(R"({"type":"cancel","id":"long"})");  // already over
  const Frame last = c.channel->frames().back();
  EXPECT_EQ(last.code, "unknown_id");
  EXPECT_EQ(last.id, "long");
  EXPECT_EQ(c.terminals("long"), 1u);
}

TEST_F(WsProtocolTest, CloseAndDestroyCancelOpenRequests) {
  {
    Client c(make_context());
    c.send(R"({"type":"generate","id":"x","prompt":"Hello","max_tokens":400,"ignore_eos":true,"n":2})");
    c.send(R"({"type":"generate","id":"y","prompt":"World","max_tokens":400,"ignore_eos":true})");
    ASSERT_TRUE(c.channel->wait([](const auto& fs) { return !of_id(fs, "y", "token").empty(); }));
    c.channel->set_closed();
    c.handler->on_closed();
    wait_blocks_free();
  }
  {
    Client c(make_context());  // destroyed without on_closed
    c.send(R"({"type":"generate","id":"z","prompt":"Hello","max_tokens":400,"ignore_eos":true})");
    ASSERT_TRUE(c.channel->wait([](const auto& fs) { return !of_id(fs, "z", "token").empty(); }));
    c.handler.reset();
  }
  wait_blocks_free();
}

struct BadCase {
  std::string frame, code;
  std::optional<std::string> id;
  std::string message_part;
};

TEST_F(WsProtocolTest, MalformedFramesGetTheirErrorAndTheHandlerGoesOn) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  const std::vector<BadCase> cases = {
      {R"({"type":"generate","id":"q","prompt":"hi")", "bad_json", std::nullopt, ""},
      {R"({"type":"cancel","id":"q"} xyz)", "bad_json", std::nullopt, ""},
      {R"({"type":"cancel","id":"q"}{"type":"cancel","id":"r"})", "bad_json", std::nullopt, ""},
      {"", "bad_json", std::nullopt, ""},
      {"{\"type\":\"generate\",\"id\":\"q\",\"prompt\":\"\xff\xfe\"}", "bad_json", std::nullopt, ""},
      {deep, "bad_json", std::nullopt, ""},
      {"[1,2]", "bad_request", std::nullopt, "object"},
      {R"("generate")", "bad_request", std::nullopt, "object"},
      {R"({"id":"q"})", "bad_request", "q", "type"},
      {R"({"type":7,"id":"q"})", "bad_request", "q", "type"},
      {R"({"type":"fly","id":"q"})", "unknown_type", "q", "fly"},
      {R"({"type":"generate","prompt":"hi"})", "bad_request", std::nullopt, "id"},
      {R"({"type":"generate","id":5,"prompt":"hi"})", "bad_request", std::nullopt, "id"},
      {R"({"type":"generate","id":"","prompt":"hi"})", "bad_request", std::nullopt, "id"},
      {R"({"type":"generate","id":"q","prompt":5})", "bad_request", "q", "prompt"},
      {R"({"type":"generate","id":"q","prompt":"hi","temperature":"hot"})", "bad_request", "q", "temperature"},
      {R"({"type":"generate","id":"q","prompt":"hi","max_tokens":1.5})", "bad_request", "q", "max_tokens"},
      {R"({"type":"generate","id":"q","prompt":"hi","max_tokens":0})", "bad_request", "q", "max_tokens"},
      {R"({"type":"generate","id":"q","prompt":"hi","bogus":1})", "bad_request", "q", "bogus"},
      {R"({"type":"generate","id":"q","prompt":"a","prompt":"b"})", "bad_request", "q", "prompt"},
      {R"({"type":"generate","id":"q"})", "bad_request", "q", "prompt"},
      {R"({"type":"generate","id":"q","prompt":"hi","messages":[{"role":"user","content":"x"}]})",
       "bad_request", "q", "prompt"},
      {R"({"type":"generate","id":"q","messages":[{"role":"user"}]})", "bad_request", "q", "messages"},
      {R"({"type":"generate","id":"q","messages":[]})", "bad_request", "q", "messages"},
      {R"({"type":"generate","id":"q","messages":"hi"})", "bad_request", "q", "messages"},
      {R"({"type":"generate","id":"q","prompt":"hi","logprobs":21})", "bad_request", "q", "logprobs"},
      {R"({"type":"generate","id":"q","prompt":"hi","n":2,"beam_width":1})", "bad_request", "q", "n"},
      {R"({"type":"generate","id":"q","prompt":"hi","v":2})", "bad_request", "q", "v"},
      {R"({"type":"cancel","id":"nope"})", "unknown_id", "nope", "nope"},
      {R"({"type":"cancel","id":"nope","force":true})", "bad_request", "nope", "force"},
      {R"({"type":"cancel"})", "bad_request", std::nullopt, "id"},
      {R"({"type":"kv_subscribe","rate":1})", "bad_request", std::nullopt, "rate"},
  };
  Client c(make_context());
  for (const BadCase& bc : cases) {
    const size_t before = c.channel->count();
    c.send(bc.frame);
    const auto fs = c.channel->frames();
    ASSERT_EQ(fs.size(), before + 1) << bc.frame.substr(0, 80);
    const Frame& f = fs.back();
    EXPECT_EQ(f.type, "error") << f.raw;
    EXPECT_EQ(f.code, bc.code) << bc.frame.substr(0, 80) << " -> " << f.raw;
    EXPECT_EQ(f.id, bc.id) << bc.frame.substr(0, 80) << " -> " << f.raw;
    EXPECT_NE(f.message.find(bc.message_part), std::string::npos) << f.raw;
    // A rejected generate frame with an id ends that id; nothing else does.
    const bool generate = bc.frame.find(R"("type":"generate")") != std::string::npos;
    EXPECT_EQ(f.terminal, generate && bc.id.has_value()) << f.raw;
  }
  c.handler->on_binary(12);
  EXPECT_EQ(c.channel->frames().back().code, "binary_frame");
  EXPECT_FALSE(c.channel->frames().back().id.has_value());
  c.handler->on_too_big();
  EXPECT_EQ(c.channel->frames().back().code, "frame_too_big");
  // Still serving, and the rejected id "q" is free.
  const size_t from = c.channel->count();
  c.send(R"({"type":"generate","id":"q","prompt":"Hi","max_tokens":2,"temperature":null,"stop":null})");
  EXPECT_EQ(c.wait_terminal("q", from).type, "done");
  EXPECT_EQ(of_id(c.channel->frames(), "q", "accepted").size(), 1u);
}

TEST_F(WsProtocolTest, LimitsAndStates) {
  auto ctx = make_context();
  ctx->options.max_requests_per_connection = 1;
  ctx->options.max_prompt_tokens = 4;
  Client c(ctx);
  c.send(R"({"type":"generate","id":"p","prompt":"one two three four five six seven eight"})");
  EXPECT_EQ(c.channel->frames().back().code, "prompt_too_long");
  c.send(R"({"type":"generate","id":"r","prompt":"Hi","max_tokens":300,"ignore_eos":true})");
  ASSERT_TRUE(c.channel->wait([](const auto& fs) { return !of_id(fs, "r", "token").empty(); }));
  c.send(R"({"type":"generate","id":"r","prompt":"Hi"})");
  EXPECT_EQ(c.channel->last().code, "duplicate_id");
  EXPECT_FALSE(c.channel->last().terminal);
  c.send(R"({"type":"generate","id":"r","prompt":"Hi","bogus":1})");  // r is open: not its end
  EXPECT_EQ(c.channel->last().code, "bad_request");
  EXPECT_FALSE(c.channel->last().terminal);
  c.send(R"({"type":"cancel","id":"r","bogus":1})");
  EXPECT_EQ(c.channel->last().code, "bad_request");
  EXPECT_FALSE(c.channel->last().terminal);
  c.send(R"({"type":"generate","id":"s","prompt":"Hi"})");
  EXPECT_EQ(c.channel->last().code, "too_many_requests");
  EXPECT_TRUE(c.channel->last().terminal);
  ctx->shutting_down = true;
  c.send(R"({"type":"generate","id":"t","prompt":"Hi"})");
  EXPECT_EQ(c.channel->frames().back().code, "shutting_down");
  c.send(R"({"type":"cancel","id":"r"})");  // the done of a cancel during shutdown says so
  const Frame done = c.wait_terminal("r");
  ASSERT_EQ(done.type, "done");
  EXPECT_EQ(done.finish, std::vector<std::string>{"shutdown"});
  EXPECT_EQ(c.terminals("r"), 1u);

  auto loading = make_context();
  loading->ready = false;
  Client d(loading);
  d.send(R"({"type":"generate","id":"u","prompt":"Hi"})");
  EXPECT_EQ(d.channel->frames().back().code, "not_ready");
  EXPECT_EQ(d.channel->frames().back().id, "u");
}

TEST_F(WsProtocolTest, KvSubscriptionStreamsSnapshots) {
  Client c(make_context());
  auto kv_frames = [&] {
    std::vector<Frame> out;
    for (const Frame& f : c.channel->frames()) if (f.type == "kv") out.push_back(f);
    return out;
  };
  const auto t0 = std::chrono::steady_clock::now();
  c.send(R"({"type":"kv_subscribe"})");
  c.send(R"({"type":"generate","id":"k1","prompt":"Tell me a story","max_tokens":300,"ignore_eos":true})");
  // Some frame shows this socket's request holding blocks.
  ASSERT_TRUE(c.channel->wait([](const auto& fs) {
    return std::any_of(fs.begin(), fs.end(), [](const Frame& f) {
      return f.type == "kv" && f.mine.size() == 1 && f.mine.begin()->second == "k1" && f.used > 0 && f.seqs > 0;
    });
  }));
  c.send(R"({"type":"cancel","id":"k1"})");
  c.wait_terminal("k1");
  for (const Frame& f : kv_frames()) {
    EXPECT_EQ(f.total, engine_->num_kv_blocks());
    EXPECT_EQ(f.total, f.used + f.free + f.cached) << f.raw.substr(0, 200);
    EXPECT_EQ(f.state_len, size_t(f.total));
    EXPECT_EQ(f.ref_len, size_t(f.total));
    EXPECT_EQ(f.owners_len, size_t(f.total));
  }
  c.send(R"({"type":"kv_subscribe"})");  // no-op
  c.send(R"({"type":"kv_unsubscribe"})");
  const auto t1 = std::chrono::steady_clock::now();
  const size_t n = kv_frames().size();
  // Rate bound: one frame at once, then at most one per 50 ms interval.
  EXPECT_LE(n, size_t((t1 - t0) / 50ms) + 1);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(kv_frames().size(), n);
  // A full outgoing queue: frames are skipped.
  c.channel->queued = size_t(1) << 30;
  c.send(R"({"type":"kv_subscribe"})");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(kv_frames().size(), n);
  c.channel->queued = 0;
  ASSERT_TRUE(c.channel->wait([&](const auto& fs) {
    return size_t(std::count_if(fs.begin(), fs.end(), [](const Frame& f) { return f.type == "kv"; })) > n;
  }));
  c.handler->on_closed();
}

}  // namespace
}  // namespace pagoda::net
