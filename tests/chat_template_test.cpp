// ChatTemplate against jinja2 goldens: every tests/data/chat/<name>.cases.json
// (made by tools/gen-chat-goldens.py through transformers' apply_chat_template)
// must render byte for byte, or fail where jinja2/transformers failed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/chat_template.hpp"
#include "model/json_value.hpp"
#include "tests/chat_golden_util.hpp"

namespace pagoda::model {
namespace {

using jinja::Value;

const std::string kChatDir = std::string(PAGODA_TEST_DATA_DIR) + "/chat";

using test::diff;
using test::field;
using test::read_file;

std::string show(const std::string& s) { return jinja::repr(Value::string(s)); }

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
  timegm(&probe);
  tm.tm_wday = probe.tm_wday;
  tm.tm_yday = probe.tm_yday;
  return tm;
}

// Renders every case of one golden file; returns the number of cases.
size_t check_golden_file(const std::string& cases_file) {
  auto root = parse_json(read_file(kChatDir + "/" + cases_file));
  EXPECT_TRUE(root.ok()) << cases_file << ": " << (root.ok() ? "" : root.error().message);
  if (!root.ok()) return 0;
  const std::string tmpl_file = field(*root, "template").str();
  auto tmpl = ChatTemplate::compile(read_file(kChatDir + "/" + tmpl_file));
  EXPECT_TRUE(tmpl.ok()) << tmpl_file << ": " << (tmpl.ok() ? "" : tmpl.error().message);
  if (!tmpl.ok()) return 0;
  const std::tm now = fixed_now(field(*root, "now"));
  const auto& cases = field(*root, "cases").items();
  for (const Value& c : cases) {
    SCOPED_TRACE(tmpl_file + " / " + field(c, "name").str());
    ChatRenderInput in;
    in.messages = field(c, "messages");
    in.tools = field(c, "tools");
    in.add_generation_prompt = field(c, "add_generation_prompt").as_bool();
    in.bos_token = field(*root, "bos_token").str();
    in.eos_token = field(*root, "eos_token").str();
    in.extra_context = field(c, "extra_context");
    in.now = now;
    auto out = tmpl->render(in);
    const Value& expected = field(c, "expected");
    if (expected.is_undefined()) {
      const std::string& type = field(c, "error_type").str();
      EXPECT_FALSE(out.ok()) << "jinja2 raised " << type << ": " << field(c, "error").str()
                             << "\n  but we rendered: " << show(out.ok() ? *out : "");
      if (!out.ok() && type == "TemplateError") {
        EXPECT_EQ(out.error().message, field(c, "error").str());
      }
      continue;
    }
    if (!out.ok()) {
      ADD_FAILURE() << "render failed: " << out.error().message << "\n  expected: " << show(expected.str());
      continue;
    }
    EXPECT_EQ(*out, expected.str()) << diff(expected.str(), *out);
  }
  return cases.size();
}

TEST(ChatTemplateGoldens, SmolLM2) { EXPECT_GE(check_golden_file("smollm2.cases.json"), 20u); }
TEST(ChatTemplateGoldens, DeepSeekR1DistillQwen) {
  EXPECT_GE(check_golden_file("deepseek-r1-distill-qwen.cases.json"), 20u);
}
TEST(ChatTemplateGoldens, Phi4MiniInstruct) { EXPECT_GE(check_golden_file("phi-4-mini-instruct.cases.json"), 20u); }
// Phi-3.5-mini-instruct's <|user|>..<|end|>\n<|assistant|>\n template (eos_token when no generation prompt).
TEST(ChatTemplateGoldens, Phi35MiniInstruct) {
  EXPECT_GE(check_golden_file("phi-3.5-mini-instruct.cases.json"), 20u);
}
// google/gemma-2-2b-it's template: <start_of_turn>user/model turns, content trimmed,
// raise_exception for a system message and for turns that do not alternate.
TEST(ChatTemplateGoldens, Gemma2It) { EXPECT_GE(check_golden_file("gemma-2-it.cases.json"), 20u); }
// google/gemma-3-*-it's template: the system text prefixes the first user turn,
// content lists of image/text items (`is iterable`), "Invalid content type" errors.
TEST(ChatTemplateGoldens, Gemma3It) { EXPECT_GE(check_golden_file("gemma-3-it.cases.json"), 25u); }
// Mixtral-8x7B-Instruct-v0.1's template: [INST] turns, the optional system message
// folded into the first one, eos after each answer, other roles rejected.
TEST(ChatTemplateGoldens, MixtralInstruct) { EXPECT_GE(check_golden_file("mixtral-instruct.cases.json"), 25u); }
// Qwen/Qwen3-0.6B's template: thinking blocks stripped from history, reasoning_content,
// enable_thinking, tools, tool calls with string and dict arguments, tool responses.
TEST(ChatTemplateGoldens, Qwen3) { EXPECT_GE(check_golden_file("qwen3.cases.json"), 30u); }
// meta-llama/Llama-3.2-3B-Instruct's template: a system turn with the knowledge cutoff
// and strftime_now's date, tools in the first user message or the system turn,
// ipython results, "only supports single tool-calls" for two.
TEST(ChatTemplateGoldens, Llama32Instruct) { EXPECT_GE(check_golden_file("llama-3.2.cases.json"), 25u); }
// mistralai/Mistral-Nemo-Instruct-2407's template: the system message joined to the
// last user turn, [AVAILABLE_TOOLS] before it, 9-character tool call ids.
TEST(ChatTemplateGoldens, MistralNemoInstruct) { EXPECT_GE(check_golden_file("mistral-nemo.cases.json"), 25u); }
TEST(ChatTemplateGoldens, StressTemplate) { EXPECT_GE(check_golden_file("stress.cases.json"), 20u); }

// Every template shipped in ../shared/chat-templates has a golden file here.
TEST(ChatTemplateGoldens, SharedTemplatesAreCovered) {
  const std::filesystem::path shared = std::filesystem::path(PAGODA_SHARED_DIR) / "chat-templates";
  if (!std::filesystem::is_directory(shared)) GTEST_SKIP() << shared << " absent";
  for (const auto& e : std::filesystem::directory_iterator(shared)) {
    if (e.path().extension() != ".jinja") continue;
    const std::string stem = e.path().stem().string();
    EXPECT_TRUE(std::filesystem::exists(kChatDir + "/" + stem + ".cases.json")) << "no goldens for " << stem;
    EXPECT_EQ(read_file(e.path().string()), read_file(kChatDir + "/" + stem + ".jinja"))
        << stem << ".jinja differs from the shared copy: rerun tools/gen-chat-goldens.py";
  }
}

// A compiled template is shared read-only; concurrent renders give the same text.
TEST(ChatTemplate, ConcurrentRendersAgree) {
  auto t = ChatTemplate::compile(read_file(kChatDir + "/stress.jinja"));
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatRenderInput in;
  in.messages = *parse_json(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                {"role": "user", "content": "c"}])");
  in.tools = *parse_json(R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  std::tm now{};
  now.tm_year = 124;
  in.now = now;
  auto want = t->render(in);
  ASSERT_TRUE(want.ok()) << want.error().message;
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) {
        auto r = t->render(in);
        got[i] = r.ok() ? *r : r.error().message;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, *want);
}

TEST(ChatTemplate, CompileRejectsUnsupportedConstructs) {
  auto t = ChatTemplate::compile("{% for m in messages %}{{ m.content|groupby('x') }}{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("groupby"), std::string::npos) << t.error().message;
  EXPECT_FALSE(ChatTemplate::compile("{% include 'x.jinja' %}").ok());
}

TEST(ChatTemplate, RejectsBadInput) {
  auto t = ChatTemplate::compile("{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  ChatRenderInput in;
  in.messages = Value::list({});
  EXPECT_FALSE(t->render(in).ok());  // empty conversation
  in.messages = Value::list({Value::string("not a dict")});
  EXPECT_FALSE(t->render(in).ok());
  in.messages = *parse_json(R"([{"role": "user", "content": "hi"}])");
  in.extra_context = *parse_json(R"({"messages": []})");
  EXPECT_FALSE(t->render(in).ok());  // would clash with the messages argument
  in.extra_context = Value();
  auto out = t->render(in);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "hi");
}

}  // namespace
}  // namespace pagoda::model
