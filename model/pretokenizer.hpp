// PreTokenizer: splits a text segment into pre-tokens ("words") before BPE,
// reproducing HF `tokenizers` pre-tokenizers for byte-level BPE models:
//  - Split with one of the known regexes (behavior Isolated), matched by hand
//    (no std::regex: it has no \p{L}); GPT-2's is also ByteLevel(use_regex=true);
//  - Digits(individual_digits);
//  - Sequence of the above (each step splits every piece of the previous one).
// Each piece is matched in isolation: a piece's end is "end of input" for the
// regex (lookaheads such as (?!\S) see nothing past it), as in HF.
//
// Input need not be valid UTF-8; an ill-formed byte counts as a character of
// no class (not a letter, number or space).
//
// Immutable after construction; split() is const and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/result.hpp"

namespace simdjson::dom {
class element;
}

namespace pagoda::model {

// The split regexes this code knows, by the models that use them.
enum class SplitPattern : uint8_t {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,   // as kLlama3 but \p{N} (single digits)
};

// The regex source text of a pattern, exactly as HF tokenizer.json spells it.
std::string_view split_pattern_regex(SplitPattern p);
// The pattern whose regex source is exactly `regex`, if any.
std::optional<SplitPattern> recognise_split_regex(std::string_view regex);

// A pre-token: byte offsets [first, second) into the segment.
using Span = std::pair<uint32_t, uint32_t>;

class PreTokenizer {
 public:
  struct Step {
    enum class Kind : uint8_t { kSplit, kDigits } kind;
    SplitPattern pattern = SplitPattern::kGpt2;  // kSplit
    bool individual_digits = false;              // kDigits
  };

  PreTokenizer() = default;  // no steps: a segment is one pre-token
  explicit PreTokenizer(std::vector<Step> steps, bool byte_level = false)
      : steps_(std::move(steps)), byte_level_(byte_level) {}

  // From a tokenizer.json "pre_tokenizer" value (null, Split, ByteLevel,
  // Digits, Sequence). Anything else, or an option this code does not
  // reproduce (e.g. ByteLevel add_prefix_space=true, an unknown regex), is an
  // Error naming it.
  static Result<PreTokenizer> from_json(const simdjson::dom::element& json);

  const std::vector<Step>& steps() const { return steps_; }
  // True when the configuration contained a ByteLevel step: the pieces are
  // then byte-mapped (GPT-2 bytes_to_unicode) before BPE. ByteLevel must be
  // the last step (from_json rejects steps after it).
  bool byte_level() const { return byte_level_; }

  // Appends the pre-tokens of `text` to out (cleared first). `scratch` is a
  // caller-owned buffer reused between calls to avoid allocations.
  void split(std::string_view text, std::vector<Span>& out, std::vector<Span>& scratch) const;

 private:
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

// Appends the Isolated split of text[begin, end) by `p` to out (offsets are
// absolute, non-empty, covering [begin, end) in order).
void split_by_pattern(SplitPattern p, std::string_view text, uint32_t begin, uint32_t end,
                      std::vector<Span>& out);

}  // namespace pagoda::model
