// Jinja interpreter unit tests. Expected outputs come from jinja2 itself
// (tests/data/chat/snippets.json, made by tools/gen-chat-goldens.py in
// transformers' environment); parse_json is checked against hand-built values.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "model/jinja_interpreter.hpp"
#include "model/jinja_parser.hpp"
#include "model/json_file.hpp"
#include "model/json_value.hpp"
#include "tests/chat_golden_util.hpp"

namespace pagoda::model {
namespace {

using jinja::Value;

using test::diff;
using test::field;
using test::read_file;

struct Snippets {
  Value root;
  bool ok = false;
};

const Snippets& snippets() {
  static const Snippets s = [] {
    Snippets out;
    auto parsed = parse_json(read_file(std::string(PAGODA_TEST_DATA_DIR) + "/chat/snippets.json"));
    if (parsed) {
      out.root = *parsed;
      out.ok = true;
    }
    return out;
  }();
  return s;
}

std::tm fixed_now(const Value& parts) {
  std::tm tm{};
  const auto& p = parts.items();
  tm.tm_year = static_cast<int>(p[0].as_int()) - 1900;
  tm.tm_mon = static_cast<int>(p[1].as_int()) - 1;
  tm.tm_mday = static_cast<int>(p[2].as_int());
  tm.tm_hour = static_cast<int>(p[3].as_int());
  tm.tm_min = static_cast<int>(p[4].as_int());
  tm.tm_sec = static_cast<int>(p[5].as_int());
  std::tm probe = tm;
  timegm(&probe);  // fills tm_wday / tm_yday
  tm.tm_wday = probe.tm_wday;
  tm.tm_yday = probe.tm_yday;
  return tm;
}

TEST(JinjaSnippets, MatchJinja2) {
  const Snippets& s = snippets();
  ASSERT_TRUE(s.ok) << "tests/data/chat/snippets.json missing or unreadable";
  const Value& list = field(s.root, "snippets");
  ASSERT_GE(list.items().size(), 200u);
  jinja::RenderOptions opts;
  opts.now = fixed_now(field(s.root, "now"));
  const jinja::Dict& context = field(s.root, "context").dict();
  int checked = 0, errors = 0;
  for (const Value& snip : list.items()) {
    const std::string& src = field(snip, "template").str();
    SCOPED_TRACE("template: " + jinja::repr(Value::string(src)));
    auto tmpl = jinja::parse_template(src);
    const Value& expected = field(snip, "expected");
    if (expected.is_undefined()) {  // jinja2 raised
      ++errors;
      const std::string& type = field(snip, "error_type").str();
      if (!tmpl) continue;  // rejected at compile time: fine
      auto out = jinja::render(*tmpl, context, opts);
      EXPECT_FALSE(out.ok()) << "jinja2 raised " << type << ": " << field(snip, "error").str()
                             << "\n  but we rendered: " << jinja::repr(Value::string(out.ok() ? *out : ""));
      if (!out.ok() && type == "TemplateError") {
        EXPECT_EQ(out.error().message, field(snip, "error").str());
      }
      continue;
    }
    ++checked;
    ASSERT_TRUE(tmpl.ok()) << "compile failed: " << tmpl.error().message;
    auto out = jinja::render(*tmpl, context, opts);
    ASSERT_TRUE(out.ok()) << "render failed: " << out.error().message
                          << "\n  expected: " << jinja::repr(expected);
    EXPECT_EQ(*out, expected.str()) << diff(expected.str(), *out);
  }
  EXPECT_GE(checked, 150);
  EXPECT_GE(errors, 40);
}

TEST(JinjaSnippets, UnsupportedConstructsFailToCompile) {
  const Snippets& s = snippets();
  ASSERT_TRUE(s.ok);
  const Value& list = field(s.root, "unsupported");
  ASSERT_GE(list.items().size(), 20u);
  for (const Value& v : list.items()) {
    auto t = jinja::parse_template(v.str());
    EXPECT_FALSE(t.ok()) << "compiled an unsupported construct: " << v.str();
    if (!t.ok()) {
      EXPECT_NE(t.error().message.find("line 1"), std::string::npos) << t.error().message;
    }
  }
}

TEST(JinjaCompile, ErrorsNameTheConstructAndLine) {
  auto t = jinja::parse_template("a\nb\n{% extends 'x' %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("line 3"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("extends"), std::string::npos) << t.error().message;
  t = jinja::parse_template("{{ x }}\n{{ x|frobnicate }}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("line 2"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("frobnicate"), std::string::npos) << t.error().message;
  // Unknown names are rejected even in branches that would never run.
  EXPECT_FALSE(jinja::parse_template("{% if false %}{{ x is frob }}{% endif %}").ok());
}

TEST(JinjaCompile, HostileNestingFailsCleanly) {
  EXPECT_FALSE(jinja::parse_template("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").ok());
  EXPECT_FALSE(jinja::parse_template("{{ " + std::string(100000, '[') + " }}").ok());
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_FALSE(jinja::parse_template(ifs).ok());
  // Moderate nesting is fine.
  auto t = jinja::parse_template("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}");
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto out = jinja::render(*t, jinja::Dict());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "1");
}

TEST(JinjaRender, RaiseExceptionMessageIsVerbatim) {
  auto t = jinja::parse_template("line1\n{{ raise_exception('Roles must alternate') }}");
  ASSERT_TRUE(t.ok());
  auto out = jinja::render(*t, jinja::Dict());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message, "Roles must alternate");
}

TEST(JinjaRender, OtherErrorsCarryTheLine) {
  auto t = jinja::parse_template("ok\n\n{{ missing.attr }}");
  ASSERT_TRUE(t.ok());
  auto out = jinja::render(*t, jinja::Dict());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("line 3"), std::string::npos) << out.error().message;
  EXPECT_NE(out.error().message.find("'missing' is undefined"), std::string::npos) << out.error().message;
}

TEST(JsonValue, ParsesLikePythonJsonLoads) {
  auto v = parse_json(R"({"b": [1, -2, 3.5, 1e3, true, false, null], "a": "x\u00e9\n\"\\ \ud83d\ude00", "b": "dup"})");
  ASSERT_TRUE(v.ok()) << v.error().message;
  ASSERT_TRUE(v->is_dict());
  const auto& entries = v->dict().entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].first.str(), "b");  // first position, last value
  EXPECT_EQ(entries[0].second.str(), "dup");
  EXPECT_EQ(entries[1].second.str(), "x\xc3\xa9\n\"\\ \xf0\x9f\x98\x80");
  auto arr = parse_json("[1, -2, 3.5, 1e3, true, null, {}]");
  ASSERT_TRUE(arr.ok());
  const auto& items = arr->items();
  ASSERT_EQ(items.size(), 7u);
  EXPECT_TRUE(items[0].is_int());
  EXPECT_EQ(items[1].as_int(), -2);
  EXPECT_TRUE(items[2].is_float());
  EXPECT_DOUBLE_EQ(items[2].as_float(), 3.5);
  EXPECT_TRUE(items[3].is_float());  // 1e3 is a float in Python
  EXPECT_TRUE(items[4].is_bool() && items[4].as_bool());
  EXPECT_TRUE(items[5].is_none());
  EXPECT_TRUE(items[6].is_dict() && items[6].dict().empty());
}

TEST(JsonValue, RejectsInvalidInput) {
  EXPECT_FALSE(parse_json("{\"a\": 1} trailing").ok());
  EXPECT_FALSE(parse_json("[1, 2").ok());
  EXPECT_FALSE(parse_json("{\"a\": tru}").ok());
  EXPECT_FALSE(parse_json("").ok());
}

// Integers beyond int64 (transformers' VERY_LARGE_INTEGER in tokenizer_config.json's
// model_max_length) read as the nearest float, not as an error.
TEST(JsonValue, BigIntegersReadAsFloats) {
  auto v = parse_json(R"({"model_max_length": 1000000000000000019884624838656,)"
                      R"( "u": 18446744073709551615, "n": -99999999999999999999,)"
                      R"( "max": 9223372036854775807, "min": -9223372036854775808,)"
                      R"( "s": "12345678901234567890123"})");
  ASSERT_TRUE(v.ok()) << v.error().message;
  const auto& e = v->dict().entries();
  ASSERT_EQ(e.size(), 6u);
  ASSERT_TRUE(e[0].second.is_float());
  EXPECT_EQ(e[0].second.as_float(), 1e30);  // Python: float(1000000000000000019884624838656) == 1e30
  ASSERT_TRUE(e[1].second.is_float());
  EXPECT_EQ(e[1].second.as_float(), 18446744073709551615.0);
  ASSERT_TRUE(e[2].second.is_float());
  EXPECT_EQ(e[2].second.as_float(), -1e20);
  ASSERT_TRUE(e[3].second.is_int());  // the int64 extremes stay exact integers
  EXPECT_EQ(e[3].second.as_int(), INT64_MAX);
  ASSERT_TRUE(e[4].second.is_int());
  EXPECT_EQ(e[4].second.as_int(), INT64_MIN);
  EXPECT_EQ(e[5].second.str(), "12345678901234567890123");  // strings untouched
}

TEST(JsonFile, WidenBigIntegersTouchesOnlyIntegersBeyond64Bits) {
  EXPECT_EQ(widen_big_integers(R"([1, -2, 18446744073709551615, 18446744073709551616])"),
            R"([1, -2, 18446744073709551615, 18446744073709551616.0])");
  EXPECT_EQ(widen_big_integers(R"([-9223372036854775808, -9223372036854775809, 1e400])"),
            R"([-9223372036854775808, -9223372036854775809.0, 1e400])");
  EXPECT_EQ(widen_big_integers(R"({"k\"99999999999999999999": 123456789012345678901.5e3})"),
            R"({"k\"99999999999999999999": 123456789012345678901.5e3})");
  EXPECT_EQ(widen_big_integers(R"({"a\"b 99999999999999999999": 99999999999999999999})"),
            R"({"a\"b 99999999999999999999": 99999999999999999999.0})");
  EXPECT_EQ(widen_big_integers(R"(["k\\", 99999999999999999999])"),
            R"(["k\\", 99999999999999999999.0])");  // an escaped backslash, then the quote
  EXPECT_EQ(widen_big_integers("[1, 2"), "[1, 2");  // invalid stays invalid
}

TEST(JsonValue, RoundTripsThroughToJson) {
  const std::string text = R"({"k": [1, 2.5, "s\n\u0001", null, true, {"n": -0.0}], "e": []})";
  auto v = parse_json(text);
  ASSERT_TRUE(v.ok());
  auto out = to_json(*v);
  ASSERT_TRUE(out.ok());
  // Python: json.dumps(json.loads(text), ensure_ascii=False)
  EXPECT_EQ(*out, R"({"k": [1, 2.5, "s\n\u0001", null, true, {"n": -0.0}], "e": []})");
  EXPECT_FALSE(to_json(Value()).ok());  // Undefined is not JSON serializable
}

}  // namespace
}  // namespace pagoda::model
