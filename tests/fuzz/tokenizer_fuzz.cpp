// Fuzz target: tokenizer encode and incremental decode (model/tokenizer,
// model/incremental_decoder) on the committed tokenizer.json files of
// tests/data/tokenizer (byte-level BPE: smollm, qwen2, llama3;
// SentencePiece BPE with byte fallback: spm).
//
// Input: byte 0 picks the tokenizer (mod 4), byte 1 the flags (bit 0
// add_special, bit 1 skip_special, bit 2 "ids mode"); the rest is text to
// encode, or in ids mode little-endian u16 pairs read as token ids (some
// beyond the vocabulary).
// Invariants: encoded ids are inside the vocabulary (or added tokens);
// streamed text is always well-formed UTF-8; for well-formed input text the
// stream (every push() + finish()) equals decode(ids) (the decoder's
// contract), and smollm (no normalizer) round-trips the text exactly.
#include <memory>

#include "fuzz_util.hpp"
#include "model/incremental_decoder.hpp"
#include "model/tokenizer.hpp"
#include "model/utf8.hpp"

using namespace pagoda;

namespace {

using TokenizerPtr = std::shared_ptr<const model::Tokenizer>;

const std::vector<TokenizerPtr>& tokenizers() {
  static const std::vector<TokenizerPtr> all = [] {
    std::vector<TokenizerPtr> out;
    for (const char* name : {"smollm", "qwen2", "llama3", "spm"}) {
      auto t = model::Tokenizer::from_tokenizer_json(
          fuzz::test_data(std::string("tokenizer/") + name + "/tokenizer.json"));
      FUZZ_CHECK(t.ok(), "the committed tokenizer loads");
      out.push_back(*t);
    }
    return out;
  }();
  return all;
}

std::string stream(const TokenizerPtr& tok, const std::vector<int32_t>& ids, bool skip) {
  model::IncrementalDecoder dec(tok, skip);
  std::string out;
  for (int32_t id : ids) {
    const size_t before = out.size();
    dec.push(id, out);
    FUZZ_CHECK(model::utf8::is_valid(std::string_view(out).substr(before)),
               "each push emits whole UTF-8 characters");
  }
  out += dec.finish();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t which = data[0] % 4;
  const TokenizerPtr& tok = tokenizers()[which];
  const bool add_special = data[1] & 1, skip = data[1] & 2, ids_mode = data[1] & 4;
  const std::string_view text = fuzz::as_text(data + 2, size - 2);
  std::vector<int32_t> ids;
  if (ids_mode) {
    for (size_t i = 0; i + 1 < text.size(); i += 2) {
      ids.push_back(int32_t(uint8_t(text[i]) | (uint8_t(text[i + 1]) << 8)) * 3 % (tok->vocab_size() + 300));
    }
  } else {
    ids = tok->encode(text, add_special);
    for (int32_t id : ids) {
      FUZZ_CHECK(id >= 0 && !tok->piece(id).empty(), "encoded ids are known tokens");
    }
  }
  const std::string streamed = stream(tok, ids, skip);
  FUZZ_CHECK(model::utf8::is_valid(streamed), "the stream is well-formed UTF-8");
  const std::string decoded = tok->decode(ids, skip);
  if (!ids_mode && model::utf8::is_valid(text)) {
    FUZZ_CHECK(streamed == decoded, "stream == decode for well-formed text");
    if (which == 0 && !skip) FUZZ_CHECK(decoded == text, "smollm round-trips the text");
  }
  return 0;
}
