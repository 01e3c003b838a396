// SentencePieceModel: the parts of a SentencePiece `tokenizer.model`
// (a serialized sentencepiece.ModelProto) that tokenization needs, read by a
// minimal protobuf wire-format reader (no protobuf dependency).
//
// Read: pieces (piece, score, type), trainer_spec (model_type, byte_fallback,
// unk/bos/eos/pad ids) and normalizer_spec (name, add_dummy_prefix,
// remove_extra_whitespaces, escape_whitespaces, whether a precompiled
// charsmap is present). Unknown fields are skipped; malformed input is an Error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/result.hpp"

namespace pagoda::model {

struct SentencePieceModel {
  // sentencepiece.ModelProto.SentencePiece.Type (same numbers as GGUF token_type).
  enum PieceType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  // sentencepiece.TrainerSpec.ModelType.
  enum ModelType : int32_t { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

  struct Piece {
    std::string piece;
    float score = 0.0f;
    int32_t type = kNormal;
  };

  std::vector<Piece> pieces;
  int32_t model_type = kUnigram;
  bool byte_fallback = false;
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t pad_id = -1;
  std::string normalizer_name;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  bool has_precompiled_charsmap = false;

  static Result<SentencePieceModel> parse(std::string_view bytes);
  static Result<SentencePieceModel> load(const std::string& path);
};

}  // namespace pagoda::model
