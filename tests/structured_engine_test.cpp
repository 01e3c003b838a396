// Structured output end to end on the real model (issue 23): requests with
// JSON-schema, choice, regex, structural-tag constraints and token rules
// through the Engine (CPU backend). Every output is checked independently of
// the engine's masking: the text parses (simdjson) and has the schema's
// required keys, and a fresh matcher (its own compiler) accepts every
// sampled token in order; greedy, sampled, n > 1, and a KV budget so small
// that sequences are preempted and recomputed (outputs equal the roomy run).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <regex>

#include "actors/engine.hpp"
#include "engine_test_util.hpp"
#include "formats_test_util.hpp"
#include "model/gguf_file.hpp"
#include "model/grammar_vocab.hpp"

namespace pagoda::actors {
namespace {

const char* kPerson =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},)"
    R"("age":{"type":"integer","minimum":0,"maximum":120},"role":{"enum":["admin","user"]}},)"
    R"("required":["name","age","role"],"additionalProperties":false})";

GenerateRequest chat(const std::string& text, SamplingOptions s) {
  GenerateRequest r;
  r.messages = {{"user", text}};
  r.sampling = std::move(s);
  return r;
}

SamplingOptions constrained(OutputConstraint::Kind kind, std::string spec, float temperature, int32_t n) {
  SamplingOptions s;
  s.temperature = temperature;
  s.seed = 7;
  s.max_tokens = 96;
  s.n = n;
  s.constraint.kind = kind;
  s.constraint.spec = std::move(spec);
  return s;
}

class StructuredEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = test::real_model_path();
    if (path_.empty() || !std::filesystem::exists(path_)) return;
    auto gguf = model::GgufFile::open(path_);
    ASSERT_TRUE(gguf.ok());
    tok_ = *model::Tokenizer::from_gguf(*gguf);
    auto info = model::grammar_tokenizer_info(*tok_, tok_->vocab_size(), {tok_->eos_id()});
    ASSERT_TRUE(info.ok());
    replay_ = new model::GrammarCompiler(*info);  // independent of the engine's
    auto e = Engine::start(test::cpu_engine_options(path_, model::WeightPrecision::kQuantized, 256, 8, 256));
    ASSERT_TRUE(e.ok()) << e.error().message;
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "the real model is not available (tools/fetch-model)";
  }
  // A fresh matcher accepts every token of the sample; returns the tokens it took.
  static void replay(const model::GrammarSource& src, const SampleResult& s) {
    auto g = replay_->compile(src);
    ASSERT_TRUE(g.ok()) << g.error().message;
    auto p = std::make_shared<model::ConstraintProgram>();
    p->grammar = *g;
    p->vocab = tok_->vocab_size();
    p->stop_ids = {tok_->eos_id()};
    p->finish();
    model::TokenMatcher m(p);
    for (size_t i = 0; i < s.token_ids.size(); ++i) {
      ASSERT_TRUE(m.accept(s.token_ids[i])) << "token " << i << " (" << tok_->piece(s.token_ids[i])
                                            << ") breaks the grammar in " << s.text;
    }
    if (s.finish == FinishReason::stop) {
      EXPECT_TRUE(m.terminated()) << s.text;
    }
  }
  static void expect_person(const SampleResult& s) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(s.text).get(doc), simdjson::SUCCESS) << s.text;
    simdjson::dom::object o;
    ASSERT_EQ(doc.get(o), simdjson::SUCCESS) << s.text;
    std::string_view role;
    ASSERT_EQ(o["role"].get(role), simdjson::SUCCESS) << s.text;
    EXPECT_TRUE(role == "admin" || role == "user") << s.text;
    int64_t age = -1;
    ASSERT_EQ(o["age"].get(age), simdjson::SUCCESS) << s.text;
    EXPECT_TRUE(age >= 0 && age <= 120) << s.text;
    std::string_view name;
    ASSERT_EQ(o["name"].get(name), simdjson::SUCCESS) << s.text;
    EXPECT_EQ(o.size(), 3u) << s.text;
  }
  static inline std::string path_;
  static inline std::shared_ptr<const model::Tokenizer> tok_;
  static inline model::GrammarCompiler* replay_ = nullptr;
  static inline Engine* engine_ = nullptr;
};

TEST_F(StructuredEngine, JsonSchemaGreedyAndSampledWithChildren) {
  const model::GrammarSource src{model::GrammarKind::json_schema, kPerson, {}, false};
  for (float t : {0.0f, 1.0f}) {
    auto res = engine_->generate({chat("Describe a person as JSON.", constrained(OutputConstraint::Kind::json_schema, kPerson, t, 3))});
    ASSERT_EQ(res.size(), 1u);
    ASSERT_TRUE(res[0].error.empty()) << res[0].error;
    ASSERT_EQ(res[0].samples.size(), 3u);
    for (const SampleResult& s : res[0].samples) {
      EXPECT_EQ(s.finish, FinishReason::stop) << s.text;
      expect_person(s);
      replay(src, s);
    }
  }
}

// Beam search: each beam carries its matcher (forked with the beam,
// rolled back when a sibling's candidate replaces its last token).
TEST_F(StructuredEngine, BeamsEachFollowTheSchema) {
  SamplingOptions s = constrained(OutputConstraint::Kind::json_schema, kPerson, 0.0f, 2);
  s.beam_width = 3;
  auto res = engine_->generate({chat("Describe a person as JSON.", s)});
  ASSERT_TRUE(res[0].error.empty()) << res[0].error;
  ASSERT_EQ(res[0].samples.size(), 2u);
  for (const SampleResult& b : res[0].samples) {
    expect_person(b);
    replay({model::GrammarKind::json_schema, kPerson, {}, false}, b);
  }
}

TEST_F(StructuredEngine, ChoiceRegexAndStructuralTag) {
  SamplingOptions c = constrained(OutputConstraint::Kind::choice, "", 1.0f, 4);
  c.constraint.choices = {"red", "green", "blue sky"};
  auto res = engine_->generate({chat("Pick a colour.", c)});
  ASSERT_TRUE(res[0].error.empty()) << res[0].error;
  for (const SampleResult& s : res[0].samples) {
    EXPECT_TRUE(s.text == "red" || s.text == "green" || s.text == "blue sky") << s.text;
  }
  const std::string re = "[A-Z][a-z]{2,8} [0-9]{2}";
  res = engine_->generate({chat("Name and age?", constrained(OutputConstraint::Kind::regex, re, 1.0f, 2))});
  ASSERT_TRUE(res[0].error.empty()) << res[0].error;
  for (const SampleResult& s : res[0].samples) {
    EXPECT_TRUE(std::regex_match(s.text, std::regex(re))) << s.text;
    replay({model::GrammarKind::regex, re, {}, false}, s);
  }
  const std::string tag = std::string(R"({"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<tool_call>"],)") +
                          R"("tags":[{"begin":"<tool_call>","content":{"type":"json_schema","json_schema":)" + kPerson +
                          R"(},"end":"</tool_call>"}],"at_least_one":true,"stop_after_first":true}})";
  res = engine_->generate({chat("Call the tool.", constrained(OutputConstraint::Kind::structural_tag, tag, 0.0f, 1))});
  ASSERT_TRUE(res[0].error.empty()) << res[0].error;
  const std::string& t = res[0].samples[0].text;
  ASSERT_EQ(t.rfind("<tool_call>", 0), 0u) << t;
  const size_t end = t.find("</tool_call>");
  ASSERT_NE(end, std::string::npos) << t;
  SampleResult body;
  body.text = t.substr(11, end - 11);
  expect_person(body);
  replay({model::GrammarKind::structural_tag, tag, {}, false}, res[0].samples[0]);
}

TEST_F(StructuredEngine, TokenRulesBiasAllowAndBan) {
  SamplingOptions s = test::greedy(8);
  auto plain = engine_->generate({chat("Count to five.", s)});
  ASSERT_TRUE(plain[0].error.empty());
  const int32_t first = plain[0].samples[0].token_ids.at(0);
  s.token_mask.logit_bias = {{first, -100.0f}};
  auto banned = engine_->generate({chat("Count to five.", s)});
  ASSERT_TRUE(banned[0].error.empty()) << banned[0].error;
  EXPECT_NE(banned[0].samples[0].token_ids.at(0), first);
  const int32_t x = tok_->encode("x", false).at(0);
  s.token_mask.logit_bias = {{x, 100.0f}};
  auto pushed = engine_->generate({chat("Count to five.", s)});
  for (int32_t id : pushed[0].samples[0].token_ids) EXPECT_EQ(id, x);
  s.token_mask.logit_bias.clear();
  const std::vector<int32_t> allowed = {tok_->encode("1", false).at(0), tok_->encode("2", false).at(0)};
  s.token_mask.allowed_token_ids = allowed;
  auto only = engine_->generate({chat("Count to five.", s)});
  for (int32_t id : only[0].samples[0].token_ids) {
    EXPECT_TRUE(id == allowed[0] || id == allowed[1]) << id;
  }
}

TEST_F(StructuredEngine, BadConstraintsAreInvalidRequests) {
  auto res = engine_->generate({chat("x", constrained(OutputConstraint::Kind::json_schema, R"({"type":"quaternion"})", 0.0f, 1)),
                                chat("x", constrained(OutputConstraint::Kind::regex, "a(b", 0.0f, 1)),
                                chat("x", constrained(OutputConstraint::Kind::json_schema, "{oops", 0.0f, 1))});
  for (const GenerateResult& r : res) {
    EXPECT_EQ(r.error.rfind("invalid request: ", 0), 0u) << r.error;
  }
}

// Eight constrained groups in a pool of 24 blocks: preempted and recomputed,
// the matchers restored; the outputs equal those of a roomy engine.
TEST_F(StructuredEngine, PreemptionRestoresTheMatcher) {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back(chat("Person number " + std::to_string(i) + " as JSON please, with details.",
                        constrained(OutputConstraint::Kind::json_schema, kPerson, 0.0f, 1)));
  }
  auto roomy = engine_->generate(reqs);
  auto e = Engine::start(test::cpu_engine_options(path_, model::WeightPrecision::kQuantized, 14, 8, 256));
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto tight = (*e)->generate(reqs);
  EXPECT_GT((*e)->stats().preemptions, 0u) << "the pool should force preemption";
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(tight[i].error.empty()) << tight[i].error;
    EXPECT_EQ(tight[i].samples[0].token_ids, roomy[i].samples[0].token_ids) << i;
    expect_person(tight[i].samples[0]);
  }
}

}  // namespace
}  // namespace pagoda::actors
