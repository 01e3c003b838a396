// The tool-call structural tags (net/tool_grammar.hpp) compiled by xgrammar
// (model/grammar_compiler.hpp) on the real SmolLM2 vocabulary: each must
// accept the calls its format writes (token by token, every token inside
// the mask) and reject what tool_choice rules out: text instead of a call,
// an unknown function, arguments that break the schema, a second call when
// parallel_tool_calls is false.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/gguf_file.hpp"
#include "model/grammar_compiler.hpp"
#include "model/grammar_vocab.hpp"
#include "model/token_matcher.hpp"
#include "net/openai_request.hpp"
#include "net/tool_grammar.hpp"
#include "tests/tokenizer_golden_util.hpp"

namespace pagoda::net {
namespace {

using model::test::smollm2_path;

const std::string kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city"]}}},)"
    R"({"type":"function","function":{"name":"now"}}])";

class ToolGrammarTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(smollm2_path())) return;
    auto gguf = model::GgufFile::open(smollm2_path());
    ASSERT_TRUE(gguf.ok());
    auto t = model::Tokenizer::from_gguf(*gguf);
    ASSERT_TRUE(t.ok());
    tok_ = *t;
    auto info = model::grammar_tokenizer_info(*tok_, tok_->vocab_size(), {tok_->eos_id()});
    ASSERT_TRUE(info.ok());
    compiler_ = new model::GrammarCompiler(*info);
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "SmolLM2 GGUF not found at " << smollm2_path();
  }

  // Whether the grammar for (format, request fields) takes `text` whole:
  // every token inside the mask, and the grammar may end after it.
  static bool takes(ToolFormat format, const std::string& fields, const std::string& text) {
    ParsedRequest p = parse_openai_request(
        ApiKind::chat, R"({"messages":[{"role":"user","content":"x"}],)" + kTools + fields + "}", "m");
    EXPECT_FALSE(p.error) << (p.error ? p.error->message : "");
    auto g = compiler_->compile({model::GrammarKind::structural_tag, tool_structural_tag(format, p.request.tools), {}, false});
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
    if (!g.ok()) return false;
    auto prog = std::make_shared<model::ConstraintProgram>();
    prog->grammar = *g;
    prog->vocab = tok_->vocab_size();
    prog->stop_ids = {tok_->eos_id()};
    prog->finish();
    model::TokenMatcher m(prog);
    std::vector<uint32_t> mask(size_t(prog->mask_words()));
    for (int32_t id : tok_->encode(text, false)) {
      if (m.fill_mask(mask.data()) && !((mask[size_t(id) >> 5] >> (id & 31)) & 1u)) return false;
      if (!m.accept(id)) return false;
    }
    return m.completed();
  }

  static inline std::shared_ptr<const model::Tokenizer> tok_;
  static inline model::GrammarCompiler* compiler_ = nullptr;
};

const std::string kCall = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
const std::string kNow = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";

TEST_F(ToolGrammarTest, HermesRequiredTakesCallsOnly) {
  const std::string required = R"(,"tool_choice":"required")";
  EXPECT_TRUE(takes(ToolFormat::hermes, required, kCall));
  EXPECT_TRUE(takes(ToolFormat::hermes, required, kCall + "\n" + kNow));
  EXPECT_FALSE(takes(ToolFormat::hermes, required, "Hello"));
  EXPECT_FALSE(takes(ToolFormat::hermes, required, "Hi " + kCall));
  EXPECT_FALSE(takes(ToolFormat::hermes, required,
                     "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(takes(ToolFormat::hermes, required,
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 5}}\n</tool_call>"));
  EXPECT_FALSE(takes(ToolFormat::hermes, required,
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}\n</tool_call>"));
}

TEST_F(ToolGrammarTest, NamedAndSingleCall) {
  const std::string named = R"(,"tool_choice":{"type":"function","function":{"name":"now"}})";
  EXPECT_TRUE(takes(ToolFormat::hermes, named, kNow));
  EXPECT_FALSE(takes(ToolFormat::hermes, named, kCall));
  const std::string one = R"(,"tool_choice":"required","parallel_tool_calls":false)";
  EXPECT_TRUE(takes(ToolFormat::hermes, one, kCall));
  EXPECT_FALSE(takes(ToolFormat::hermes, one, kCall + "\n" + kNow));
}

TEST_F(ToolGrammarTest, AutoLeavesTextFreeUntilTheTrigger) {
  EXPECT_TRUE(takes(ToolFormat::hermes, "", "It is sunny, no tool needed."));
  EXPECT_TRUE(takes(ToolFormat::hermes, "", "Let me check.\n" + kCall));
  EXPECT_FALSE(takes(ToolFormat::hermes, "", "Let me check.\n<tool_call>\n{\"name\": \"nope\""));
}

TEST_F(ToolGrammarTest, Llama3AndMistralShapes) {
  EXPECT_TRUE(takes(ToolFormat::llama3_json, R"(,"tool_choice":"required")",
                    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}; {\"name\": \"now\", "
                    "\"parameters\": {}}"));
  EXPECT_FALSE(takes(ToolFormat::llama3_json, R"(,"tool_choice":"required")",
                     "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}"));
  EXPECT_TRUE(takes(ToolFormat::mistral, R"(,"tool_choice":"required")",
                    "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"get_weather\", "
                    "\"arguments\": {\"city\": \"Oslo\"}}]"));
  EXPECT_TRUE(takes(ToolFormat::mistral, "", "Sure.[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}]"));
}

}  // namespace
}  // namespace pagoda::net
