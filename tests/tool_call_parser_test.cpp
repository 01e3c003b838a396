// ToolCallParser and ToolCallScanner (net/tool_call_parser.hpp): every
// format on hand-written answers, malformed input, and the same answers cut
// at every split point (and fed a character at a time): the events must add
// up to the same content and calls however the text arrives.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/tool_call_parser.hpp"

namespace pagoda::net {
namespace {

using Kind = ToolCallEvent::Kind;

struct Call {
  std::string name, arguments;
  bool operator==(const Call&) const = default;
};

struct Parsed {
  std::string content;
  std::vector<Call> calls;
  bool operator==(const Parsed&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Parsed& p) {
  os << "content=[" << p.content << "] calls=";
  for (const Call& c : p.calls) os << "{" << c.name << ": " << c.arguments << "}";
  return os;
}

// Adds up events, checking the stream rules: a call's arguments come after
// its call_begin, indices count up from 0.
void collect(const std::vector<ToolCallEvent>& events, Parsed& p) {
  for (const ToolCallEvent& e : events) {
    if (e.kind == Kind::content) {
      p.content += e.text;
      continue;
    }
    if (e.kind == Kind::call_begin) {
      ASSERT_EQ(e.index, int32_t(p.calls.size()));
      p.calls.push_back(Call{e.text, ""});
      continue;
    }
    ASSERT_EQ(e.index + 1, int32_t(p.calls.size())) << "arguments of a call that is not the latest";
    p.calls.back().arguments += e.text;
  }
}

Parsed parse_pieces(ToolFormat format, const std::vector<std::string>& pieces) {
  ToolCallParser parser(format);
  Parsed p;
  for (const std::string& piece : pieces) {
    std::vector<ToolCallEvent> events;
    parser.feed(piece, events);
    collect(events, p);
  }
  std::vector<ToolCallEvent> events;
  parser.finish(events);
  collect(events, p);
  EXPECT_EQ(parser.calls(), int32_t(p.calls.size()));
  return p;
}

Parsed parse(ToolFormat format, const std::string& text) { return parse_pieces(format, {text}); }

// The whole text, every two-piece split, and one character at a time agree.
void expect_parse(ToolFormat format, const std::string& text, const Parsed& want) {
  EXPECT_EQ(parse(format, text), want) << text;
  for (size_t i = 0; i <= text.size(); ++i) {
    EXPECT_EQ(parse_pieces(format, {text.substr(0, i), text.substr(i)}), want) << "split at " << i << ": " << text;
  }
  std::vector<std::string> chars;
  for (char c : text) chars.emplace_back(1, c);
  EXPECT_EQ(parse_pieces(format, chars), want) << "per character: " << text;
}

const std::string kWeather = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}})";

TEST(ToolCallParser, HermesPlainTextPassesThrough) {
  expect_parse(ToolFormat::hermes, "Hello, <b>world</b> < tool", Parsed{"Hello, <b>world</b> < tool", {}});
}

TEST(ToolCallParser, HermesOneCall) {
  expect_parse(ToolFormat::hermes, "<tool_call>\n" + kWeather + "\n</tool_call>",
               Parsed{"", {{"get_weather", R"({"city": "Paris", "unit": "c"})"}}});
}

TEST(ToolCallParser, HermesTextThenTwoCalls) {
  const std::string text = "Let me check.\n<tool_call>\n" + kWeather +
                           "\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n";
  expect_parse(ToolFormat::hermes, text,
               Parsed{"Let me check.\n", {{"get_weather", R"({"city": "Paris", "unit": "c"})"}, {"now", "{}"}}});
}

TEST(ToolCallParser, HermesTextAfterACallIsContent) {
  expect_parse(ToolFormat::hermes, "<tool_call>{\"name\": \"f\"}</tool_call>\n\nDone.",
               Parsed{"\n\nDone.", {{"f", "{}"}}});
}

TEST(ToolCallParser, ArgumentsBeforeNameAndExtraKeys) {
  expect_parse(ToolFormat::hermes,
               R"(<tool_call>{"type": "function", "arguments": {"a": [1, {"b": "}"}]}, "name": "f", "id": 7}</tool_call>)",
               Parsed{"", {{"f", R"({"a": [1, {"b": "}"}]})"}}});
}

TEST(ToolCallParser, StringsWithEscapesAndBraces) {
  expect_parse(ToolFormat::hermes,
               R"(<tool_call>{"name": "say\u00e9\"x", "arguments": {"s": "a\"}]{b\\", "n": -1.5e3, "t": true}}</tool_call>)",
               Parsed{"", {{"say\xc3\xa9\"x", R"({"s": "a\"}]{b\\", "n": -1.5e3, "t": true})"}}});
}

TEST(ToolCallParser, StringValuedArgumentsAreDecoded) {
  expect_parse(ToolFormat::hermes, R"(<tool_call>{"name": "f", "arguments": "{\"a\": \"x\\ny\"}"}</tool_call>)",
               Parsed{"", {{"f", "{\"a\": \"x\\ny\"}"}}});
}

TEST(ToolCallParser, HermesMalformedBodiesAreContent) {
  for (const std::string text : {"<tool_call>not json</tool_call>", "<tool_call>{\"foo\": 1}</tool_call>",
                                 "<tool_call>{\"name\": 3}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
                                 "<tool_call>{\"name\": \"\"}</tool_call>", "x <tool_call>{\"name\"]"}) {
    expect_parse(ToolFormat::hermes, text, Parsed{text, {}});
  }
}

TEST(ToolCallParser, HermesMarkerAfterABrokenOne) {
  expect_parse(ToolFormat::hermes, "<tool_call><tool_call>{\"name\": \"f\"}</tool_call>",
               Parsed{"<tool_call>", {{"f", "{}"}}});
}

TEST(ToolCallParser, HeldTextComesOutAtTheEnd) {
  expect_parse(ToolFormat::hermes, "a <tool_ca", Parsed{"a <tool_ca", {}});
  expect_parse(ToolFormat::hermes, "<tool_call>{\"na", Parsed{"<tool_call>{\"na", {}});
}

TEST(ToolCallParser, ACutCallKeepsItsArgumentsSoFar) {
  expect_parse(ToolFormat::hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2",
               Parsed{"", {{"f", "{\"a\": [1, 2"}}});
  expect_parse(ToolFormat::hermes, "<tool_call>{\"name\": \"f\"}\n</tool_", Parsed{"", {{"f", "{}"}}});
}

TEST(ToolCallParser, ACommittedCallBrokenLaterEndsIt) {
  expect_parse(ToolFormat::hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1]} tail",
               Parsed{"]} tail", {{"f", "{\"a\": 1"}}});
}

TEST(ToolCallParser, Llama3Calls) {
  expect_parse(ToolFormat::llama3_json, R"({"name": "f", "parameters": {"x": 1}})", Parsed{"", {{"f", "{\"x\": 1}"}}});
  expect_parse(ToolFormat::llama3_json, " \n<|python_tag|>{\"name\": \"f\", \"parameters\": {}}",
               Parsed{"", {{"f", "{}"}}});
  expect_parse(ToolFormat::llama3_json, R"({"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {"y": "z"}})",
               Parsed{"", {{"f", "{\"x\": 1}"}, {"g", "{\"y\": \"z\"}"}}});
}

TEST(ToolCallParser, Llama3TextAndJsonContent) {
  expect_parse(ToolFormat::llama3_json, "Hello {x} <tool_call>", Parsed{"Hello {x} <tool_call>", {}});
  expect_parse(ToolFormat::llama3_json, "  {\"answer\": 42}", Parsed{"  {\"answer\": 42}", {}});
  expect_parse(ToolFormat::llama3_json, "<|python", Parsed{"<|python", {}});
  expect_parse(ToolFormat::llama3_json, "{\"name\": \"f\"} then text", Parsed{"then text", {{"f", "{}"}}});
}

TEST(ToolCallParser, MistralCalls) {
  const Parsed two{"", {{"f", "{\"a\": 1}"}, {"g", "{}"}}};
  expect_parse(ToolFormat::mistral, R"([TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}])",
               two);
  expect_parse(ToolFormat::mistral, R"([{"name": "f", "arguments": {"a": 1}},{"name": "g"}])", two);
  expect_parse(ToolFormat::mistral, R"(Sure. [TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}])",
               Parsed{"Sure. ", {{"f", "{\"a\": 1}"}}});
}

TEST(ToolCallParser, MistralTextIsContent) {
  expect_parse(ToolFormat::mistral, "[1, 2] and [TOOL_CALLS]x", Parsed{"[1, 2] and [TOOL_CALLS]x", {}});
  expect_parse(ToolFormat::mistral, "[TOOL", Parsed{"[TOOL", {}});
  expect_parse(ToolFormat::mistral, "[{\"k\": 1}]", Parsed{"[{\"k\": 1}]", {}});
}

TEST(ToolCallParser, NameGoesOutBeforeTheArgumentsFinish) {
  ToolCallParser parser(ToolFormat::hermes);
  std::vector<ToolCallEvent> events;
  parser.feed("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ", events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::call_begin);
  EXPECT_EQ(events[0].text, "f");
  EXPECT_EQ(events[1].kind, Kind::arguments);
  EXPECT_EQ(events[1].text, "{\"a\": ");
  events.clear();
  parser.feed("1}}", events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "1}");
}

TEST(ToolCallScanner, DecodesJsonStrings) {
  std::string out;
  EXPECT_TRUE(decode_json_string(R"("a\"b\\c\/\n\u00e9\ud83d\ude00")", out));
  EXPECT_EQ(out, "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_FALSE(decode_json_string(R"("a\q")", out));
  EXPECT_FALSE(decode_json_string(R"("a\u12")", out));
  EXPECT_FALSE(decode_json_string("abc", out));
}

}  // namespace
}  // namespace pagoda::net
