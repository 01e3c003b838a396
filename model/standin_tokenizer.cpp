#include "model/standin_tokenizer.hpp"

#include <string>
#include <utility>
#include <vector>

namespace pagoda::model {

Result<std::shared_ptr<const Tokenizer>> make_standin_tokenizer(int32_t bos_id, int32_t eos_id) {
  const auto& spell = byte_spellings();
  std::vector<std::string> pieces(spell.begin(), spell.end());  // id b = byte b
  Result<BpeModel> model = BpeModel::build(std::move(pieces), {}, BpeOptions{});
  if (!model) return model.error();
  TokenizerParts parts;
  parts.kind = TokenizerKind::kByteLevelBpe;
  parts.model = std::move(*model);
  parts.byte_level = true;  // every byte is spelled as its own piece; no merges
  parts.decoder.kind = DecoderSpec::Kind::kByteLevel;
  if (bos_id >= 256) parts.added.push_back({"<s>", bos_id, true, false, false, false, false});
  if (eos_id >= 256 && eos_id != bos_id) {
    parts.added.push_back({"</s>", eos_id, true, false, false, false, false});
  }
  parts.bos_id = bos_id;
  parts.eos_id = eos_id;
  parts.add_bos = bos_id >= 0;
  return std::shared_ptr<const Tokenizer>(std::make_shared<Tokenizer>(std::move(parts)));
}

}  // namespace pagoda::model
