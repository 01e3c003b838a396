// BpeModel: the BPE "model" stage of HF `tokenizers` (models::BPE) for one
// pre-token at a time, shared by byte-level BPE (GPT-2 / Llama-3 / Qwen2 /
// SmolLM2) and SentencePiece-style BPE (Llama 2), which HF runs as BPE with
// byte fallback over merges derived from the SentencePiece vocabulary.
//
// Merging follows HF exactly: the word starts as one symbol per character
// (per byte for byte-level), then the adjacent pair with the lowest merge rank
// is merged, leftmost first among equal ranks, until no pair has a rank.
// Characters missing from the vocabulary become <0xNN> byte tokens
// (byte_fallback), else the unk token (fused when fuse_unk), else nothing.
// With ignore_merges, a word that is itself a vocabulary entry is emitted whole.
//
// Immutable after construction; encode_* are const and thread-safe (all
// scratch state lives in a caller-owned BpeScratch).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/result.hpp"

namespace simdjson::dom {
class element;
}

namespace pagoda::model {

// Transparent hashing so string_view lookups allocate nothing.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// GPT-2's bytes_to_unicode: the code point each byte is spelled with in a
// byte-level vocabulary, and the UTF-8 spelling of every byte.
char32_t byte_to_unicode(uint8_t b);
int unicode_to_byte(char32_t cp);  // the inverse, -1 for other code points
const std::array<std::string, 256>& byte_spellings();

// Per-call working memory for BpeModel; reuse one per thread/encode call.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;  // bytes covered; 0 marks a symbol merged into its left neighbour
  };
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string mapped;  // byte-level spelling of the word (ignore_merges lookups)
};

struct BpeOptions {
  int32_t unk_id = -1;  // -1: unknown characters are dropped
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  BpeModel() = default;

  // pieces[id] is the vocabulary entry of id (an empty string marks an unused
  // id). merges are (left, right) pieces in rank order; a later duplicate pair
  // overrides an earlier one, as in HF. Errors name the missing piece.
  static Result<BpeModel> build(std::vector<std::string> pieces,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                const BpeOptions& options);
  // As build(), with merges already resolved: (left id, right id, new id) in rank order.
  static Result<BpeModel> build_resolved(std::vector<std::string> pieces,
                                         const std::vector<std::array<int32_t, 3>>& merges,
                                         const BpeOptions& options);
  // From a tokenizer.json "model" object of type BPE.
  static Result<BpeModel> from_json(const simdjson::dom::element& model);

  // Appends the ids of one pre-token. encode_bytes spells each byte with
  // bytes_to_unicode first (byte-level BPE); encode_chars works on the UTF-8
  // characters of the word (ill-formed bytes go to byte fallback / unk).
  void encode_bytes(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;
  void encode_chars(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;

  const std::vector<std::string>& pieces() const { return pieces_; }
  const PieceMap& vocab() const { return vocab_; }
  const BpeOptions& options() const { return options_; }
  int32_t find(std::string_view piece) const {
    auto it = vocab_.find(piece);
    return it == vocab_.end() ? -1 : it->second;
  }

 private:
  // Open-addressing map (left id, right id) -> (rank, new id).
  struct MergeSlot {
    uint64_t key = ~uint64_t{0};
    uint32_t rank = 0;
    int32_t new_id = -1;
  };
  const MergeSlot* find_merge(int32_t left, int32_t right) const;
  void insert_merge(int32_t left, int32_t right, uint32_t rank, int32_t new_id);

  void push_symbol(BpeScratch& s, int32_t id, uint32_t len) const;
  void add_unknown(BpeScratch& s, std::string_view ch, int32_t& pending_unk,
                   uint32_t& pending_len) const;
  void merge_all(BpeScratch& s) const;

  std::vector<std::string> pieces_;
  PieceMap vocab_;
  std::vector<MergeSlot> merges_;  // size is a power of two (or 0)
  uint64_t merge_mask_ = 0;
  std::array<int32_t, 256> byte_ids_{};      // byte-level: id of the byte's spelling, -1 if none
  std::array<int32_t, 256> fallback_ids_{};  // id of "<0xNN>", -1 if none
  BpeOptions options_;
};

}  // namespace pagoda::model
