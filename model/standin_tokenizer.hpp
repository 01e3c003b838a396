// The byte-level stand-in tokenizer for models that come without one (dummy
// weights from a bare config.json, model/configs/*): token id b (0..255) is
// the byte b, so any text encodes (one token per byte) and any id sequence
// decodes (invalid UTF-8 becomes U+FFFD, ids without a byte decode to
// nothing). BOS / EOS, when the config has them, are special tokens "<s>" /
// "</s>" at the config's ids; BOS is added to encoded prompts when bos_id >= 0.
// An id below 256 stays its byte (no "<s>" text then) but still acts as BOS /
// EOS (the tiny config's 1 and 2 are bytes 0x01 and 0x02).
// It is not the model's real tokenizer: text in and out is only meaningful as
// bytes, which is all benchmarks and dummy-weight runs need.
//
// Thread-safety: the result is immutable, shareable across threads.
#pragma once

#include <cstdint>
#include <memory>

#include "gpu/result.hpp"
#include "model/tokenizer.hpp"

namespace pagoda::model {

Result<std::shared_ptr<const Tokenizer>> make_standin_tokenizer(int32_t bos_id, int32_t eos_id);

}  // namespace pagoda::model
