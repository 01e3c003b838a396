// Tools, tool calls and tool results through real chat templates: every
// request of tests/data/chat/tools.cases.json (tools/gen-tool-chat-goldens.py,
// rendered by jinja2 through transformers) goes through the server's own
// path (parse_openai_request, prepare_tools, the request actor's chat
// rendering) and must give the same prompt byte for byte, or fail where
// jinja2 failed. Also: the format each template is detected as.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <ctime>
#include <string>

#include "actors/request_actor.hpp"
#include "net/openai_request.hpp"
#include "net/tool_prompt.hpp"
#include "tests/chat_golden_util.hpp"

namespace pagoda::net {
namespace {

const std::string kChatDir = std::string(PAGODA_TEST_DATA_DIR) + "/chat";

std::tm fixed_now() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 14;
  tm.tm_min = 5;
  tm.tm_sec = 9;
  tm.tm_wday = 5;  // a Friday
  tm.tm_yday = 207;
  return tm;
}

std::string str(simdjson::dom::element e) { return std::string(e.get_string().value()); }

// The prompt the server renders for `body` with `template_source`.
Result<std::string> server_render(const std::string& template_source, const std::string& bos, const std::string& eos,
                                  const std::string& body) {
  ParsedRequest parsed = parse_openai_request(ApiKind::chat, body, "m");
  if (parsed.error) return make_error("400: " + parsed.error->message);
  ToolPlan plan;
  if (auto e = prepare_tools(detect_tool_format(template_source), parsed.request, plan)) {
    return make_error("400: " + e->message);
  }
  auto tmpl = model::ChatTemplate::compile(template_source);
  if (!tmpl) return tmpl.error();
  actors::RequestContext ctx;
  ctx.chat_template.emplace(std::move(*tmpl));
  ctx.bos_token = bos;
  ctx.eos_token = eos;
  return actors::render_chat_prompt(ctx, parsed.request.generate, fixed_now());
}

TEST(ToolTemplate, RequestsRenderAsJinja2Does) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.load(kChatDir + "/tools.cases.json").get(root), simdjson::SUCCESS);
  simdjson::dom::array cases;
  ASSERT_EQ(root["cases"].get_array().get(cases), simdjson::SUCCESS);
  size_t n = 0;
  for (simdjson::dom::element c : cases) {
    SCOPED_TRACE(str(c["name"]));
    const std::string source = model::test::read_file(kChatDir + "/" + str(c["template"]));
    auto got = server_render(source, str(c["bos_token"]), str(c["eos_token"]), simdjson::minify(c["request"]));
    std::string_view expected;
    if (c["expected"].get_string().get(expected) == simdjson::SUCCESS) {
      ASSERT_TRUE(got.ok()) << got.error().message;
      EXPECT_EQ(*got, expected) << model::test::diff(std::string(expected), *got);
    } else {
      EXPECT_FALSE(got.ok()) << "jinja2 failed (" << str(c["error"]) << ") but we rendered:\n" << *got;
    }
    ++n;
  }
  EXPECT_GE(n, 28u);
}

TEST(ToolTemplate, FormatsAreDetectedFromTheTemplates) {
  struct Want {
    const char* file;
    ToolFormat format;
    bool native;
  };
  for (const Want& w : {Want{"qwen3.jinja", ToolFormat::hermes, true}, Want{"qwen2.5.jinja", ToolFormat::hermes, true},
                        Want{"llama-3.1.jinja", ToolFormat::llama3_json, true},
                        Want{"mistral-nemo.jinja", ToolFormat::mistral, true},
                        Want{"smollm2.jinja", ToolFormat::hermes, false},
                        Want{"gemma-2-it.jinja", ToolFormat::hermes, false}}) {
    const ToolTemplateInfo info = detect_tool_format(model::test::read_file(kChatDir + "/" + w.file));
    EXPECT_EQ(info.format, w.format) << w.file;
    EXPECT_EQ(info.native, w.native) << w.file;
  }
}

}  // namespace
}  // namespace pagoda::net
