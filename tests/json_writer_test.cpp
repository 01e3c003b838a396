// JsonWriter: exact text for hand-checked cases, and round trips through
// simdjson's DOM parser (an independent reader) for escaping and numbers.
#include "net/json_writer.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <limits>
#include <string>

namespace pagoda::net {
namespace {

// Parses `json` with simdjson (fails the test on error) and returns the
// string value at key "s" of the top object.
std::string parse_string_field(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  std::string_view s;
  EXPECT_EQ(doc["s"].get_string().get(s), simdjson::SUCCESS) << json;
  return std::string(s);
}

TEST(JsonWriter, NestedContainersAndCommas) {
  JsonWriter w;
  w.begin_object()
      .key("a").value(int64_t(1))
      .key("b").begin_array().value("x").value(true).null().begin_object().end_object().end_array()
      .key("c").begin_object().key("d").value(false).end_object()
      .key("e").begin_array().end_array()
      .end_object();
  EXPECT_EQ(w.str(), R"({"a":1,"b":["x",true,null,{}],"c":{"d":false},"e":[]})");
}

TEST(JsonWriter, TopLevelScalarsAndRaw) {
  JsonWriter w;
  w.begin_array().raw(R"({"k":[1,2]})").value(uint64_t(18446744073709551615ULL)).value(int32_t(-7)).end_array();
  EXPECT_EQ(w.str(), R"([{"k":[1,2]},18446744073709551615,-7])");
  JsonWriter s;
  s.value("only");
  EXPECT_EQ(s.take(), R"("only")");
}

TEST(JsonWriter, EscapesControlQuotesBackslash) {
  EXPECT_EQ(json_string("a\"b\\c\n\r\t\b\f"), R"("a\"b\\c\n\r\t\b\f")");
  EXPECT_EQ(json_string(std::string("\x01\x1f", 2)), R"("\u0001\u001f")");
  EXPECT_EQ(json_string(std::string("a\0b", 3)), R"("a\u0000b")");
  EXPECT_EQ(json_string("/"), R"("/")");
}

TEST(JsonWriter, ValidUtf8PassesThrough) {
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";  // café € 😀
  EXPECT_EQ(json_string(text), "\"" + text + "\"");
  JsonWriter w;
  w.begin_object().key("s").value(text).end_object();
  EXPECT_EQ(parse_string_field(w.str()), text);
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacter) {
  const std::string fffd = "\xEF\xBF\xBD";
  // Lone continuation byte, truncated 2-byte sequence, overlong '/', a UTF-16
  // surrogate (U+D800) and a code point above U+10FFFF.
  EXPECT_EQ(json_string("a\x80z"), "\"a" + fffd + "z\"");
  EXPECT_EQ(json_string("a\xC3"), "\"a" + fffd + "\"");
  EXPECT_EQ(json_string("\xC0\xAF"), "\"" + fffd + fffd + "\"");
  EXPECT_EQ(json_string("\xED\xA0\x80"), "\"" + fffd + fffd + fffd + "\"");
  EXPECT_EQ(json_string("\xF4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");
  // Whatever the input, the output parses (simdjson validates UTF-8).
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(char(c));
  JsonWriter w;
  w.begin_object().key("s").value(all).end_object();
  const std::string back = parse_string_field(w.str());
  EXPECT_EQ(back.substr(0, 128), all.substr(0, 128));  // ASCII unchanged
}

TEST(JsonWriter, KeysAreEscapedToo) {
  JsonWriter w;
  w.begin_object().key("q\"k").value(int64_t(0)).end_object();
  EXPECT_EQ(w.str(), R"({"q\"k":0})");
}

TEST(JsonWriter, DoublesRoundTripAndNonFiniteIsNull) {
  const double values[] = {0.0, 1.0, -2.5, 0.1, 1e-7, -123456.789, 3.0e300, 5e-324, -0.0};
  for (double v : values) {
    JsonWriter w;
    w.begin_object().key("v").value(v).end_object();
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(w.str()).get(doc), simdjson::SUCCESS) << w.str();
    double back = 1.0;
    ASSERT_EQ(doc["v"].get_double().get(back), simdjson::SUCCESS) << w.str();
    EXPECT_EQ(back, v) << w.str();
    simdjson::dom::element elem;
    ASSERT_EQ(doc["v"].get(elem), simdjson::SUCCESS);
    EXPECT_EQ(elem.type(), simdjson::dom::element_type::DOUBLE) << w.str();  // stays a float
  }
  JsonWriter w;
  w.begin_array().value(std::nan("")).value(std::numeric_limits<double>::infinity())
      .value(-std::numeric_limits<double>::infinity()).end_array();
  EXPECT_EQ(w.str(), "[null,null,null]");
}

TEST(JsonWriter, FloatLogprobIsReadable) {
  JsonWriter w;
  w.value(double(-0.25f));
  EXPECT_EQ(w.str(), "-0.25");
}

}  // namespace
}  // namespace pagoda::net
