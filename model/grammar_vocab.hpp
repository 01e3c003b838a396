// Grammar vocabulary: xgrammar's TokenizerInfo built from our Tokenizer, so
// that a grammar's token masks follow exactly the bytes our decoder gives
// each token (issue 23, the tokenizer bridge).
//
// Every token is given to xgrammar as the RAW bytes it contributes to
// decoded text when it is not the first token (Tokenizer::token_bytes): the
// byte-level spelling mapped back to bytes (GPT-2, Llama-3, Qwen2, SmolLM2),
// "▁" turned into a space and "<0xNN>" into its byte (SentencePiece byte
// fallback). Our decoding is the reference, so xgrammar's own vocabulary
// detection is never involved. Special and control tokens (chat markers,
// BOS, padding), unknown/unused ones and the ids between the tokenizer's
// vocabulary and the model's (embedding padding) are given as "" (xgrammar's
// "special": never allowed by a grammar). `stop_ids` are the tokens that end
// a finished grammar (the model's EOS ids; a matcher may override them).
//
// Thread-safety: a pure function of immutable inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <xgrammar/tokenizer_info.h>

#include "gpu/result.hpp"
#include "model/tokenizer.hpp"

namespace pagoda::model {

// The per-id strings grammar_tokenizer_info gives xgrammar ("" for special ids),
// [model_vocab]. Requires model_vocab >= 1; ids past the tokenizer are "".
std::vector<std::string> grammar_token_strings(const Tokenizer& tok, int32_t model_vocab);

// xgrammar's TokenizerInfo for a model whose logits have model_vocab rows.
// Errors: model_vocab < 1, a stop id outside [0, model_vocab), no stop id.
Result<xgrammar::TokenizerInfo> grammar_tokenizer_info(const Tokenizer& tok, int32_t model_vocab,
                                                       const std::vector<int32_t>& stop_ids);

}  // namespace pagoda::model
