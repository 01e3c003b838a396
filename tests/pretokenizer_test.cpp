// Pre-tokenizer splits vs HF tokenizers (tests/data/tokenizer/pretokenizer-cases.jsonl,
// made by tools/gen-tokenizer-goldens.py), UTF-8 helpers vs hand-worked
// Unicode examples, and load-time errors for configurations not reproduced.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>

#include "model/pretokenizer.hpp"
#include "model/tokenizer.hpp"
#include "model/unicode_tables.hpp"
#include "model/utf8.hpp"

namespace pagoda::model {
namespace {

std::vector<std::string> split_with(const std::string& rule, const std::string& text) {
  std::vector<PreTokenizer::Step> steps;
  if (rule == "gpt2") steps.push_back({PreTokenizer::Step::Kind::kSplit, SplitPattern::kGpt2, false});
  if (rule == "llama3") steps.push_back({PreTokenizer::Step::Kind::kSplit, SplitPattern::kLlama3, false});
  if (rule == "qwen2") steps.push_back({PreTokenizer::Step::Kind::kSplit, SplitPattern::kQwen2, false});
  if (rule == "digits") steps.push_back({PreTokenizer::Step::Kind::kDigits, SplitPattern::kGpt2, false});
  if (rule == "digits_individual") steps.push_back({PreTokenizer::Step::Kind::kDigits, SplitPattern::kGpt2, true});
  EXPECT_EQ(steps.size(), 1u) << rule;
  PreTokenizer pre(steps);
  std::vector<Span> spans, scratch;
  pre.split(text, spans, scratch);
  std::vector<std::string> out;
  for (const Span& s : spans) out.push_back(text.substr(s.first, s.second - s.first));
  return out;
}

TEST(PreTokenizer, SplitsLikeHfTokenizers) {
  std::ifstream in(std::string(PAGODA_TEST_DATA_DIR) + "/tokenizer/pretokenizer-cases.jsonl");
  simdjson::dom::parser parser;
  int cases = 0;
  for (std::string line; std::getline(in, line); ++cases) {
    simdjson::dom::element rec = parser.parse(line);
    const std::string rule{std::string_view(rec["rule"])};
    const std::string text{std::string_view(rec["text"])};
    std::vector<std::string> want;
    for (simdjson::dom::element p : simdjson::dom::array(rec["pieces"])) want.emplace_back(std::string_view(p));
    EXPECT_EQ(split_with(rule, text), want) << rule << " on \"" << text << "\"";
  }
  EXPECT_GE(cases, 80);
}

TEST(PreTokenizer, SequenceSplitsEachPieceAsItsOwnInput) {
  // Digits first, then GPT-2's regex on each piece: "a  " ends its piece, so
  // \s+(?!\S) keeps both spaces (HF: Sequence[Digits, ByteLevel]).
  PreTokenizer pre({{PreTokenizer::Step::Kind::kDigits, SplitPattern::kGpt2, true},
                    {PreTokenizer::Step::Kind::kSplit, SplitPattern::kGpt2, false}});
  std::vector<Span> spans, scratch;
  const std::string text = "a  12";
  pre.split(text, spans, scratch);
  EXPECT_EQ(spans, (std::vector<Span>{{0, 1}, {1, 3}, {3, 4}, {4, 5}}));
}

TEST(PreTokenizer, RecognisesOnlyExactRegexes) {
  EXPECT_EQ(recognise_split_regex(split_pattern_regex(SplitPattern::kLlama3)), SplitPattern::kLlama3);
  EXPECT_EQ(recognise_split_regex(R"(\p{N}{1,3})"), std::nullopt);
}

TEST(UnicodeTables, ClassesOfKnownCharacters) {
  EXPECT_TRUE(unicode::is_letter(U'a'));
  EXPECT_TRUE(unicode::is_letter(U'\u4E2D'));   // 中
  EXPECT_TRUE(unicode::is_letter(U'\U00020000'));  // CJK Extension B, above the flat table
  EXPECT_TRUE(unicode::is_letter(U'\u1C89'));   // Unicode 16 letter (HF's regex engine knows it)
  EXPECT_FALSE(unicode::is_letter(U'1'));
  EXPECT_TRUE(unicode::is_number(U'\u0663'));   // ARABIC-INDIC DIGIT THREE
  EXPECT_TRUE(unicode::is_number(U'\u00BD'));   // ½ (No)
  EXPECT_TRUE(unicode::is_space(U'\u3000'));
  EXPECT_TRUE(unicode::is_space(U'\u0085'));
  EXPECT_FALSE(unicode::is_space(U'\u001C'));   // Python's isspace says yes; White_Space says no
  EXPECT_FALSE(unicode::is_space(U'\u200B'));   // ZERO WIDTH SPACE is not White_Space
  EXPECT_FALSE(unicode::classify(U'\U0001F917') & (unicode::kLetterBit | unicode::kNumberBit));
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  std::string out;
  // E0 80: 80 cannot follow E0 -> two replacements; F0 9F 98 cut short -> one.
  utf8::append_lossy(out, std::string("a\xE0\x80" "b\xF0\x9F\x98", 7));
  EXPECT_EQ(out, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(utf8::incomplete_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xE4\xB8"), 2u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xE4\xB8\xAD"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("ab\x80"), 0u);
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));  // a surrogate
}

// A tokenizer.json with the given pre_tokenizer / normalizer / decoder JSON.
std::string write_json(const std::string& name, const std::string& pre, const std::string& norm = "null",
                       const std::string& dec = "{\"type\":\"ByteLevel\"}") {
  const std::string path = (std::filesystem::path(testing::TempDir()) / name).string();
  std::ofstream(path) << R"({"added_tokens":[],"normalizer":)" << norm << R"(,"pre_tokenizer":)" << pre
                      << R"(,"post_processor":null,"decoder":)" << dec
                      << R"(,"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}})";
  return path;
}

TEST(TokenizerLoad, UnsupportedConfigurationsAreErrors) {
  struct Case {
    const char* name;
    std::string pre, norm, dec, expect;
  } cases[] = {
      {"regex.json", R"({"type":"Split","pattern":{"Regex":"\\p{N}+"},"behavior":"Isolated","invert":false})", "null",
       R"({"type":"ByteLevel"})", "unrecognised regex"},
      {"prefix.json", R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})", "null",
       R"({"type":"ByteLevel"})", "add_prefix_space"},
      {"ws.json", R"({"type":"Whitespace"})", "null", R"({"type":"ByteLevel"})", "Whitespace"},
      {"nfc.json", "null", R"({"type":"NFC"})", R"({"type":"ByteLevel"})", "NFC"},
      {"dec.json", "null", "null", R"({"type":"WordPiece","prefix":"##"})", "WordPiece"},
  };
  for (const Case& c : cases) {
    auto tok = Tokenizer::from_tokenizer_json(write_json(c.name, c.pre, c.norm, c.dec));
    ASSERT_FALSE(tok.ok()) << c.name;
    EXPECT_NE(tok.error().message.find(c.expect), std::string::npos) << tok.error().message;
  }
  auto ok = Tokenizer::from_tokenizer_json(write_json("good.json", R"({"type":"ByteLevel","use_regex":true})"));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ((*ok)->encode("ab"), (std::vector<int32_t>{2}));
  auto missing = Tokenizer::from_hf_dir(testing::TempDir() + "/no-such-dir");
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace pagoda::model
