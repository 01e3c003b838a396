#include "model/grammar_vocab.hpp"

#include <exception>

namespace pagoda::model {
namespace {

bool grammar_visible(const Tokenizer& tok, int32_t id) {
  if (tok.is_special(id) || tok.is_control(id)) return false;
  const TokenType t = tok.token_type(id);
  return t != TokenType::kUnknown && t != TokenType::kUnused;
}

}  // namespace

std::vector<std::string> grammar_token_strings(const Tokenizer& tok, int32_t model_vocab) {
  std::vector<std::string> out(size_t(std::max(model_vocab, 0)));
  const int32_t n = std::min(model_vocab, tok.vocab_size());
  for (int32_t id = 0; id < n; ++id) {
    if (!grammar_visible(tok, id)) continue;
    if (tok.decoder().kind == DecoderSpec::Kind::kNone) {
      out[size_t(id)] = std::string(tok.piece(id));  // joined by ' ': the piece itself
    } else {
      out[size_t(id)] = std::string(tok.token_bytes(id));
    }
  }
  return out;
}

Result<xgrammar::TokenizerInfo> grammar_tokenizer_info(const Tokenizer& tok, int32_t model_vocab,
                                                       const std::vector<int32_t>& stop_ids) {
  if (model_vocab < 1) return make_error("grammar vocabulary: the model has no vocabulary");
  if (stop_ids.empty()) return make_error("grammar vocabulary: the model has no stop token");
  for (int32_t id : stop_ids) {
    if (id < 0 || id >= model_vocab) {
      return make_error("grammar vocabulary: stop id " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  try {
    return xgrammar::TokenizerInfo(grammar_token_strings(tok, model_vocab), xgrammar::VocabType::RAW,
                                   model_vocab, stop_ids, /*add_prefix_space=*/false);
  } catch (const std::exception& e) {
    return make_error(std::string("grammar vocabulary: ") + e.what());
  }
}

}  // namespace pagoda::model
