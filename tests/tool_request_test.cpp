// Tool calling's request side and answer shapes: tools / tool_choice /
// parallel_tool_calls parsing and their 400s (net/tool_request.hpp), the
// structural tags built for each format and choice (net/tool_grammar.hpp),
// the fallback prompt rewrite and constraint rules (net/tool_prompt.hpp),
// and the JSON of answers with tool calls (net/openai_response.hpp,
// net/tool_call_stream.hpp).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>

#include "net/openai_request.hpp"
#include "net/openai_response.hpp"
#include "net/tool_call_stream.hpp"
#include "net/tool_grammar.hpp"
#include "net/tool_prompt.hpp"

namespace pagoda::net {
namespace {

const std::string kTool =
    R"({"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}})";

std::string chat(const std::string& extra) {
  return R"({"messages":[{"role":"user","content":"hi"}])" + (extra.empty() ? "" : "," + extra) + "}";
}

OpenAiRequest parse_ok(const std::string& body) {
  ParsedRequest p = parse_openai_request(ApiKind::chat, body, "m");
  EXPECT_FALSE(p.error) << body << ": " << (p.error ? p.error->message : "");
  return p.request;
}

ApiError parse_error(const std::string& body) {
  ParsedRequest p = parse_openai_request(ApiKind::chat, body, "m");
  EXPECT_TRUE(p.error) << body;
  return p.error.value_or(ApiError{});
}

TEST(ToolRequest, ReadsToolsAndChoices) {
  OpenAiRequest r = parse_ok(chat(R"("tools":[)" + kTool + "]"));
  ASSERT_EQ(r.tools.tools.size(), 1u);
  EXPECT_EQ(r.tools.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools.tools[0].description, "d");
  EXPECT_EQ(r.tools.tools[0].parameters, R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  EXPECT_EQ(r.tools.choice, ToolChoice::automatic);
  EXPECT_TRUE(r.tools.parallel);
  EXPECT_TRUE(r.tools.active());

  r = parse_ok(chat(R"("tools":[)" + kTool + R"(],"tool_choice":"required","parallel_tool_calls":false)"));
  EXPECT_EQ(r.tools.choice, ToolChoice::required);
  EXPECT_FALSE(r.tools.parallel);
  r = parse_ok(chat(R"("tools":[)" + kTool + R"(],"tool_choice":{"type":"function","function":{"name":"get_weather"}})"));
  EXPECT_EQ(r.tools.choice, ToolChoice::named);
  EXPECT_EQ(r.tools.named, "get_weather");
  r = parse_ok(chat(R"("tools":[)" + kTool + R"(],"tool_choice":"none")"));
  EXPECT_FALSE(r.tools.active());
  r = parse_ok(chat(R"("tools":[],"tool_choice":"none")"));
  EXPECT_FALSE(r.tools.active());
  r = parse_ok(chat(""));
  EXPECT_EQ(r.tools.choice, ToolChoice::none);
}

TEST(ToolRequest, ReadsLegacyFunctions) {
  OpenAiRequest r = parse_ok(chat(R"("functions":[{"name":"f","parameters":{"type":"object"}}],"function_call":{"name":"f"})"));
  ASSERT_EQ(r.tools.tools.size(), 1u);
  EXPECT_EQ(r.tools.choice, ToolChoice::named);
  EXPECT_EQ(r.tools.named, "f");
  r = parse_ok(chat(R"("functions":[{"name":"f"}],"function_call":"auto")"));
  EXPECT_EQ(r.tools.choice, ToolChoice::automatic);
}

TEST(ToolRequest, BadToolsAre400sNamingTheField) {
  struct Case {
    std::string extra, param, says;
  };
  const Case cases[] = {
      {R"("tool_choice":"required")", "tool_choice", "requires tools"},
      {R"("tools":[)" + kTool + R"(],"tool_choice":{"type":"function","function":{"name":"nope"}})", "tool_choice",
       "'nope'"},
      {R"("tools":[{"type":"function","function":{"description":"x"}}])", "tools[0].function.name", "required"},
      {R"("tools":[{"type":"function","function":{"name":"a b"}}])", "tools[0].function.name", "1-64"},
      {R"("tools":[{"type":"function","function":{"name":"a","parameters":{"type":"array"}}}])",
       "tools[0].function.parameters", "object"},
      {R"("tools":[{"type":"function","function":{"name":"a","parameters":"x"}}])", "tools[0].function.parameters",
       "JSON Schema object"},
      {R"("tools":[{"type":"retrieval"}])", "tools[0].type", "function"},
      {R"("tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}])",
       "tools[1].name", "second tool"},
      {R"("tools":{})", "tools", "array"},
      {R"("tools":[)" + kTool + R"(],"tool_choice":"maybe")", "tool_choice", "'maybe'"},
      {R"("tools":[)" + kTool + R"(],"parallel_tool_calls":1)", "parallel_tool_calls", "boolean"},
  };
  for (const Case& c : cases) {
    const ApiError e = parse_error(chat(c.extra));
    EXPECT_EQ(e.status, 400) << c.extra;
    EXPECT_EQ(e.param, c.param) << c.extra << ": " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
  }
}

TEST(ToolRequest, ReadsToolMessages) {
  OpenAiRequest r = parse_ok(R"({"messages":[{"role":"user","content":"q"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": [1, 2]}"}},
                                                      {"id":"call_2","type":"function","function":{"name":"g","arguments":"oops"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"42"}]})");
  ASSERT_EQ(r.generate.messages.size(), 3u);
  EXPECT_EQ(r.generate.messages[1].tool_calls_json,
            R"([{"id":"call_1","type":"function","function":{"name":"f","arguments":{"a":[1,2]}}},)"
            R"({"id":"call_2","type":"function","function":{"name":"g","arguments":"oops"}}])");
  EXPECT_EQ(r.generate.messages[2].role, "tool");
  EXPECT_EQ(r.generate.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(r.generate.messages[2].content, "42");
  const ApiError e = parse_error(
      R"({"messages":[{"role":"assistant","tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":{}}}]}]})");
  EXPECT_EQ(e.param, "messages[0].tool_calls[0].function.arguments");
}

// The structural tag of one request, parsed back.
simdjson::dom::element tag_of(simdjson::dom::parser& parser, ToolFormat format, const std::string& extra) {
  static std::string doc;
  OpenAiRequest r = parse_ok(chat(R"("tools":[)" + kTool + R"(,{"type":"function","function":{"name":"now"}}])" +
                                  (extra.empty() ? "" : "," + extra)));
  doc = tool_structural_tag(format, r.tools);
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(doc).get(root), simdjson::SUCCESS) << doc;
  EXPECT_EQ(std::string_view(root["type"].get_string().value()), "structural_tag");
  return root["format"].value();
}

std::string_view s(simdjson::simdjson_result<simdjson::dom::element> e) { return e.get_string().value(); }

TEST(ToolGrammar, HermesAutoIsTriggeredByTheOpeningTag) {
  simdjson::dom::parser p;
  simdjson::dom::element f = tag_of(p, ToolFormat::hermes, "");
  EXPECT_EQ(s(f["type"]), "triggered_tags");
  EXPECT_EQ(s(f["triggers"].at(0)), "<tool_call>");
  EXPECT_FALSE(f["at_least_one"].get_bool().value());
  EXPECT_FALSE(f["stop_after_first"].get_bool().value());
  simdjson::dom::array tags = f["tags"].get_array().value();
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_EQ(s(tags.at(0)["begin"]), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(s(tags.at(0)["end"]), "}\n</tool_call>");
  EXPECT_EQ(s(tags.at(0)["content"]["type"]), "json_schema");
  EXPECT_EQ(simdjson::minify(tags.at(0)["content"]["json_schema"].value()),
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  EXPECT_EQ(simdjson::minify(tags.at(1)["content"]["json_schema"].value()), R"({"type":"object"})");
}

TEST(ToolGrammar, RequiredAndNamedMustCall) {
  simdjson::dom::parser p;
  simdjson::dom::element f = tag_of(p, ToolFormat::hermes, R"("tool_choice":"required","parallel_tool_calls":false)");
  EXPECT_EQ(s(f["type"]), "tags_with_separator");
  EXPECT_TRUE(f["at_least_one"].get_bool().value());
  EXPECT_TRUE(f["stop_after_first"].get_bool().value());
  EXPECT_EQ(f["tags"].get_array().value().size(), 2u);
  simdjson::dom::parser p2;
  f = tag_of(p2, ToolFormat::llama3_json, R"("tool_choice":{"type":"function","function":{"name":"now"}})");
  EXPECT_EQ(s(f["type"]), "tags_with_separator");
  EXPECT_EQ(s(f["separator"]), "; ");
  ASSERT_EQ(f["tags"].get_array().value().size(), 1u);
  EXPECT_EQ(s(f["tags"].at(0)["begin"]), "{\"name\": \"now\", \"parameters\": ");
  EXPECT_EQ(s(f["tags"].at(0)["end"]), "}");
}

TEST(ToolGrammar, MistralWrapsTheCallList) {
  simdjson::dom::parser p;
  simdjson::dom::element f = tag_of(p, ToolFormat::mistral, R"("tool_choice":"required")");
  EXPECT_EQ(s(f["type"]), "tag");
  EXPECT_EQ(s(f["begin"]), "[TOOL_CALLS][");
  EXPECT_EQ(s(f["end"]), "]");
  EXPECT_EQ(s(f["content"]["separator"]), ", ");
  simdjson::dom::parser p2;
  f = tag_of(p2, ToolFormat::mistral, "");
  EXPECT_EQ(s(f["type"]), "triggered_tags");
  EXPECT_EQ(s(f["triggers"].at(0)), "[TOOL_CALLS]");
  EXPECT_EQ(s(f["tags"].at(0)["begin"]), "[TOOL_CALLS][");
}

TEST(ToolPrompt, FallbackWritesToolsIntoTheSystemPrompt) {
  OpenAiRequest r = parse_ok(R"({"messages":[{"role":"user","content":"q"},
    {"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
    {"role":"tool","tool_call_id":"c","content":"21"}],"tools":[)" + kTool + "]}");
  ToolPlan plan;
  ASSERT_FALSE(prepare_tools(ToolTemplateInfo{ToolFormat::llama3_json, false}, r, plan));
  EXPECT_TRUE(plan.parse);
  EXPECT_EQ(plan.format, ToolFormat::hermes);  // the fallback's own format
  EXPECT_TRUE(r.generate.tools_json.empty());
  const auto& m = r.generate.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_NE(m[0].content.find("<tools>\n{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":{"),
            std::string::npos) << m[0].content;
  EXPECT_EQ(m[2].content, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>");
  EXPECT_TRUE(m[2].tool_calls_json.empty());
  EXPECT_EQ(m[3].role, "user");
  EXPECT_EQ(m[3].content, "<tool_response>\n21\n</tool_response>");
  EXPECT_EQ(r.generate.sampling.constraint.kind, actors::OutputConstraint::Kind::structural_tag);
}

TEST(ToolPrompt, NativeTemplatesGetTheToolsAndConstraintRules) {
  OpenAiRequest r = parse_ok(chat(R"("tools":[)" + kTool + R"(],"tool_choice":"required")"));
  ToolPlan plan;
  ASSERT_FALSE(prepare_tools(ToolTemplateInfo{ToolFormat::llama3_json, true}, r, plan));
  EXPECT_EQ(plan.format, ToolFormat::llama3_json);
  EXPECT_EQ(r.generate.tools_json, "[" + kTool + "]");
  EXPECT_EQ(r.generate.sampling.constraint.spec, tool_structural_tag(ToolFormat::llama3_json, r.tools));
  // required + another constraint: 400; auto + another: the other one wins.
  OpenAiRequest both = parse_ok(chat(R"("tools":[)" + kTool + R"(],"tool_choice":"required")"));
  both.generate.sampling.constraint.kind = actors::OutputConstraint::Kind::json_object;
  auto e = prepare_tools(ToolTemplateInfo{}, both, plan);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tool_choice");
  OpenAiRequest lazy = parse_ok(chat(R"("tools":[)" + kTool + "]"));
  lazy.generate.sampling.constraint.kind = actors::OutputConstraint::Kind::json_object;
  EXPECT_FALSE(prepare_tools(ToolTemplateInfo{}, lazy, plan));
  EXPECT_EQ(lazy.generate.sampling.constraint.kind, actors::OutputConstraint::Kind::json_object);
  OpenAiRequest none = parse_ok(chat(R"("tools":[)" + kTool + R"(],"tool_choice":"none")"));
  EXPECT_FALSE(prepare_tools(ToolTemplateInfo{ToolFormat::hermes, true}, none, plan));
  EXPECT_FALSE(plan.parse);
  EXPECT_TRUE(none.generate.tools_json.empty());
  EXPECT_FALSE(none.generate.sampling.constraint.active());
}

TEST(ToolAnswer, WholeAnswerShapes) {
  ResponseMeta meta{ApiKind::chat, "chatcmpl-x", 1, "m"};
  ChoiceOut c;
  c.text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  c.finish_reason = "stop";
  ToolCallStream::parse_whole(ToolFormat::hermes, c);
  ASSERT_EQ(c.tool_calls.size(), 1u);
  EXPECT_EQ(c.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(c.tool_calls[0].id.size(), 29u);
  c.tool_calls[0].id = "call_1";
  EXPECT_EQ(response_body(meta, {c}, Usage{}),
            R"({"id":"chatcmpl-x","object":"chat.completion","created":1,"model":"m","system_fingerprint":null,)"
            R"("choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1",)"
            R"("type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]},"logprobs":null,)"
            R"("finish_reason":"tool_calls"}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}})");
  ChoiceOut cut;
  cut.text = "Hi <tool_call>{\"name\": \"f\", \"arguments\": {";
  cut.finish_reason = "length";
  ToolCallStream::parse_whole(ToolFormat::hermes, cut);
  EXPECT_EQ(cut.text, "Hi ");
  EXPECT_FALSE(cut.content_null);
  EXPECT_EQ(cut.finish_reason, "length");
}

TEST(ToolAnswer, StreamedDeltaShapes) {
  ResponseMeta meta{ApiKind::chat, "chatcmpl-x", 1, "m"};
  ToolCallStream stream(ToolFormat::mistral);
  std::vector<ChoiceOut> d = stream.feed("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\"");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].tool_calls[0].id.size(), 9u);  // what Mistral templates accept back
  d[0].tool_calls[0].id = "abcdefghi";
  EXPECT_EQ(chunk_body(meta, d[0], false),
            R"({"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,)"
            R"("choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"abcdefghi","type":"function",)"
            R"("function":{"name":"f","arguments":""}}]},"logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(chunk_body(meta, d[1], false),
            R"({"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,)"
            R"("choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]},)"
            R"("logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(ToolCallStream::finish_reason(stream.calls(), "stop"), "tool_calls");
  EXPECT_EQ(ToolCallStream::finish_reason(0, "stop"), "stop");
}

}  // namespace
}  // namespace pagoda::net
