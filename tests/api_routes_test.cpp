// The HTTP API handlers' error paths and non-generation routes, on the real
// SmolLM2 GGUF (skips without it), through the fake Responder of
// api_test_fixture.hpp:
//  - every malformed input gets its status and OpenAI error JSON (message,
//    type, param naming the field, code), and counts as rejected;
//  - a known path with another method is a 405 with Allow;
//  - /v1/models; /tokenize and /detokenize against HF tokenizer ids
//    (tests/data/logits/smollm2.json) and jinja2-rendered chat text
//    (tests/data/chat/smollm2.cases.json); /health (503 while loading or
//    shutting down); /metrics parsed by tests/metrics_check.hpp.
#include "api_test_fixture.hpp"
#include "metrics_check.hpp"
#include "net/json_writer.hpp"

namespace pagoda::net {
namespace {

class ApiRoutesTest : public ApiFixture {};

struct BadCase {
  const char* path;
  std::string body;
  int status;
  const char* param;    // nullptr: null
  const char* message;  // a substring of error.message
};

TEST_F(ApiRoutesTest, MalformedInputsGetOpenAiErrors) {
  const std::string c = "/v1/completions", h = "/v1/chat/completions";
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  std::string long_prompt = "[";
  for (int i = 0; i < 1100; ++i) long_prompt += i ? ",100" : "100";
  long_prompt += "]";
  const std::vector<BadCase> cases = {
      {"/v1/completions", "{", 400, nullptr, "not valid JSON"},
      {"/v1/completions", R"({"prompt":"hi"} xyz)", 400, nullptr, "not valid JSON"},
      {"/v1/completions", "{\"prompt\":\"\xff\"}", 400, nullptr, "not valid JSON"},
      {"/v1/completions", "[1,2]", 400, nullptr, "must be a JSON object"},
      {"/v1/completions", "{}", 400, "prompt", "prompt is required"},
      {"/v1/completions", R"({"prompt":"hi","foo":1})", 400, "foo", "unknown field 'foo'"},
      {"/v1/completions", R"({"prompt":"hi","max_tokens":"10"})", 400, "max_tokens", "must be an integer"},
      {"/v1/completions", R"({"prompt":"hi","temperature":"hot"})", 400, "temperature", "must be a number"},
      {"/v1/completions", R"({"prompt":"hi","stream":"yes"})", 400, "stream", "must be a boolean"},
      {"/v1/completions", R"({"prompt":["a","b"]})", 400, "prompt", "batched prompts"},
      {"/v1/completions", R"({"prompt":[[1],[2]]})", 400, "prompt", "batched prompts"},
      {"/v1/completions", R"({"prompt":123})", 400, "prompt", "prompt must be"},
      {"/v1/completions", R"({"prompt":[]})", 400, "prompt", "must not be empty"},
      {"/v1/completions", R"({"prompt":[1,-5]})", 400, "prompt", "non-negative"},
      {"/v1/completions", R"({"prompt":[99999999]})", 400, "prompt", "outside the vocabulary"},
      {"/v1/completions", R"({"prompt":"hi","n":0})", 400, "n", "n must be in [1, 16]"},
      {"/v1/completions", R"({"prompt":"hi","n":100})", 400, "n", "n must be in [1, 16]"},
      {"/v1/completions", R"({"prompt":"hi","max_tokens":0})", 400, "max_tokens", "max_tokens must be >= 1"},
      {"/v1/completions", R"({"prompt":"hi","max_tokens":100000})", 400, "prompt", "maximum context length"},
      {"/v1/completions", R"({"prompt":)" + long_prompt + "}", 400, "prompt", "maximum context length"},
      {"/v1/completions", R"({"prompt":"hi","model":"gpt-4"})", 404, "model", "does not exist"},
      {"/v1/completions", R"({"prompt":"hi","echo":true})", 400, "echo", "not supported"},
      {"/v1/completions", R"({"prompt":"hi","suffix":"x"})", 400, "suffix", "not supported"},
      {"/v1/completions", R"({"prompt":"hi","best_of":3})", 400, "best_of", "not supported"},
      {"/v1/completions", R"({"prompt":"hi","logit_bias":{"5":101}})", 400, "logit_bias", "[-100, 100]"},
      {"/v1/completions", R"({"prompt":"hi","logit_bias":{"x":1}})", 400, "logit_bias", "token ids"},
      {"/v1/completions", R"({"prompt":"hi","structured_outputs":{"choice":[]}})", 400, "structured_outputs",
       "choice list is empty"},
      {"/v1/completions", R"({"prompt":"hi","guided_json":"{bad"})", 400, "guided_json", "not valid JSON"},
      {"/v1/completions", R"({"prompt":"hi","guided_regex":"a","guided_choice":["b"]})", 400, "guided_choice",
       "conflicts"},
      {"/v1/completions", R"({"prompt":"hi","logprobs":50})", 400, "logprobs", "logprobs must be in"},
      {"/v1/completions", R"({"prompt":"hi","stream_options":{"include_usage":true}})", 400, "stream_options",
       "only allowed when stream"},
      {"/v1/completions", R"({"prompt":"hi","stream":true,"stream_options":{"x":1}})", 400, "stream_options.x",
       "unknown field"},
      {"/v1/completions", R"({"prompt":"hi","use_beam_search":true,"logprobs":1})", 400, "logprobs", "beam search"},
      {"/v1/completions", R"({"prompt":"hi","messages":[]})", 400, "messages", "unknown field 'messages'"},
      {"/v1/chat/completions", R"({"prompt":"hi"})", 400, "prompt", "unknown field 'prompt'"},
      {"/v1/chat/completions", "{}", 400, "messages", "messages is required"},
      {"/v1/chat/completions", R"({"messages":[]})", 400, "messages", "must not be empty"},
      {"/v1/chat/completions", R"({"messages":"hi"})", 400, "messages", "must be an array"},
      {"/v1/chat/completions", R"({"messages":[5]})", 400, "messages", "must be an object"},
      {"/v1/chat/completions", R"({"messages":[{"content":"x"}]})", 400, "messages[0].role", "is required"},
      {"/v1/chat/completions", R"({"messages":[{"role":"robot","content":"x"}]})", 400, "messages[0].role",
       "must be one of"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400,
       "messages[0].content", "only {\"type\":\"text\"}"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user"}]})", 400, "messages[0].content",
       "is required for role 'user'"},
      {"/v1/chat/completions", R"({"messages":[{"role":"system","content":null},{"role":"user","content":"x"}]})",
       400, "messages[0].content", "is required for role 'system'"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":5}]})", 400, "messages[0].content",
       "must be a string"},
      {"/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"x","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]})",
       400, "messages[0].tool_calls", "only allowed on assistant messages"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x","tools":[]}]})", 400,
       "messages[0].tools", "unknown field"},
      {"/v1/chat/completions", "{" + msgs + R"(,"logprobs":3})", 400, "logprobs", "must be a boolean"},
      {"/v1/chat/completions", "{" + msgs + R"(,"top_logprobs":2})", 400, "top_logprobs", "requires logprobs"},
      {"/v1/chat/completions", "{" + msgs + R"(,"top_logprobs":21,"logprobs":true})", 400, "top_logprobs",
       "must be in [0, 20]"},
      {"/v1/chat/completions", "{" + msgs + R"(,"tools":[{"type":"function"}]})", 400, "tools[0].function",
       "is required"},
      {"/v1/chat/completions", "{" + msgs + R"(,"response_format":{"type":"xml"}})", 400,
       "response_format", "response_format.type must be"},
      {"/v1/chat/completions", "{" + msgs + R"(,"response_format":{"type":"json_schema"}})", 400,
       "response_format", "json_schema must be an object"},
      {"/v1/chat/completions", "{" + msgs + R"(,"max_completion_tokens":0})", 400, "max_completion_tokens",
       "must be in"},
      {"/tokenize", R"({"text":"x"})", 400, "text", "unknown field"},
      {"/tokenize", R"({})", 400, "prompt", "required"},
      {"/detokenize", R"({"tokens":[1,"a"]})", 400, "tokens", "array of integers"},
      {"/detokenize", R"({"tokens":[99999999]})", 400, "tokens", "outside the vocabulary"},
  };
  const uint64_t rejected_before = context_->requests_rejected.load();
  for (const BadCase& bc : cases) {
    SCOPED_TRACE(std::string(bc.path) + " " + bc.body.substr(0, 120));
    Answer a = post(bc.path, bc.body);
    EXPECT_EQ(a.status, bc.status) << a.body;
    EXPECT_FALSE(a.streaming);
    simdjson::dom::parser p;
    simdjson::dom::element e = parse(p, a.body);
    simdjson::dom::object err;
    ASSERT_EQ(e["error"].get_object().get(err), simdjson::SUCCESS) << a.body;
    EXPECT_NE(str(err["message"]).find(bc.message), std::string::npos) << a.body;
    EXPECT_EQ(str(err["type"]), "invalid_request_error");
    if (bc.param) {
      EXPECT_EQ(str(err["param"]), bc.param) << a.body;
    } else {
      EXPECT_TRUE(err["param"].is_null()) << a.body;
    }
    simdjson::dom::element code;
    EXPECT_EQ(err["code"].get(code), simdjson::SUCCESS) << "code present (null or string)";
  }
  EXPECT_EQ(context_->requests_rejected.load() - rejected_before, cases.size());
  // The context-length errors say so in `code`, as OpenAI's do.
  simdjson::dom::parser p;
  Answer a = post(c, R"({"prompt":"hi","max_tokens":100000})");
  EXPECT_EQ(str(parse(p, a.body)["error"]["code"]), "context_length_exceeded");
  // A known path with the wrong method: 405 and Allow.
  Answer m = call("GET", c);
  EXPECT_EQ(m.status, 405);
  ASSERT_EQ(m.extra.size(), 1u);
  EXPECT_EQ(m.extra[0].first, "Allow");
  EXPECT_EQ(m.extra[0].second, "POST");
  EXPECT_EQ(call("POST", "/health").status, 405);
  // Other paths are not ours.
  auto r = std::make_shared<FakeResponder>();
  HttpRequest other;
  other.method = "GET";
  other.path = "/index.html";
  EXPECT_FALSE(routes_->handle(other, r));
  (void)h;
}

TEST_F(ApiRoutesTest, ModelsTokenizeDetokenize) {
  simdjson::dom::parser p;
  Answer m = call("GET", "/v1/models");
  ASSERT_EQ(m.status, 200);
  auto e = parse(p, m.body);
  EXPECT_EQ(str(e["object"]), "list");
  auto model = e["data"].at(0).value();
  EXPECT_EQ(str(model["id"]), context_->model_id());
  EXPECT_EQ(str(model["object"]), "model");
  EXPECT_EQ(str(model["owned_by"]), "pagoda");
  EXPECT_EQ(num(model["max_model_len"]), 1024);
  EXPECT_EQ(call("GET", "/v1/models/" + context_->model_id()).status, 200);
  EXPECT_EQ(call("GET", "/v1/models/gpt-4").status, 404);

  // HF transformers ids of the prompt (tests/data/logits/smollm2.json).
  simdjson::dom::parser gp;
  auto golden = gp.load(std::string(PAGODA_TEST_DATA_DIR) + "/logits/smollm2.json")["prompts"].at(0).value();
  std::string ids_json = "[";
  for (auto id : golden["ids"].get_array()) ids_json += (ids_json.size() > 1 ? "," : "") + std::to_string(num(id));
  ids_json += "]";
  Answer t = post("/tokenize", R"({"prompt":)" + json_string(str(golden["prompt"])) + "}");
  ASSERT_EQ(t.status, 200) << t.body;
  simdjson::dom::parser tp;
  auto te = parse(tp, t.body);
  EXPECT_EQ(num(te["count"]), int64_t(golden["ids"].get_array().size()));
  EXPECT_EQ(num(te["max_model_len"]), 1024);
  simdjson::dom::element tokens = te["tokens"];
  EXPECT_EQ(simdjson::to_string(tokens), ids_json);
  Answer d = post("/detokenize", R"({"tokens":)" + ids_json + "}");
  ASSERT_EQ(d.status, 200) << d.body;
  simdjson::dom::parser dp;
  EXPECT_EQ(str(parse(dp, d.body)["prompt"]), str(golden["prompt"]));

  // Messages go through the chat template: the same ids as the jinja2
  // rendering (tests/data/chat/smollm2.cases.json, case system_user).
  simdjson::dom::parser cp;
  auto cases = cp.load(std::string(PAGODA_TEST_DATA_DIR) + "/chat/smollm2.cases.json")["cases"].get_array();
  bool found = false;
  for (auto cs : cases) {
    if (str(cs["name"]) != "system_user") continue;
    found = true;
    simdjson::dom::element messages = cs["messages"];
    Answer a = post("/tokenize", R"({"messages":)" + simdjson::to_string(messages) + "}");
    Answer b = post("/tokenize", R"({"add_special_tokens":false,"prompt":)" + json_string(str(cs["expected"])) + "}");
    ASSERT_EQ(a.status, 200) << a.body;
    ASSERT_EQ(b.status, 200) << b.body;
    EXPECT_EQ(a.body, b.body);
  }
  EXPECT_TRUE(found) << "case system_user in smollm2.cases.json";
}

TEST_F(ApiRoutesTest, HealthAndMetrics) {
  Answer h = call("GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, R"({"status":"serving","executor_restarts":0,"block_manager_restarts":0})");
  context_->ready = false;
  EXPECT_EQ(call("GET", "/health").status, 503);
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"hi"})").status, 503);
  context_->ready = true;
  context_->shutting_down = true;
  EXPECT_EQ(call("GET", "/health").status, 503);
  context_->shutting_down = false;

  ASSERT_EQ(post("/v1/completions", R"({"prompt":"hi","max_tokens":3})").status, 200);
  expect_engine_idle(*context_->engine);
  context_->connections = 2;
  Answer m = call("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type.rfind("text/plain; version=0.0.4", 0), 0u);
  test::MetricsCheck c = test::check_metrics(m.body);
  EXPECT_TRUE(c.errors.empty()) << c.errors << m.body;
  const actors::EngineStats s = context_->engine->stats();
  const std::string l = "{model_name=\"" + context_->model_id() + "\"}";
  EXPECT_EQ(c.values.at("pagoda:kv_blocks_total" + l), s.kv_blocks_total);
  EXPECT_EQ(c.values.at("pagoda:kv_blocks_used" + l), 0);
  EXPECT_EQ(c.values.at("pagoda:kv_cache_usage_perc" + l), 0.0);
  EXPECT_EQ(c.values.at("pagoda:connections" + l), 2);
  EXPECT_GE(c.values.at("pagoda:generation_tokens_total" + l), 3);
  EXPECT_GE(c.values.at("pagoda:time_to_first_token_seconds_count" + l), 1);
  EXPECT_EQ(c.values.at("pagoda:time_to_first_token_seconds_count" + l), double(s.ttft.count));
  EXPECT_EQ(c.values.at("pagoda:request_queue_time_seconds_count" + l), double(s.queue.count));
  EXPECT_GE(s.queue.count, 1u);
  context_->connections = 0;
}

}  // namespace
}  // namespace pagoda::net
