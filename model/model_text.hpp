// ModelText: the text side of a model — its tokenizer, its chat template source
// and the strings of its special tokens — loaded from a .gguf file or an HF
// directory (tokenizer.json / tokenizer.model, tokenizer_config.json,
// chat_template.jinja). A directory (or its config.json) without
// tokenizer.json and tokenizer.model gets the byte-level stand-in
// (model/standin_tokenizer.hpp) with the config's BOS/EOS ids.
//
// Contract: load_model_text() never throws; a missing or broken tokenizer is an
// Error naming the file. A model without a chat template is not an error:
// chat_template is then empty and callers decide (the CLI and the server
// reject chat requests for it with a clear message). The result is immutable
// and may be shared across threads.
#pragma once

#include <memory>
#include <string>

#include "gpu/result.hpp"
#include "model/tokenizer.hpp"

namespace pagoda::model {

struct ModelText {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string chat_template;  // Jinja source; empty when the model has none
  std::string bos_token;      // text of the BOS token ("" when none)
  std::string eos_token;      // text of the EOS token ("" when none)
};

Result<ModelText> load_model_text(const std::string& model_path);

// True when model_path names a GGUF file (by its magic, not its extension).
bool is_gguf_path(const std::string& model_path);

}  // namespace pagoda::model
