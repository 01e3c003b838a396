// Tokenizer vs HF goldens: token ids, decodes and streamed decodes of every
// corpus line must equal what HF tokenizers / transformers produce
// (tools/gen-tokenizer-goldens.py), for the real SmolLM2 GGUF, Llama 2's
// SentencePiece model and five small trained tokenizer.json files.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "model/gguf_file.hpp"
#include "model/sentencepiece_model.hpp"
#include "tests/tokenizer_golden_util.hpp"

namespace pagoda::model::test {
namespace {

std::shared_ptr<const Tokenizer> load_json(const std::string& name) {
  auto tok = Tokenizer::from_tokenizer_json(tokenizer_data(name + "/tokenizer.json"));
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? *tok : nullptr;
}

TEST(TokenizerGolden, SmolLM2FromGguf) {
  const std::string path = smollm2_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not found at " << path << " (set PAGODA_MODEL)";
  auto gguf = GgufFile::open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), TokenizerKind::kByteLevelBpe);
  EXPECT_EQ((*tok)->vocab_size(), 49152);
  EXPECT_FALSE((*tok)->add_bos());  // SmolLM2: add_bos_token false
  EXPECT_EQ((*tok)->piece((*tok)->bos_id()), "<|im_start|>");
  EXPECT_EQ((*tok)->piece((*tok)->eos_id()), "<|im_end|>");
  EXPECT_TRUE((*tok)->is_special(*(*tok)->token_id("<|endoftext|>")));
  EXPECT_TRUE((*tok)->is_control(*(*tok)->token_id("<|im_start|>")));
  expect_clean(check_golden(*tok, "smollm2"), "smollm2");
}

TEST(TokenizerGolden, Llama2SentencePieceModel) {
  const std::string path = llama2_model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "Llama 2 tokenizer.model not found at " << path;
  auto tok = Tokenizer::from_sentencepiece_model(path);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), TokenizerKind::kSentencePieceBpe);
  EXPECT_EQ((*tok)->vocab_size(), 32000);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_EQ((*tok)->token_type(3), TokenType::kByte);  // <0x00>
  expect_clean(check_golden(*tok, "llama2"), "llama2");
}

TEST(TokenizerGolden, Llama2FromHfDirWithOnlyTokenizerModel) {
  const std::string path = llama2_model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "Llama 2 tokenizer.model not found at " << path;
  auto tok = Tokenizer::from_hf_dir(std::filesystem::path(path).parent_path().string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->encode("Hello world"), (std::vector<int32_t>{1, 15043, 3186}));  // HF LlamaTokenizer
}

// Llama 2's vocabulary as a GGUF (tokens, scores, token types, special ids;
// no merges, as llama.cpp writes it), the file the golden script loads in
// transformers. Minimal GGUF v3 writer: metadata only, no tensors.
std::string write_llama2_vocab_gguf(const SentencePieceModel& spm) {
  std::string b;
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) { u64(s.size()), b.append(s); };
  b += "GGUF";
  u32(3);
  u64(0);  // tensors
  u64(8);  // metadata entries
  auto kv_str = [&](const std::string& k, const std::string& v) { str(k), u32(8), str(v); };
  auto kv_u32 = [&](const std::string& k, uint32_t v) { str(k), u32(4), u32(v); };
  kv_str("general.architecture", "llama");
  kv_str("tokenizer.ggml.model", "llama");
  str("tokenizer.ggml.tokens"), u32(9), u32(8), u64(spm.pieces.size());
  for (const auto& p : spm.pieces) str(p.piece);
  str("tokenizer.ggml.scores"), u32(9), u32(6), u64(spm.pieces.size());
  for (const auto& p : spm.pieces) b.append(reinterpret_cast<const char*>(&p.score), 4);
  str("tokenizer.ggml.token_type"), u32(9), u32(5), u64(spm.pieces.size());
  for (const auto& p : spm.pieces) u32(static_cast<uint32_t>(p.type));
  kv_u32("tokenizer.ggml.bos_token_id", 1);
  kv_u32("tokenizer.ggml.eos_token_id", 2);
  kv_u32("tokenizer.ggml.unknown_token_id", 0);
  const std::string path = (std::filesystem::path(testing::TempDir()) / "llama2-vocab.gguf").string();
  std::ofstream(path, std::ios::binary) << b;
  return path;
}

TEST(TokenizerGolden, Llama2FromGguf) {
  const std::string model = llama2_model_path();
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "Llama 2 tokenizer.model not found at " << model;
  auto spm = SentencePieceModel::load(model);
  ASSERT_TRUE(spm.ok()) << spm.error().message;
  auto gguf = GgufFile::open(write_llama2_vocab_gguf(*spm));
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_TRUE((*tok)->add_bos());
  // transformers ranks GGUF-derived merges by score: "Hello  world" differs
  // from the tokenizer.model conversion ([15043, 259, 11526]).
  EXPECT_EQ((*tok)->encode("Hello  world", false), (std::vector<int32_t>{15043, 29871, 3186}));
  expect_clean(check_golden(*tok, "llama2-gguf"), "llama2-gguf");
}

// A Gemma-style vocabulary as llama.cpp's converter writes a Gemma 2 GGUF
// (tools/gen-gemma-tokenizer.py): no prefix space, CONTROL turn markers,
// user-defined runs of spaces stored as spaces, scores that do not follow the
// merge order. Goldens: transformers' GGUF path on the same file.
TEST(TokenizerGolden, GemmaFromGguf) {
  auto gguf = GgufFile::open(tokenizer_data("gemma/vocab.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  auto tok = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), TokenizerKind::kSentencePieceBpe);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->piece((*tok)->bos_id()), "<bos>");
  EXPECT_TRUE((*tok)->is_special(*(*tok)->token_id("<start_of_turn>")));
  EXPECT_EQ((*tok)->encode("Hi", true).front(), (*tok)->bos_id());
  expect_clean(check_golden(*tok, "gemma-gguf"), "gemma-gguf");
  expect_clean(check_golden(*tok, "gemma-gguf-chat"), "gemma-gguf-chat");
}

// The same vocabulary as an HF directory: the tokenizer.json and
// tokenizer_config.json transformers' GemmaTokenizer saves (Replace(" ", U+2581)
// normalizer, a Split(" ") pre-tokenizer left nothing to split, no Strip in
// the decoder). Goldens: that GemmaTokenizer.
TEST(TokenizerGolden, GemmaFromHfDirectory) {
  auto tok = Tokenizer::from_hf_dir(tokenizer_data("gemma"));
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->kind(), TokenizerKind::kSentencePieceBpe);
  EXPECT_TRUE((*tok)->add_bos());
  expect_clean(check_golden(*tok, "gemma-hf"), "gemma-hf");
}

TEST(TokenizerGolden, Llama3StyleTrained) {
  auto tok = load_json("llama3");
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->piece(tok->bos_id()), "<|begin_of_text|>");
  expect_clean(check_golden(tok, "llama3"), "llama3");
}

TEST(TokenizerGolden, Qwen2StyleTrained) {
  auto tok = load_json("qwen2");
  ASSERT_TRUE(tok);
  EXPECT_FALSE(tok->add_bos());
  expect_clean(check_golden(tok, "qwen2"), "qwen2");
}

TEST(TokenizerGolden, SmolLMStyleDigitsTrained) {
  auto tok = load_json("smollm");
  ASSERT_TRUE(tok);
  expect_clean(check_golden(tok, "smollm"), "smollm");
}

TEST(TokenizerGolden, SentencePieceStyleTrained) {
  auto tok = load_json("spm");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->kind(), TokenizerKind::kSentencePieceBpe);
  expect_clean(check_golden(tok, "spm"), "spm");
}

TEST(TokenizerGolden, SentencePieceLegacyNormalizerTrained) {
  auto tok = load_json("spm-legacy");
  ASSERT_TRUE(tok);
  expect_clean(check_golden(tok, "spm-legacy"), "spm-legacy");
}

TEST(Tokenizer, HfDirAppliesTokenizerConfig) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "qwen2-with-config";
  fs::create_directories(dir);
  fs::copy_file(tokenizer_data("qwen2/tokenizer.json"), dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"add_bos_token": true, "add_eos_token": true, "bos_token": "<|im_start|>",
            "eos_token": {"content": "<|im_end|>", "lstrip": false}, "pad_token": null})";
  auto tok = Tokenizer::from_hf_dir(dir.string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const int32_t start = *(*tok)->token_id("<|im_start|>"), end = *(*tok)->token_id("<|im_end|>");
  EXPECT_EQ((*tok)->bos_id(), start);
  EXPECT_EQ((*tok)->eos_id(), end);
  std::vector<int32_t> want{start};
  for (int32_t id : (*tok)->encode("hi there", false)) want.push_back(id);
  want.push_back(end);
  EXPECT_EQ((*tok)->encode("hi there"), want);
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": "<no such token>"})";
  auto bad = Tokenizer::from_hf_dir(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bos_token"), std::string::npos) << bad.error().message;
}

TEST(Tokenizer, ByteLevelRoundTripsEveryCorpusLine) {
  auto tok = load_json("smollm");
  ASSERT_TRUE(tok);
  size_t bad = 0;
  for (const std::string& line : load_corpus()) {
    // smollm's added tokens strip no whitespace, and its vocabulary has all 256 bytes.
    if (tok->decode(tok->encode(line, false)) != line && bad++ < 3) ADD_FAILURE() << show_text(line);
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  auto tok = load_json("llama3");
  ASSERT_TRUE(tok);
  const std::vector<std::string> corpus = load_corpus();
  std::vector<std::vector<int32_t>> serial;
  for (const auto& line : corpus) serial.push_back(tok->encode(line));
  std::vector<size_t> bad(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < bad.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < corpus.size(); i += 2) bad[t] += tok->encode(corpus[i]) != serial[i];
    });
  }
  for (auto& th : threads) th.join();
  for (size_t b : bad) EXPECT_EQ(b, 0u);
}

// Not a timed test: prints encode throughput (CPU time, so a busy machine
// skews it less) for the report.
void report_throughput(const std::shared_ptr<const Tokenizer>& tok, const char* name) {
  const std::vector<std::string> corpus = load_corpus();
  size_t bytes = 0, tokens = 0;
  const std::clock_t c0 = std::clock();
  for (int rep = 0; rep < 3; ++rep) {
    for (const auto& line : corpus) {
      bytes += line.size();
      tokens += tok->encode(line).size();
    }
  }
  const double s = double(std::clock() - c0) / CLOCKS_PER_SEC;
  std::printf("[ perf ] %s encode: %.1f MB/s CPU (%zu bytes, %zu tokens, %.3f s)\n", name, bytes / s / 1e6, bytes,
              tokens, s);
  EXPECT_GT(tokens, 0u);
}

TEST(Tokenizer, EncodeThroughputIsReported) {
  if (auto tok = load_json("llama3")) report_throughput(tok, "llama3-style (trained)");
  if (std::filesystem::exists(smollm2_path())) {
    auto gguf = GgufFile::open(smollm2_path());
    ASSERT_TRUE(gguf.ok());
    auto tok = Tokenizer::from_gguf(*gguf);
    ASSERT_TRUE(tok.ok());
    report_throughput(*tok, "SmolLM2 (GGUF)");
  }
  if (std::filesystem::exists(llama2_model_path())) {
    auto tok = Tokenizer::from_sentencepiece_model(llama2_model_path());
    ASSERT_TRUE(tok.ok());
    report_throughput(*tok, "Llama 2 (SentencePiece)");
  }
}

}  // namespace
}  // namespace pagoda::model::test
