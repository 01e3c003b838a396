// The tokenizer bridge (model/grammar_vocab.hpp) over every tokenizer the
// project supports: the real SmolLM2 GGUF (byte-level BPE), Llama 2's
// SentencePiece model and its GGUF form (byte fallback), Gemma's vocabulary
// (GGUF and HF directory), and the small trained tokenizer.json files
// (Llama-3, Qwen2, SmolLM, SentencePiece styles).
// Checks, per tokenizer: the strings xgrammar gets concatenate to our
// decoder's text for every corpus line; special/control ids are xgrammar
// specials and the stop ids are the model's; a JSON-schema grammar accepts
// the tokens of a valid document and rejects an invalid one.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/gguf_file.hpp"
#include "model/grammar_compiler.hpp"
#include "model/grammar_vocab.hpp"
#include "model/token_matcher.hpp"
#include "tests/tokenizer_golden_util.hpp"

namespace pagoda::model::test {
namespace {

struct Named {
  std::string name;
  std::shared_ptr<const Tokenizer> tok;
};

std::vector<Named> every_tokenizer() {
  std::vector<Named> out;
  if (std::filesystem::exists(smollm2_path())) {
    auto gguf = GgufFile::open(smollm2_path());
    if (gguf) {
      auto t = Tokenizer::from_gguf(*gguf);
      if (t) out.push_back({"smollm2-gguf", *t});
    }
  }
  if (std::filesystem::exists(llama2_model_path())) {
    auto t = Tokenizer::from_sentencepiece_model(llama2_model_path());
    if (t) out.push_back({"llama2-spm", *t});
  }
  // Gemma's vocabulary (SentencePiece BPE without a prefix space, runs of
  // spaces as tokens) as llama.cpp's converter writes it and as an HF
  // directory (tools/gen-gemma-tokenizer.py).
  if (auto gguf = GgufFile::open(tokenizer_data("gemma/vocab.gguf")); gguf) {
    auto t = Tokenizer::from_gguf(*gguf);
    EXPECT_TRUE(t.ok()) << "gemma-gguf: " << (t ? "" : t.error().message);
    if (t) out.push_back({"gemma-gguf", *t});
  }
  if (auto t = Tokenizer::from_hf_dir(tokenizer_data("gemma")); t) {
    out.push_back({"gemma-hf", *t});
  } else {
    ADD_FAILURE() << "gemma-hf: " << t.error().message;
  }
  for (const char* n : {"llama3", "qwen2", "smollm", "spm", "spm-legacy"}) {
    auto t = Tokenizer::from_tokenizer_json(tokenizer_data(std::string(n) + "/tokenizer.json"));
    EXPECT_TRUE(t.ok()) << n << ": " << (t ? "" : t.error().message);
    if (t) out.push_back({n, *t});
  }
  return out;
}

int32_t stop_of(const Tokenizer& t) { return t.eos_id() >= 0 ? t.eos_id() : 0; }

// The ids of text as a model would produce it after a prompt: SentencePiece
// tokenizers spell the first word with its prefix space ("▁{" = " {"), which
// the output's decoder drops; the same text without it starts with the
// unprefixed token.
std::vector<int32_t> output_ids(const Tokenizer& tok, const std::vector<std::string>& strings,
                                const std::string& text) {
  std::vector<int32_t> ids = tok.encode(text, false);
  if (ids.empty() || strings[size_t(ids[0])].empty() || strings[size_t(ids[0])][0] != ' ') return ids;
  const std::string bare = strings[size_t(ids[0])].substr(1);
  for (size_t id = 0; id < strings.size(); ++id) {
    if (strings[id] == bare) {
      ids[0] = int32_t(id);
      return ids;
    }
  }
  ADD_FAILURE() << "no token spells " << bare;
  return ids;
}

TEST(GrammarVocab, StringsConcatenateToTheDecodedText) {
  const std::vector<std::string> corpus = load_corpus();
  ASSERT_FALSE(corpus.empty());
  const std::vector<Named> all = every_tokenizer();
  EXPECT_GE(all.size(), 7u) << "the committed tokenizers (Gemma x2, five tokenizer.json) did not all load";
  for (const Named& n : all) {
    const std::vector<std::string> strings = grammar_token_strings(*n.tok, n.tok->vocab_size() + 7);
    ASSERT_EQ(strings.size(), size_t(n.tok->vocab_size() + 7)) << n.name;
    for (int32_t pad = n.tok->vocab_size(); pad < n.tok->vocab_size() + 7; ++pad) {
      EXPECT_EQ(strings[size_t(pad)], "") << n.name << ": padding ids are special";
    }
    int checked = 0;
    for (const std::string& line : corpus) {
      const std::vector<int32_t> ids = n.tok->encode(line, /*add_special=*/false);
      std::string joined;
      bool plain = true;
      for (int32_t id : ids) {
        plain = plain && !n.tok->is_special(id) && !n.tok->is_control(id);
        joined += strings[size_t(id)];
      }
      const std::string decoded = n.tok->decode(ids);
      if (!plain || decoded.find("\xEF\xBF\xBD") != std::string::npos) continue;  // U+FFFD repairs
      // The decoder may drop one leading space (SentencePiece's prefix).
      EXPECT_TRUE(joined == decoded || joined == " " + decoded) << n.name << ": " << show_text(line);
      ++checked;
    }
    EXPECT_GT(checked, int(corpus.size()) / 2) << n.name;
  }
}

TEST(GrammarVocab, SpecialIdsAndStopIds) {
  for (const Named& n : every_tokenizer()) {
    const int32_t vocab = n.tok->vocab_size();
    auto info = grammar_tokenizer_info(*n.tok, vocab, {stop_of(*n.tok)});
    ASSERT_TRUE(info.ok()) << n.name << ": " << info.error().message;
    EXPECT_EQ(info->GetVocabSize(), vocab);
    EXPECT_EQ(info->GetStopTokenIds(), std::vector<int32_t>{stop_of(*n.tok)}) << n.name;
    const std::vector<int32_t>& special = info->GetSpecialTokenIds();
    for (const AddedToken& a : n.tok->added_tokens()) {
      if (!a.special || a.id == stop_of(*n.tok) || a.id >= vocab) continue;
      EXPECT_NE(std::find(special.begin(), special.end(), a.id), special.end()) << n.name << " " << a.content;
    }
  }
  auto smol = every_tokenizer();
  ASSERT_FALSE(smol.empty());
  EXPECT_FALSE(grammar_tokenizer_info(*smol[0].tok, smol[0].tok->vocab_size(), {}).ok());
  EXPECT_FALSE(grammar_tokenizer_info(*smol[0].tok, 10, {10}).ok());
}

// Every tokenizer: the tokens of a valid document pass the matcher, each one
// inside the mask filled before it; an invalid document is rejected.
TEST(GrammarVocab, SchemaGrammarFollowsTheTokensOfEveryTokenizer) {
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]})";
  for (const Named& n : every_tokenizer()) {
    const int32_t vocab = n.tok->vocab_size();
    auto info = grammar_tokenizer_info(*n.tok, vocab, {stop_of(*n.tok)});
    ASSERT_TRUE(info.ok()) << n.name;
    GrammarCompiler compiler(*info);
    auto g = compiler.compile({GrammarKind::json_schema, schema, {}, false});
    ASSERT_TRUE(g.ok()) << n.name << ": " << g.error().message;
    auto prog = std::make_shared<ConstraintProgram>();
    prog->grammar = *g;
    prog->vocab = vocab;
    prog->stop_ids = {stop_of(*n.tok)};
    prog->finish();
    TokenMatcher m(prog);
    std::vector<uint32_t> mask(size_t(prog->mask_words()));
    const std::vector<std::string> strings = grammar_token_strings(*n.tok, vocab);
    const std::vector<int32_t> ids = output_ids(*n.tok, strings, R"({"name": "Zoë", "n": 42})");
    for (int32_t id : ids) {
      ASSERT_TRUE(m.fill_mask(mask.data()));
      EXPECT_TRUE((mask[size_t(id) >> 5] >> (id & 31)) & 1u) << n.name << ": id " << id << " masked";
      ASSERT_TRUE(m.accept(id)) << n.name << ": " << n.tok->piece(id);
    }
    EXPECT_TRUE(m.completed()) << n.name;
    ASSERT_TRUE(m.fill_mask(mask.data()));
    const int32_t stop = stop_of(*n.tok);
    EXPECT_TRUE((mask[size_t(stop) >> 5] >> (stop & 31)) & 1u) << n.name << ": a finished grammar allows EOS";
    EXPECT_TRUE(m.accept(stop));
    EXPECT_TRUE(m.terminated());
    TokenMatcher bad(prog);
    bool rejected = false;
    for (int32_t id : output_ids(*n.tok, strings, R"({"name": 3})")) rejected = rejected || !bad.accept(id);
    EXPECT_TRUE(rejected) << n.name;
  }
}

}  // namespace
}  // namespace pagoda::model::test
