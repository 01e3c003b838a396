// The HTTP API handlers (make_api_routes) on the real SmolLM2 GGUF (CPU,
// quantized precision; skips without the model), driven through a fake
// Responder that records the answer or the SSE events:
//  - completions / chat greedy text equals Engine::generate on the same
//    prompt / messages (the engine without the API layer);
//  - streaming: the concatenated deltas equal the non-streaming text, chunk
//    shapes (role first, finish chunk, usage chunk, [DONE]);
//  - n = 2 (seeded) equals the engine's samples; beam search returns the
//    engine's beams; a stop string cuts the greedy text at its first
//    occurrence; logprobs shapes; usage numbers;
//  - ignored and neutral-valued OpenAI fields are accepted;
//  - closing the connection cancels the request and every KV block returns;
//  - a shutdown ends a stream with finish_reason "shutdown"; an engine
//    error is a 500 server_error.
// Malformed inputs and the other routes: api_routes_test.cpp.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>

#include "api_test_fixture.hpp"
#include "net/json_writer.hpp"

namespace pagoda::net {
namespace {

class OpenAiApiTest : public ApiFixture {};

actors::SamplingOptions greedy(int32_t max_tokens) {
  actors::SamplingOptions s;
  s.temperature = 0.0f;
  s.max_tokens = max_tokens;
  return s;
}

const char* kPrompt = "The capital of France is";
const char* kChatMessages = R"([{"role":"system","content":"You are a concise assistant."},
                                {"role":"user","content":"What is the capital of France?"}])";

std::vector<actors::ChatMessage> chat_messages() {
  return {{"system", "You are a concise assistant."}, {"user", "What is the capital of France?"}};
}

// The text a stream of completion / chat chunks adds up to, per choice; the
// usage chunk's numbers; the finish reasons. Checks the framing on the way.
struct Streamed {
  std::map<int64_t, std::string> text, finish;
  int64_t prompt_tokens = -1, completion_tokens = -1;
};

Streamed read_stream(const Answer& a, bool chat) {
  Streamed out;
  EXPECT_TRUE(a.streaming);
  EXPECT_EQ(a.status, 200);
  EXPECT_FALSE(a.events.empty());
  if (a.events.empty()) return out;
  EXPECT_EQ(a.events.back(), "[DONE]");
  std::map<int64_t, bool> saw_role;
  for (size_t i = 0; i + 1 < a.events.size(); ++i) {
    simdjson::dom::parser p;
    auto e = parse(p, a.events[i]);
    EXPECT_EQ(str(e["object"]), chat ? "chat.completion.chunk" : "text_completion");
    simdjson::dom::array choices = e["choices"].get_array();
    if (choices.size() == 0) {  // the usage chunk
      out.prompt_tokens = num(e["usage"]["prompt_tokens"]);
      out.completion_tokens = num(e["usage"]["completion_tokens"]);
      EXPECT_EQ(num(e["usage"]["total_tokens"]), out.prompt_tokens + out.completion_tokens);
      continue;
    }
    EXPECT_EQ(choices.size(), 1u);
    auto c = choices.at(0).value();
    const int64_t index = num(c["index"]);
    EXPECT_EQ(out.finish.count(index), 0u) << "a chunk after the finish chunk";
    if (chat) {
      std::string_view role;
      if (c["delta"]["role"].get_string().get(role) == simdjson::SUCCESS) {
        EXPECT_EQ(role, "assistant");
        EXPECT_FALSE(saw_role[index]) << "two role deltas";
        saw_role[index] = true;
      }
      EXPECT_TRUE(saw_role[index]) << "content before the role delta";
      std::string_view content;
      if (c["delta"]["content"].get_string().get(content) == simdjson::SUCCESS) out.text[index] += content;
    } else {
      out.text[index] += str(c["text"]);
    }
    std::string_view finish;
    if (c["finish_reason"].get_string().get(finish) == simdjson::SUCCESS) out.finish[index] = std::string(finish);
  }
  return out;
}

TEST_F(OpenAiApiTest, CompletionGreedyMatchesEngineGenerate) {
  auto ref = context_->engine->generate({kPrompt}, greedy(12));
  ASSERT_EQ(ref.size(), 1u);
  ASSERT_TRUE(ref[0].error.empty()) << ref[0].error;
  Answer a = post("/v1/completions", R"({"model":")" + context_->model_id() +
                                         R"(","prompt":"The capital of France is","max_tokens":12,"temperature":0})");
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.content_type, "application/json");
  simdjson::dom::parser p;
  auto e = parse(p, a.body);
  EXPECT_EQ(str(e["id"]).rfind("cmpl-", 0), 0u);
  EXPECT_EQ(str(e["object"]), "text_completion");
  EXPECT_EQ(str(e["model"]), context_->model_id());
  EXPECT_GT(num(e["created"]), 1700000000);
  simdjson::dom::array choices = e["choices"].get_array();
  ASSERT_EQ(choices.size(), 1u);
  auto c = choices.at(0).value();
  EXPECT_EQ(num(c["index"]), 0);
  EXPECT_EQ(str(c["text"]), ref[0].samples[0].text);
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(str(c["finish_reason"]), actors::finish_reason_name(ref[0].samples[0].finish));
  EXPECT_EQ(num(e["usage"]["prompt_tokens"]), ref[0].prompt_tokens);
  EXPECT_EQ(num(e["usage"]["prompt_tokens"]), 5);  // HF ids of this prompt (tests/data/logits/smollm2.json)
  EXPECT_EQ(num(e["usage"]["completion_tokens"]), int64_t(ref[0].samples[0].token_ids.size()));
  EXPECT_EQ(num(e["usage"]["total_tokens"]), 5 + int64_t(ref[0].samples[0].token_ids.size()));
}

TEST_F(OpenAiApiTest, PromptAsTokenIdsAndArrays) {
  auto ref = context_->engine->generate({kPrompt}, greedy(6));
  for (const char* prompt : {R"([504,3575,282,4649,314])", R"([[504,3575,282,4649,314]])",
                             R"(["The capital of France is"])"}) {
    Answer a = post("/v1/completions", std::string(R"({"max_tokens":6,"temperature":0,"prompt":)") + prompt + "}");
    ASSERT_EQ(a.status, 200) << a.body;
    simdjson::dom::parser p;
    auto e = parse(p, a.body);
    EXPECT_EQ(str(e["choices"].at(0)["text"]), ref[0].samples[0].text) << prompt;
  }
}

TEST_F(OpenAiApiTest, ChatGreedyMatchesMessagesRequest) {
  actors::GenerateRequest g;
  g.messages = chat_messages();
  g.sampling = greedy(20);
  auto ref = context_->engine->generate({g});
  ASSERT_TRUE(ref[0].error.empty()) << ref[0].error;
  Answer a = post("/v1/chat/completions",
                  std::string(R"({"max_tokens":20,"temperature":0,"messages":)") + kChatMessages + "}");
  ASSERT_EQ(a.status, 200) << a.body;
  simdjson::dom::parser p;
  auto e = parse(p, a.body);
  EXPECT_EQ(str(e["id"]).rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(str(e["object"]), "chat.completion");
  auto c = e["choices"].at(0).value();
  EXPECT_EQ(str(c["message"]["role"]), "assistant");
  EXPECT_EQ(str(c["message"]["content"]), ref[0].samples[0].text);
  EXPECT_EQ(str(c["finish_reason"]), actors::finish_reason_name(ref[0].samples[0].finish));
  EXPECT_EQ(num(e["usage"]["prompt_tokens"]), ref[0].prompt_tokens);
  EXPECT_EQ(num(e["usage"]["completion_tokens"]), int64_t(ref[0].samples[0].token_ids.size()));
  // Content parts and max_completion_tokens give the same answer.
  Answer b = post("/v1/chat/completions", R"({"max_completion_tokens":20,"temperature":0,"messages":[
      {"role":"developer","content":[{"type":"text","text":"You are a concise assistant."}]},
      {"role":"user","content":[{"type":"text","text":"What is the capital of France?"}]}]})");
  ASSERT_EQ(b.status, 200) << b.body;
  simdjson::dom::parser q;
  EXPECT_EQ(str(parse(q, b.body)["choices"].at(0)["message"]["content"]), ref[0].samples[0].text);
}

TEST_F(OpenAiApiTest, StreamingConcatenationEqualsNonStreaming) {
  for (bool chat : {false, true}) {
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    const std::string input = chat ? std::string(R"("messages":)") + kChatMessages
                                   : std::string(R"("prompt":")") + kPrompt + "\"";
    const std::string common = "{" + input + R"(,"max_tokens":24,"temperature":0)";
    Answer whole = post(path, common + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    simdjson::dom::parser p;
    auto e = parse(p, whole.body);
    auto c = e["choices"].at(0).value();
    const std::string text = chat ? str(c["message"]["content"]) : str(c["text"]);
    Answer s = post(path, common + R"(,"stream":true,"stream_options":{"include_usage":true}})");
    Streamed st = read_stream(s, chat);
    EXPECT_EQ(st.text[0], text) << (chat ? "chat" : "completions");
    EXPECT_EQ(st.finish[0], str(c["finish_reason"]));
    EXPECT_EQ(st.prompt_tokens, num(e["usage"]["prompt_tokens"]));
    EXPECT_EQ(st.completion_tokens, num(e["usage"]["completion_tokens"]));
    // Without include_usage there is no usage chunk.
    Streamed plain = read_stream(post(path, common + R"(,"stream":true})"), chat);
    EXPECT_EQ(plain.text[0], text);
    EXPECT_EQ(plain.prompt_tokens, -1);
  }
}

TEST_F(OpenAiApiTest, TwoSamplesMatchTheEngineAndStream) {
  actors::SamplingOptions s;
  s.n = 2;
  s.seed = 7;
  s.temperature = 0.9f;
  s.max_tokens = 10;
  auto ref = context_->engine->generate({kPrompt}, s);
  ASSERT_EQ(ref[0].samples.size(), 2u);
  const std::string body = R"({"prompt":"The capital of France is","n":2,"seed":7,"temperature":0.9,"max_tokens":10)";
  Answer a = post("/v1/completions", body + "}");
  ASSERT_EQ(a.status, 200) << a.body;
  simdjson::dom::parser p;
  simdjson::dom::array choices = parse(p, a.body)["choices"].get_array();
  ASSERT_EQ(choices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(num(choices.at(i)["index"]), int64_t(i));
    EXPECT_EQ(str(choices.at(i)["text"]), ref[0].samples[i].text) << i;
  }
  Streamed st = read_stream(post("/v1/completions", body + R"(,"stream":true})"), false);
  EXPECT_EQ(st.text[0], ref[0].samples[0].text);
  EXPECT_EQ(st.text[1], ref[0].samples[1].text);
  EXPECT_EQ(st.finish.size(), 2u);
}

TEST_F(OpenAiApiTest, StopStringCutsAtFirstOccurrence) {
  auto ref = context_->engine->generate({kPrompt}, greedy(24));
  const std::string full = ref[0].samples[0].text;
  ASSERT_GT(full.size(), 12u) << full;
  const std::string stop = full.substr(8, 3);  // a piece of the greedy text
  const std::string expected = full.substr(0, full.find(stop));
  JsonWriter w;
  w.begin_object().key("prompt").value(kPrompt).key("max_tokens").value(int64_t(24));
  w.key("temperature").value(int64_t(0)).key("stop").begin_array().value("@@never@@").value(stop).end_array();
  w.end_object();
  Answer a = post("/v1/completions", w.str());
  ASSERT_EQ(a.status, 200) << a.body;
  simdjson::dom::parser p;
  auto c = parse(p, a.body)["choices"].at(0).value();
  EXPECT_EQ(str(c["text"]), expected) << "stop " << stop << " in " << full;
  EXPECT_EQ(str(c["finish_reason"]), "stop");
}

TEST_F(OpenAiApiTest, CompletionLogprobsShape) {
  Answer a = post("/v1/completions",
                  R"({"prompt":"The capital of France is","max_tokens":8,"temperature":0,)"
                  R"("ignore_eos":true,"logprobs":3})");
  ASSERT_EQ(a.status, 200) << a.body;
  simdjson::dom::parser p;
  auto e = parse(p, a.body);
  auto c = e["choices"].at(0).value();
  auto lp = c["logprobs"];
  simdjson::dom::array tokens = lp["tokens"].get_array(), values = lp["token_logprobs"].get_array(),
                       tops = lp["top_logprobs"].get_array(), offsets = lp["text_offset"].get_array();
  ASSERT_EQ(int64_t(tokens.size()), num(e["usage"]["completion_tokens"]));
  ASSERT_EQ(values.size(), tokens.size());
  ASSERT_EQ(tops.size(), tokens.size());
  ASSERT_EQ(offsets.size(), tokens.size());
  std::string joined;
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(num(offsets.at(i)), int64_t(joined.size()));
    joined += str(tokens.at(i));
    const double v = values.at(i).get_double();
    EXPECT_LE(v, 0.0);
    simdjson::dom::object top = tops.at(i).get_object();
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 3u);
    double best = -1e30;
    for (auto kv : top) best = std::max(best, double(kv.value.get_double()));
    EXPECT_NEAR(v, best, 1e-4) << "greedy picks the most likely token";
  }
  EXPECT_EQ(joined, str(c["text"]));
}

TEST_F(OpenAiApiTest, ChatLogprobsShape) {
  Answer a = post("/v1/chat/completions", std::string(R"({"max_tokens":6,"temperature":0,"logprobs":true,)") +
                                              R"("top_logprobs":2,"messages":)" + kChatMessages + "}");
  ASSERT_EQ(a.status, 200) << a.body;
  simdjson::dom::parser p;
  auto e = parse(p, a.body);
  simdjson::dom::array content = e["choices"].at(0)["logprobs"]["content"].get_array();
  ASSERT_EQ(int64_t(content.size()), num(e["usage"]["completion_tokens"]));
  for (auto item : content) {
    const std::string token = str(item["token"]);
    EXPECT_LE(double(item["logprob"].get_double()), 0.0);
    simdjson::dom::array bytes = item["bytes"].get_array();
    std::string from_bytes;
    for (auto b : bytes) from_bytes += char(num(b));
    EXPECT_EQ(from_bytes, token);
    simdjson::dom::array top = item["top_logprobs"].get_array();
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(str(top.at(0)["token"]), token);  // greedy: the best candidate
    EXPECT_GE(double(top.at(0)["logprob"].get_double()), double(top.at(1)["logprob"].get_double()));
  }
  // Without logprobs the field is null.
  Answer b = post("/v1/chat/completions", std::string(R"({"max_tokens":2,"messages":)") + kChatMessages + "}");
  simdjson::dom::parser q;
  EXPECT_TRUE(parse(q, b.body)["choices"].at(0)["logprobs"].is_null());
}

TEST_F(OpenAiApiTest, BeamSearchReturnsTheEngineBeams) {
  actors::SamplingOptions s = greedy(8);
  s.n = 2;
  s.beam_width = 2;
  auto ref = context_->engine->generate({kPrompt}, s);
  ASSERT_EQ(ref[0].samples.size(), 2u) << ref[0].error;
  const std::string body = R"({"prompt":"The capital of France is","n":2,"use_beam_search":true,"max_tokens":8)";
  Answer a = post("/v1/completions", body + "}");
  ASSERT_EQ(a.status, 200) << a.body;
  simdjson::dom::parser p;
  simdjson::dom::array choices = parse(p, a.body)["choices"].get_array();
  ASSERT_EQ(choices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(str(choices.at(i)["text"]), ref[0].samples[i].text);
  Streamed st = read_stream(post("/v1/completions", body + R"(,"stream":true})"), false);
  EXPECT_EQ(st.text[0], ref[0].samples[0].text);
  EXPECT_EQ(st.text[1], ref[0].samples[1].text);
}

TEST_F(OpenAiApiTest, IgnoredAndNeutralFieldsAreAccepted) {
  Answer a = post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi","name":"bob"}],
      "max_tokens":2,"user":"u1","metadata":{"a":"b"},"store":false,"parallel_tool_calls":true,
      "tools":[],"tool_choice":"none","response_format":{"type":"text"},"logit_bias":{},
      "top_k":-1,"min_p":0.0,"repetition_penalty":1.0,"seed":null,"stop":null,"audio":null})");
  EXPECT_EQ(a.status, 200) << a.body;
  Answer b = post("/v1/completions",
                  R"({"prompt":"hi","max_tokens":2,"echo":false,"suffix":null,"best_of":1,"user":"u"})");
  EXPECT_EQ(b.status, 200) << b.body;
}

TEST_F(OpenAiApiTest, CloseCancelsAndEveryBlockReturns) {
  for (bool stream : {true, false}) {
    auto r = std::make_shared<FakeResponder>();
    HttpRequest req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = std::string(R"({"prompt":"Once upon a time","max_tokens":400,"ignore_eos":true,"n":3,"stream":)") +
               (stream ? "true" : "false") + "}";
    ASSERT_TRUE(routes_->handle(req, r));
    if (stream) {
      ASSERT_TRUE(r->wait_events(4));  // tokens are flowing
    } else {
      for (int i = 0; i < 200 && context_->engine->stats().kv_blocks_used == 0; ++i) std::this_thread::sleep_for(10ms);
    }
    EXPECT_GT(context_->engine->stats().kv_blocks_used, 0);
    r->close();
    expect_engine_idle(*context_->engine);
    std::lock_guard<std::mutex> lock(r->mu_);
    EXPECT_FALSE(r->done_) << "nothing answered after the close";
    EXPECT_LT(r->events_.size(), 3 * 400u);
  }
}

// Its own engine: shutting it down with a stream in flight ends the stream
// with finish_reason "shutdown" and [DONE]; a request the stopped engine
// refuses is a 500 server_error.
TEST(OpenAiApiShutdown, StreamEndsWithShutdownThenEngineErrorsAre500) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  actors::EngineOptions o;
  o.model_path = path;
  o.backend = gpu::BackendKind::kCpu;
  o.kv_cache_bytes = 16 << 20;
  o.max_model_len = 512;
  auto engine = actors::Engine::start(o);
  ASSERT_TRUE(engine) << engine.error().message;
  auto ctx = std::make_shared<ServerContext>();
  ctx->engine = std::shared_ptr<actors::Engine>(std::move(engine).value());
  ctx->ready = true;
  auto routes = make_api_routes(ctx);
  auto r = std::make_shared<FakeResponder>();
  HttpRequest req{"POST", "/v1/chat/completions", {}, {},
                  R"({"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":400,)"
                  R"("ignore_eos":true,"stream":true})", "127.0.0.1"};
  ASSERT_TRUE(routes->handle(req, r));
  ASSERT_TRUE(r->wait_events(3));
  ctx->shutting_down = true;
  ctx->engine->shutdown();
  ASSERT_TRUE(r->wait_done());
  {
    std::lock_guard<std::mutex> lock(r->mu_);
    ASSERT_GE(r->events_.size(), 3u);
    EXPECT_EQ(r->events_.back(), "[DONE]");
    simdjson::dom::parser p;
    auto last = parse(p, r->events_[r->events_.size() - 2]);
    EXPECT_EQ(str(last["choices"].at(0)["finish_reason"]), "shutdown");
  }
  ctx->shutting_down = false;  // the engine is stopped but the route does not know
  auto r2 = std::make_shared<FakeResponder>();
  HttpRequest req2{"POST", "/v1/completions", {}, {}, R"({"prompt":"hi","max_tokens":2})", "127.0.0.1"};
  ASSERT_TRUE(routes->handle(req2, r2));
  ASSERT_TRUE(r2->wait_done());
  std::lock_guard<std::mutex> lock(r2->mu_);
  EXPECT_EQ(r2->status_, 500) << r2->body_;
  simdjson::dom::parser p;
  EXPECT_EQ(str(parse(p, r2->body_)["error"]["type"]), "server_error");
}

}  // namespace
}  // namespace pagoda::net
