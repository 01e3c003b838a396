// The /v1/ws frames without a model (net/ws_messages.hpp, net/kv_stream.hpp):
//  - a generate frame with every field sets exactly the SamplingOptions the
//    literal says; use_beam_search resolves; chat messages are read;
//  - server frames: done maps abort to "shutdown" only while shutting down;
//    error frames carry a null id;
//  - the kv frame of a hand-built snapshot: state string, ref counts, per
//    block owners derived from the sequence tables, this socket's ids;
//  - fuzzing: 20000 mutations of valid frames through a handler without an
//    engine never crash, and each is answered by at most one frame, an error
//    with a code of the closed set (none only for a valid kv_(un)subscribe).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <random>
#include <set>

#include "net/kv_stream.hpp"
#include "net/server_context.hpp"
#include "net/ws_messages.hpp"
#include "net/ws_protocol.hpp"
#include "ws_fake_channel.hpp"

namespace pagoda::net {
namespace {

TEST(WsMessages, GenerateReadsEverySamplingField) {
  WsFrameParser parser;
  WsCommand c = parser.parse(
      R"({"type":"generate","id":"a","v":1,"prompt":"hi","temperature":0.5,"top_k":-1,"top_p":0.9,)"
      R"("min_p":0.05,"repetition_penalty":1.1,"presence_penalty":0.25,"frequency_penalty":-0.5,)"
      R"("seed":-1,"stop":"\n","stop_token_ids":[2,7],"max_tokens":9.0,"min_tokens":3,)"
      R"("ignore_eos":true,"n":3,"length_penalty":0.75,"early_stopping":false,)"
      R"("logprobs":0})");
  ASSERT_TRUE(std::holds_alternative<WsGenerate>(c)) << std::get<WsBadFrame>(c).message;
  const WsGenerate& g = std::get<WsGenerate>(c);
  const actors::SamplingOptions& s = g.request.sampling;
  EXPECT_EQ(g.id, "a");
  EXPECT_EQ(g.request.prompt, "hi");
  EXPECT_TRUE(g.want_logprobs);
  EXPECT_EQ(s.logprobs, 0);
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_EQ(s.top_k, 0);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.25f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  ASSERT_TRUE(s.seed.has_value());
  EXPECT_EQ(*s.seed, ~uint64_t(0));
  EXPECT_EQ(s.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(s.max_tokens, 9);
  EXPECT_EQ(s.min_tokens, 3);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.n, 3);
  EXPECT_EQ(s.beam_width, 0);
  EXPECT_FLOAT_EQ(s.length_penalty, 0.75f);
  EXPECT_FALSE(s.early_stopping);

  c = parser.parse(R"({"type":"generate","id":"b","messages":[{"role":"user","content":"x"},)"
                   R"({"content":"y","role":"assistant"}],"seed":null})");
  ASSERT_TRUE(std::holds_alternative<WsGenerate>(c));
  const WsGenerate& m = std::get<WsGenerate>(c);
  ASSERT_EQ(m.request.messages.size(), 2u);
  EXPECT_EQ(m.request.messages[1].role, "assistant");
  EXPECT_EQ(m.request.messages[1].content, "y");
  EXPECT_FALSE(m.want_logprobs);
  EXPECT_FALSE(m.request.sampling.seed.has_value());

  c = parser.parse(R"({"type":"generate","id":"c","prompt":"x","n":3,"use_beam_search":true})");
  ASSERT_TRUE(std::holds_alternative<WsGenerate>(c));
  EXPECT_EQ(std::get<WsGenerate>(c).request.sampling.beam_width, 3);  // max(n, 2)

  c = parser.parse(R"({"type":"kv_unsubscribe"})");
  ASSERT_TRUE(std::holds_alternative<WsKvSubscribe>(c));
  EXPECT_FALSE(std::get<WsKvSubscribe>(c).subscribe);
}

TEST(WsMessages, ServerFrames) {
  actors::RequestDone done;
  done.finish = {actors::FinishReason::abort, actors::FinishReason::stop};
  done.prompt_tokens = 3;
  done.completion_tokens = 4;
  EXPECT_EQ(ws_done_frame("d", done, false),
            R"({"type":"done","id":"d","finish_reasons":["abort","stop"],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})");
  EXPECT_NE(ws_done_frame("d", done, true).find(R"(["shutdown","stop"])"), std::string::npos);
  EXPECT_EQ(ws_error_frame(std::nullopt, WsErrorCode::bad_json, "x\"y", true),
            R"({"type":"error","id":null,"code":"bad_json","message":"x\"y","terminal":false})");
  EXPECT_EQ(ws_error_frame(std::string("q"), WsErrorCode::prompt_too_long, "m", true),
            R"({"type":"error","id":"q","code":"prompt_too_long","message":"m","terminal":true})");
}

TEST(WsMessages, KvFrameOfAHandBuiltSnapshot) {
  actors::KvSnapshot snap;
  auto& p = snap.pool;
  p.block_size = 4;
  p.total_blocks = 4;
  p.used_blocks = 3;
  p.cached_blocks = 1;
  p.free_blocks = 0;
  p.blocks = {{actors::BlockState::used, 2, {10, 11}},
              {actors::BlockState::used, 1, {10}},
              {actors::BlockState::used, 1, {11}},
              {actors::BlockState::cached, 0, {}}};
  p.seqs = {{10, 6, {0, 1}}, {11, 5, {0, 2}}};
  snap.owners = {{10, 7, 0}, {11, 8, 0}};
  actors::EngineStats stats;
  stats.running = 2;
  const std::string f = kv_frame(snap, stats, 5, {{7, "mine-7"}});
  simdjson::dom::parser parser;
  simdjson::dom::element e = parser.parse(f);
  EXPECT_EQ(int64_t(e["seq"]), 5);
  EXPECT_EQ(int64_t(e["total"]), 4);
  EXPECT_EQ(int64_t(e["running"]), 2);
  EXPECT_EQ(std::string_view(e["state"]), "uuuc");
  // Only this socket's request 7 is identified: block 0 (shared with the
  // other client's request 8) shows ref 1 and owner 7; block 2 (request 8's
  // only) is anonymous in use; seq 11 is only counted in `others`.
  EXPECT_EQ(simdjson::minify(e["ref"]), "[1,1,0,0]");
  EXPECT_EQ(simdjson::minify(e["owners"]), "[[7],[7],[],[]]");
  EXPECT_EQ(simdjson::minify(e["seqs"]), R"([{"seq":10,"request":7,"index":0,"tokens":6,"table":[0,1]}])");
  EXPECT_EQ(int64_t(e["others"]), 1);
  EXPECT_EQ(simdjson::minify(e["mine"]), R"({"7":"mine-7"})");
  EXPECT_EQ(f.find("8"), std::string::npos) << "another client's request id leaked: " << f;
}

TEST(WsMessages, KvFrameWithoutOwnRequestsShowsNoIds) {
  actors::KvSnapshot snap;
  auto& p = snap.pool;
  p.block_size = 4;
  p.total_blocks = 2;
  p.used_blocks = 2;
  p.blocks = {{actors::BlockState::used, 2, {20, 21}}, {actors::BlockState::used, 1, {21}}};
  p.seqs = {{20, 3, {0}}, {21, 6, {0, 1}}};
  snap.owners = {{20, 5, 0}, {21, 6, 1}};
  const std::string f = kv_frame(snap, actors::EngineStats{}, 0, {});
  simdjson::dom::parser parser;
  simdjson::dom::element e = parser.parse(f);
  EXPECT_EQ(std::string_view(e["state"]), "uu");
  EXPECT_EQ(simdjson::minify(e["ref"]), "[0,0]");
  EXPECT_EQ(simdjson::minify(e["owners"]), "[[],[]]");
  EXPECT_EQ(simdjson::minify(e["seqs"]), "[]");
  EXPECT_EQ(int64_t(e["others"]), 2);
}

std::string mutate(std::string s, std::mt19937& rng) {
  const char alphabet[] = "{}[]\":,0123456789.-eE \\ntfalsenul\x01\xff\xc3";
  std::uniform_int_distribution<int> op(0, 4);
  const int rounds = 1 + int(rng() % 3);
  for (int r = 0; r < rounds; ++r) {
    const size_t pos = s.empty() ? 0 : rng() % s.size();
    const char ch = alphabet[rng() % (sizeof(alphabet) - 1)];
    switch (op(rng)) {
      case 0: if (!s.empty()) s[pos] = ch; break;
      case 1: s.insert(s.begin() + std::ptrdiff_t(pos), ch); break;
      case 2: if (!s.empty()) s.erase(pos, 1); break;
      case 3: s.resize(pos); break;
      default: s.insert(pos, s.substr(pos, rng() % 8)); break;
    }
  }
  return s;
}

bool is_kv_command(const std::string& frame) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  std::string_view type;
  if (parser.parse(frame).get(e) != simdjson::SUCCESS || e["type"].get(type) != simdjson::SUCCESS) return false;
  return type == "kv_subscribe" || type == "kv_unsubscribe";
}

TEST(WsMessages, FuzzedFramesGetAtMostOneErrorEach) {
  const std::set<std::string> codes = {"bad_json", "bad_request", "unknown_type", "duplicate_id",
                                       "unknown_id", "too_many_requests", "prompt_too_long", "not_ready",
                                       "shutting_down", "binary_frame", "frame_too_big", "engine_error",
                                       "internal"};
  const std::vector<std::string> seeds = {
      R"({"type":"generate","id":"a","prompt":"hi","max_tokens":4,"stop":["x"],"n":2})",
      R"({"type":"generate","id":"b","messages":[{"role":"user","content":"x"}],"logprobs":3})",
      R"({"type":"cancel","id":"a"})", R"({"type":"kv_subscribe"})", R"({"type":"kv_unsubscribe","v":1})"};
  auto ctx = std::make_shared<ServerContext>();  // no engine: valid generates get not_ready
  auto channel = std::make_shared<test::FakeChannel>();
  auto handler = make_ws_protocol(ctx, channel);
  std::mt19937 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    const std::string frame = mutate(seeds[size_t(i) % seeds.size()], rng);
    const size_t before = channel->count();
    handler->on_text(frame);
    const size_t after = channel->count();
    ASSERT_LE(after, before + 1) << frame;
    if (after == before) {
      EXPECT_TRUE(is_kv_command(frame)) << "no answer to: " << frame;
      continue;
    }
    const test::Frame f = channel->last();
    EXPECT_EQ(f.type, "error") << f.raw;
    EXPECT_TRUE(codes.contains(f.code)) << f.raw;
  }
  handler->on_closed();
}

}  // namespace
}  // namespace pagoda::net
