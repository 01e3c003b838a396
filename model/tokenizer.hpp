// Tokenizer: text <-> token ids, identical to HF `tokenizers` for the
// supported families:
//  - byte-level BPE (GPT-2, Llama-3, Qwen2, SmolLM2): GGUF tokenizer.ggml.model
//    "gpt2", or a tokenizer.json with a ByteLevel pre-tokenizer;
//  - SentencePiece-style BPE with byte fallback (Llama 2, TinyLlama): GGUF
//    "llama", a SentencePiece tokenizer.model, or a tokenizer.json with
//    Metaspace / Prepend+Replace normalization.
// Loading mirrors what transformers builds from the same files (see each
// loader); configurations this code does not reproduce exactly are load
// Errors, never silent approximations.
//
// Encoding: added tokens (special or not) found in the text become single
// tokens first (leftmost-longest, honouring lstrip/rstrip/single_word/
// normalized like HF), the rest is normalized, pre-tokenized and BPE-merged.
//
// Ownership/thread-safety: a Tokenizer is immutable after loading; share it
// as shared_ptr<const Tokenizer> and call const methods from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/result.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/pretokenizer.hpp"
#include "model/spm_tokenizer.hpp"

namespace pagoda::model {

class GgufFile;
struct SentencePieceModel;

enum class TokenizerKind : uint8_t { kByteLevelBpe, kSentencePieceBpe };

// GGUF / SentencePiece token types.
enum class TokenType : uint8_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

// An HF "added token": matched whole in the input before anything else.
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;      // skipped by decode(skip_special = true)
  bool lstrip = false;       // also swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // matched in the normalized text (else the raw text)
};

// How ids turn back into text: the HF decoder chains this code reproduces.
struct DecoderSpec {
  enum class Kind : uint8_t {
    kNone,       // no decoder: token strings joined by ' ' (HF's fallback)
    kByteLevel,  // ByteLevel: characters mapped back to bytes, invalid UTF-8 -> U+FFFD
    kPieces,     // SentencePiece family: Replace / ByteFallback / Fuse / Strip / Metaspace
  };
  enum class Strip : uint8_t {
    kNone,
    kLeadingSpace,           // Strip(' ', 1, 0) after Fuse: one leading space of the text
    kFirstTokenReplacement,  // Metaspace decoder: the first token loses every replacement char
  };
  // From a tokenizer.json "decoder" (null, ByteLevel, Replace, ByteFallback,
  // Fuse, Strip(' ', 1, 0), Metaspace, Sequence); others are an Error.
  // Defined in incremental_decoder.cpp, with the rest of decoding.
  static Result<DecoderSpec> from_json(const simdjson::dom::element& json);

  Kind kind = Kind::kByteLevel;
  bool byte_fallback = false;  // "<0xNN>" tokens are bytes (an invalid group -> U+FFFD each)
  std::string replace_from;    // kPieces: e.g. "\u2581" ...
  std::string replace_to;      // ... -> " "
  Strip strip = Strip::kNone;
};

// Everything a loader determines; Tokenizer's constructor derives the rest.
struct TokenizerParts {
  TokenizerKind kind = TokenizerKind::kByteLevelBpe;
  BpeModel model;
  PreTokenizer pre;                    // used unless metaspace is set
  std::optional<Metaspace> metaspace;  // SentencePiece-style pre-tokenization
  TextNormalizer normalizer;
  bool byte_level = false;             // pieces are byte-mapped before BPE
  std::vector<AddedToken> added;       // ids may lie beyond the model vocabulary
  std::vector<TokenType> types;        // per model id; empty: derived
  DecoderSpec decoder;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false, add_eos = false;
};

// The tokenizer metadata of a GGUF file (tokenizer.ggml.*).
struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  std::vector<float> scores;
  std::vector<std::string> merges;
  bool has_merges = false;
};

// Loader steps defined next to the code they configure (tokenizer.cpp adds
// the special ids and flags common to all):
// SentencePiece model -> parts, as transformers' LlamaTokenizer (spm_tokenizer.cpp).
Result<TokenizerParts> sentencepiece_parts(const SentencePieceModel& spm);
// GGUF "llama" / "gpt2" vocabularies, as transformers' GGUF path
// (spm_tokenizer.cpp / bpe_tokenizer.cpp).
Result<void> gguf_sentencepiece_parts(const GgufFile& gguf, const GgufVocab& v, TokenizerParts& parts);
Result<void> gguf_byte_level_parts(const GgufFile& gguf, const GgufVocab& v, TokenizerParts& parts);

class Tokenizer {
 public:
  // From GGUF metadata (tokenizer.ggml.*), as transformers'
  // AutoTokenizer.from_pretrained(dir, gguf_file=...) builds it.
  static Result<std::shared_ptr<const Tokenizer>> from_gguf(const GgufFile& gguf);
  // An HF model directory: tokenizer.json (+ tokenizer_config.json for
  // bos/eos/add_bos_token/add_eos_token when present); without tokenizer.json,
  // tokenizer.model (SentencePiece).
  static Result<std::shared_ptr<const Tokenizer>> from_hf_dir(const std::string& dir);
  static Result<std::shared_ptr<const Tokenizer>> from_tokenizer_json(const std::string& path);
  // A SentencePiece BPE model, as transformers' LlamaTokenizer (= LlamaTokenizerFast,
  // legacy=False, add_prefix_space=True) converts it; BOS added by default.
  static Result<std::shared_ptr<const Tokenizer>> from_sentencepiece_model(const std::string& path);

  // Token ids of text. add_special adds BOS (and EOS) only when the model
  // says so (add_bos() / add_eos()). Special tokens written in the text are
  // always matched as single tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const;
  // As encode(), appending to out (which is not cleared).
  void encode_into(std::string_view text, bool add_special, std::vector<int32_t>& out) const;

  // Text of ids, as HF decode(ids, skip_special_tokens). Unknown ids are skipped.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The vocabulary entry of id as stored (byte-level spelling, "▁" for spaces,
  // added-token content); empty for an unknown id.
  std::string_view piece(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view piece) const;

  TokenizerKind kind() const { return kind_; }
  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const { return bos_id_; }  // -1 when the model has none
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool is_special(int32_t id) const;  // a special added token (skipped when skip_special)
  bool is_control(int32_t id) const;  // token type control (GGUF/SentencePiece), or special
  TokenType token_type(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }

  // Decoding building blocks (IncrementalDecoder uses them):
  // the bytes id contributes to decoded text (before UTF-8 repair and the
  // leading-space strip), and whether decoded text drops one leading space.
  std::string_view token_bytes(int32_t id) const;
  // The bytes of id when it is the first token decoded (the Metaspace decoder
  // treats it differently); equal to token_bytes otherwise.
  std::string_view first_token_bytes(int32_t id) const;
  // 0x100 | byte for a byte-fallback token "<0xNN>" (when the decoder has
  // ByteFallback), else 0.
  uint32_t byte_token(int32_t id) const;
  const DecoderSpec& decoder() const { return decoder_; }

  // Loaders build TokenizerParts and construct from them.
  explicit Tokenizer(TokenizerParts parts);

 private:
  struct Segment {
    uint32_t begin, end;
    int32_t id;  // added token id, or -1 for text to tokenize
  };
  struct Scratch;

  void split_added(std::string_view text, bool normalized_set, std::vector<Segment>& out) const;
  void encode_text(std::string_view text, bool at_origin, Scratch& s, std::vector<int32_t>& out) const;
  void encode_piece(std::string_view piece, bool at_origin, Scratch& s, std::vector<int32_t>& out) const;
  void build_decode_table();

  TokenizerKind kind_ = TokenizerKind::kByteLevelBpe;
  BpeModel model_;
  PreTokenizer pre_;                    // byte-level / plain BPE
  std::optional<Metaspace> metaspace_;  // SentencePiece style
  TextNormalizer normalizer_;
  bool byte_level_ = false;             // pieces are byte-mapped before BPE

  std::vector<std::string> pieces_;     // id -> piece (model vocab + added tokens)
  std::vector<TokenType> types_;
  std::vector<AddedToken> added_;
  std::vector<uint8_t> special_;        // id -> special added token
  // Added-token matching: the matched form of each added token (normalized
  // when it is a normalized token), and candidates by first byte, longest first.
  std::vector<std::string> patterns_;
  std::vector<std::vector<uint32_t>> by_first_raw_, by_first_norm_;
  bool has_normalized_added_ = false;

  DecoderSpec decoder_;
  std::string decoded_;                 // concatenated token_bytes
  std::vector<uint32_t> decoded_off_;   // id -> [off[id], off[id+1])
  std::string first_decoded_;           // concatenated first_token_bytes (kFirstTokenReplacement)
  std::vector<uint32_t> first_off_;
  std::vector<uint16_t> byte_token_;    // id -> 0x100 | byte, or 0

  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1, pad_id_ = -1;
  bool add_bos_ = false, add_eos_ = false;
};

}  // namespace pagoda::model
