// IncrementalDecoder: streaming detokenization. Feed generated ids one at a
// time; each push() returns the text that became final with that id.
//
// Contract:
//  - Text is only emitted in whole UTF-8 characters: a token that ends inside
//    a character (byte-level pieces, "<0xE4>"-style byte-fallback tokens)
//    emits nothing until the character completes.
//  - The concatenation of every push() and finish() equals
//    tokenizer.decode(all ids, skip_special) whenever the decoded bytes are
//    well-formed UTF-8. For ill-formed bytes the stream emits U+FFFD per
//    maximal ill-formed subpart (byte-level, as HF) or per byte of the
//    unfinished byte-fallback run; HF replaces every byte of an ill-formed
//    byte-fallback run, including well-formed characters already streamed
//    from it, which a stream cannot take back.
//  - The leading-space strip of SentencePiece decoders applies to the start
//    of the stream only.
//
// Not thread-safe (one decoder per stream); the Tokenizer it holds is shared
// and immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/tokenizer.hpp"

namespace pagoda::model {

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special = false);

  // Appends the text completed by id to out; returns the number of bytes appended.
  size_t push(int32_t id, std::string& out);
  std::string push(int32_t id) {
    std::string s;
    push(id, s);
    return s;
  }
  // End of stream: an unfinished character becomes U+FFFD. The decoder is
  // then ready for a new stream.
  std::string finish();
  void reset();

  // Bytes held back waiting for the rest of a character (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  void emit(std::string& out, bool final_flush);
  void append_stripped(std::string_view bytes);

  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::string pending_;       // bytes not yet emitted
  bool in_byte_run_ = false;  // pending_ comes from byte-fallback tokens
  bool first_token_ = true;   // nothing decoded yet (Metaspace first-token rule, ' ' joins)
  bool at_start_ = true;      // no byte produced yet (leading-space strip)
};

}  // namespace pagoda::model
