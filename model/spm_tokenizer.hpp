// SentencePiece-style BPE (Llama 2 / TinyLlama) as HF `tokenizers` runs it:
//  - the text is normalized by Metaspace (spaces become U+2581 "▁", a "▁" is
//    prepended per the prepend scheme) or, in legacy tokenizer.json files, by a
//    normalizer Sequence of Prepend("▁") and Replace(" ", "▁");
//  - the BPE model is a plain BpeModel with byte fallback whose merges are
//    derived from the vocabulary: every split of a piece into two pieces is a
//    merge (transformers' generate_merges), ranked by the merged piece's id
//    (conversion from tokenizer.model) or by its score, highest first
//    (transformers' conversion from a GGUF file).
//
// All types are immutable after construction and thread-safe to use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/result.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/pretokenizer.hpp"

namespace pagoda::model {

inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

enum class PrependScheme : uint8_t { kAlways, kFirst, kNever };

// The Metaspace pre-tokenizer.
struct Metaspace {
  std::string replacement{kSpmSpace};
  PrependScheme prepend = PrependScheme::kAlways;
  bool split = false;

  // From a tokenizer.json {"type": "Metaspace", ...} (also the older
  // add_prefix_space form).
  static Result<Metaspace> from_json(const simdjson::dom::element& json);

  // Writes the normalized piece to out (replacing its contents): every ' '
  // becomes the replacement, which is prepended unless the piece already
  // starts with it (kAlways), or only when at_origin (kFirst: the piece starts
  // at offset 0 of the input).
  void apply(std::string_view piece, bool at_origin, std::string& out) const;
  // The words of a normalized piece: the whole piece, or with split=true a new
  // word at every replacement (the replacement starts the word it precedes).
  void words(std::string_view normalized, std::vector<Span>& out) const;
};

// A tokenizer.json normalizer made of Prepend and Replace(String) steps.
class TextNormalizer {
 public:
  struct Op {
    bool prepend = false;  // Prepend(content); else Replace(pattern -> content)
    std::string pattern;
    std::string content;
  };

  TextNormalizer() = default;
  explicit TextNormalizer(std::vector<Op> ops) : ops_(std::move(ops)) {}
  // null, Prepend, Replace (String pattern), Sequence of those; else an Error.
  static Result<TextNormalizer> from_json(const simdjson::dom::element& json);

  bool empty() const { return ops_.empty(); }
  // Whether no output of apply() can contain `s`: the last op that mentions
  // it is a Replace of exactly `s` by a content without it (Gemma's
  // Replace(" ", U+2581), which leaves its Split(" ") pre-tokenizer nothing
  // to split).
  bool removes(std::string_view s) const;
  // out = normalize(in). Prepend applies to non-empty text only, as in HF.
  void apply(std::string_view in, std::string& out) const;

 private:
  std::vector<Op> ops_;
};

enum class SpmMergeOrder : uint8_t {
  kPieceId,  // merged piece id ascending, then shorter left part (tokenizer.model conversion)
  kScore,    // merged piece score descending, then longer left part (GGUF conversion)
};

// The BPE model HF builds for a SentencePiece vocabulary. pieces[id] are the
// pieces; scores[id] their scores (used by kScore only).
Result<BpeModel> build_spm_bpe(std::vector<std::string> pieces, const std::vector<float>& scores,
                               SpmMergeOrder order, const BpeOptions& options);

}  // namespace pagoda::model
