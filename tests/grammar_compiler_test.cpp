// GrammarCompiler (model/grammar_compiler.hpp) and TokenMatcher
// (model/token_matcher.hpp) on the real SmolLM2 vocabulary: the cache (hits,
// normalised keys, LRU eviction under a byte bound, one compile for
// concurrent requests), compile errors as values, choice/regex/EBNF
// grammars, token rules (allowed ids, bad words), fork and rollback.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>

#include "model/gguf_file.hpp"
#include "model/grammar_compiler.hpp"
#include "model/grammar_vocab.hpp"
#include "model/token_matcher.hpp"
#include "tests/tokenizer_golden_util.hpp"

namespace pagoda::model::test {
namespace {

class GrammarCompilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(smollm2_path())) return;
    auto gguf = GgufFile::open(smollm2_path());
    ASSERT_TRUE(gguf.ok());
    auto t = Tokenizer::from_gguf(*gguf);
    ASSERT_TRUE(t.ok());
    tok_ = *t;
    auto info = grammar_tokenizer_info(*tok_, tok_->vocab_size(), {tok_->eos_id()});
    ASSERT_TRUE(info.ok());
    info_ = new xgrammar::TokenizerInfo(*info);
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "SmolLM2 GGUF not found at " << smollm2_path();
  }
  std::shared_ptr<ConstraintProgram> program(CompiledGrammarPtr g) const {
    auto p = std::make_shared<ConstraintProgram>();
    p->grammar = std::move(g);
    p->vocab = tok_->vocab_size();
    p->stop_ids = {tok_->eos_id()};
    return p;
  }
  // Greedy-free walk: accepts the tokens of text, each checked against the mask.
  static bool walk(TokenMatcher& m, const std::vector<int32_t>& ids) {
    std::vector<uint32_t> mask(size_t(m.program().mask_words()));
    for (int32_t id : ids) {
      if (m.fill_mask(mask.data()) && !((mask[size_t(id) >> 5] >> (id & 31)) & 1u)) return false;
      if (!m.accept(id)) return false;
    }
    return true;
  }
  static inline std::shared_ptr<const Tokenizer> tok_;
  static inline xgrammar::TokenizerInfo* info_ = nullptr;
};

TEST_F(GrammarCompilerTest, CacheHitsOnNormalisedKeys) {
  GrammarCompiler c(*info_);
  auto a = c.compile({GrammarKind::json_schema, R"({"type": "object", "properties": {"a": {"type": "integer"}}})", {}, false});
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto b = c.compile({GrammarKind::json_schema, "{\"type\":\"object\",\n \"properties\":{\"a\":{\"type\":\"integer\"}}}", {}, false});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get()) << "whitespace must not split cache entries";
  const GrammarCacheStats s = c.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_GT(s.bytes, 0);
}

TEST_F(GrammarCompilerTest, LruEvictsUnderTheByteBound) {
  GrammarCompilerOptions o;
  o.cache_bytes = 1;  // keeps only the newest entry
  GrammarCompiler c(*info_, o);
  ASSERT_TRUE(c.compile({GrammarKind::regex, "[a-c]+", {}, false}).ok());
  ASSERT_TRUE(c.compile({GrammarKind::regex, "[d-f]+", {}, false}).ok());
  ASSERT_TRUE(c.compile({GrammarKind::regex, "[d-f]+", {}, false}).ok());
  ASSERT_TRUE(c.compile({GrammarKind::regex, "[a-c]+", {}, false}).ok());
  const GrammarCacheStats s = c.stats();
  EXPECT_EQ(s.compiles, 3u);  // [a-c]+ was evicted and compiled again
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.entries, 1);
  EXPECT_GE(s.evictions, 2u);
}

TEST_F(GrammarCompilerTest, ConcurrentRequestsShareOneCompile) {
  GrammarCompiler c(*info_);
  std::vector<std::future<Result<CompiledGrammarPtr>>> fs;
  for (int i = 0; i < 6; ++i) {
    fs.push_back(std::async(std::launch::async, [&c] {
      return c.compile({GrammarKind::json_schema, R"({"type":"array","items":{"type":"boolean"}})", {}, false});
    }));
  }
  const void* first = nullptr;
  for (auto& f : fs) {
    auto r = f.get();
    ASSERT_TRUE(r.ok());
    if (!first) first = r->get();
    EXPECT_EQ(r->get(), first);
  }
  EXPECT_EQ(c.stats().compiles, 1u);
}

TEST_F(GrammarCompilerTest, ErrorsAreValuesNamingTheProblem) {
  GrammarCompiler c(*info_);
  auto bad_json = c.compile({GrammarKind::json_schema, "{not json", {}, false});
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.error().message.find("JSON schema"), std::string::npos) << bad_json.error().message;
  auto bad_regex = c.compile({GrammarKind::regex, "a(b", {}, false});
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(bad_regex.error().message.find("regex"), std::string::npos) << bad_regex.error().message;
  auto bad_ebnf = c.compile({GrammarKind::ebnf, "root ::= undefined_rule", {}, false});
  EXPECT_FALSE(bad_ebnf.ok());
  EXPECT_FALSE(c.compile({GrammarKind::choice, "", {}, false}).ok());
  auto bad_type = c.compile({GrammarKind::json_schema, R"({"type":"quaternion"})", {}, false});
  EXPECT_FALSE(bad_type.ok());
  auto ignored = c.compile({GrammarKind::json_schema,
                            R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})", {}, false});
  ASSERT_FALSE(ignored.ok());
  EXPECT_NE(ignored.error().message.find("'uniqueItems' at #/properties/a/uniqueItems"), std::string::npos)
      << ignored.error().message;
  EXPECT_FALSE(c.compile({GrammarKind::json_schema, R"({"anyOf":[{"type":"integer"},{"not":{}}]})", {}, false}).ok());
  // A property named like a keyword is a name, not a keyword.
  EXPECT_TRUE(c.compile({GrammarKind::json_schema, R"({"type":"object","properties":{"not":{"type":"integer"}}})", {}, false}).ok());
  // The compiler still works after errors.
  EXPECT_TRUE(c.compile({GrammarKind::regex, "x", {}, false}).ok());
}

TEST_F(GrammarCompilerTest, ChoiceRegexAndEbnfAcceptExactlyTheirLanguage) {
  GrammarCompiler c(*info_);
  auto choice = c.compile({GrammarKind::choice, "", {"yes \"sir\"", "no\\pe", "tab\there"}, false});
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  for (const char* text : {"yes \"sir\"", "no\\pe", "tab\there"}) {
    TokenMatcher m(program(*choice));
    EXPECT_TRUE(walk(m, tok_->encode(text, false))) << text;
    EXPECT_TRUE(m.completed()) << text;
  }
  TokenMatcher other(program(*choice));
  EXPECT_FALSE(walk(other, tok_->encode("maybe", false)));
  auto re = c.compile({GrammarKind::regex, "[0-9]{3}-[a-z]+", {}, false});
  ASSERT_TRUE(re.ok());
  TokenMatcher r1(program(*re));
  EXPECT_TRUE(walk(r1, tok_->encode("123-abc", false)));
  TokenMatcher r2(program(*re));
  EXPECT_FALSE(walk(r2, tok_->encode("12-abc", false)));
  auto eb = c.compile({GrammarKind::ebnf, "root ::= \"(\" root \")\" | \"x\"", {}, false});
  ASSERT_TRUE(eb.ok());
  // Accepted token by token (xgrammar's mask for this recursive grammar is
  // a strict subset: after "((x" it offers ")" but not "))").
  TokenMatcher e1(program(*eb));
  for (int32_t id : tok_->encode("((x))", false)) EXPECT_TRUE(e1.accept(id));
  EXPECT_TRUE(e1.completed());
  TokenMatcher e2(program(*eb));
  bool rejected = false;
  for (int32_t id : tok_->encode("((x)", false)) rejected = rejected || !e2.accept(id);
  EXPECT_FALSE(rejected || e2.completed());
}

TEST_F(GrammarCompilerTest, RulesForkAndRollback) {
  auto p = program(nullptr);
  const int32_t a = tok_->encode("Hello", false).at(0);
  p->rules.allowed = {a};
  const std::vector<int32_t> bad = tok_->encode(" world peace", false);
  ASSERT_GE(bad.size(), 2u);
  p->rules.bad_sequences = {bad};
  p->finish();
  TokenMatcher m(p);
  std::vector<uint32_t> mask(size_t(p->mask_words()));
  ASSERT_TRUE(m.fill_mask(mask.data()));
  int32_t allowed = 0;
  for (int32_t t = 0; t < p->vocab; ++t) allowed += (mask[size_t(t) >> 5] >> (t & 31)) & 1u;
  EXPECT_EQ(allowed, 1);  // only the allowed id (EOS is not added: vLLM's rule)
  auto q = program(nullptr);
  q->rules.bad_sequences = {bad};
  q->finish();
  TokenMatcher w(q);
  for (size_t i = 0; i + 1 < bad.size(); ++i) ASSERT_TRUE(w.accept(bad[i]));
  ASSERT_TRUE(w.fill_mask(mask.data()));
  EXPECT_FALSE((mask[size_t(bad.back()) >> 5] >> (bad.back() & 31)) & 1u) << "the bad word's last token";
  TokenMatcher f = w.fork();
  w.rollback(1);
  ASSERT_TRUE(w.fill_mask(mask.data()));
  EXPECT_TRUE((mask[size_t(bad.back()) >> 5] >> (bad.back() & 31)) & 1u) << "after rollback it is allowed";
  ASSERT_TRUE(f.fill_mask(mask.data()));
  EXPECT_FALSE((mask[size_t(bad.back()) >> 5] >> (bad.back() & 31)) & 1u) << "the fork kept its state";
}

}  // namespace
}  // namespace pagoda::model::test
