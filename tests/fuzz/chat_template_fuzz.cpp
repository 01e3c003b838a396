// Fuzz target: the chat-template renderer (model/chat_template and the
// Jinja lexer / parser / interpreter under it).
//
// Input: byte 0 picks the mode. Even: the rest is a template source,
// compiled and rendered with a fixed conversation (system, user, assistant
// with a tool call, tools list). Odd: the rest is a JSON messages array (or
// anything), rendered with the committed templates of tests/data/chat
// (smollm2, the stress template, deepseek-r1, phi-4-mini).
// Invariants: compile() and render() return a value or an Error with a
// message; nothing crashes or hangs (libFuzzer's -timeout), including
// templates that loop, recurse or build huge strings.
#include <fstream>
#include <sstream>

#include "fuzz_util.hpp"
#include "model/chat_template.hpp"
#include "model/json_value.hpp"

using namespace pagoda;

namespace {

const char kConversation[] = R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "What is 2+2? <|im_end|> {{ x }}"},
  {"role": "assistant", "content": null, "reasoning_content": "add",
   "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
  {"role": "tool", "content": "4"},
  {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
])";

const char kTools[] = R"([{"type": "function", "function": {"name": "add",
  "description": "adds", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::vector<model::ChatTemplate>& committed_templates() {
  static const std::vector<model::ChatTemplate> all = [] {
    std::vector<model::ChatTemplate> out;
    for (const char* name : {"smollm2", "stress", "deepseek-r1-distill-qwen", "phi-4-mini-instruct"}) {
      auto t = model::ChatTemplate::compile(read_all(fuzz::test_data(std::string("chat/") + name + ".jinja")));
      FUZZ_CHECK(t.ok(), "the committed template compiles");
      out.push_back(std::move(*t));
    }
    return out;
  }();
  return all;
}

model::ChatRenderInput input_with(model::jinja::Value messages, model::jinja::Value tools) {
  model::ChatRenderInput in;
  in.messages = std::move(messages);
  in.tools = std::move(tools);
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.now = std::tm{};
  return in;
}

void render_checked(const model::ChatTemplate& t, const model::ChatRenderInput& in) {
  auto out = t.render(in);
  if (!out) FUZZ_CHECK(!out.error().message.empty(), "a render error has a message");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    static const model::jinja::Value conversation = *model::parse_json(kConversation);
    static const model::jinja::Value tools = *model::parse_json(kTools);
    auto t = model::ChatTemplate::compile(std::string(rest));
    if (!t) {
      FUZZ_CHECK(!t.error().message.empty(), "a compile error has a message");
      return 0;
    }
    render_checked(*t, input_with(conversation, model::jinja::Value::none()));
    render_checked(*t, input_with(conversation, tools));
    return 0;
  }
  auto messages = model::parse_json(rest);
  if (!messages) return 0;
  for (const model::ChatTemplate& t : committed_templates()) {
    render_checked(t, input_with(*messages, model::jinja::Value::none()));
  }
  return 0;
}
