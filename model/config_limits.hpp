// The bounds validate_config enforces, and the helpers both config readers
// (model_config.cpp: GGUF, hf_config.cpp: HF JSON) use for values they adjust
// rather than refuse. Internal to model/.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "model/model_config.hpp"

namespace pagoda::model {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// validate_config's bounds (see model_config.hpp).
constexpr int64_t kMaxLayers = 1024, kMaxHidden = 65536, kMaxHeads = 1024, kMaxHeadDim = 1024;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20, kMaxVocab = int64_t{1} << 22;
constexpr int64_t kMaxContext = int64_t{1} << 21;  // 2 M tokens (the longest models: ~1 M)

// Records a note about a value the loader adjusted or ignored (ModelConfig::
// notes) and logs it to stderr.
void add_config_note(ModelConfig& c, std::string note);

// A context length above kMaxContext (e.g. 10 M tokens, or transformers'
// "very large integer") is clamped to it with a note naming `source`: the
// model stays usable up to the bound.
int64_t clamp_context(int64_t ctx, const std::string& source, ModelConfig& c);

struct Architecture;
class JsonFields;

// sliding_layers for a pattern: layer l windowed when (l + 1) % pattern != 0
// (pattern <= 0: none).
void set_sliding_pattern(ModelConfig& c, int32_t pattern);

// The Gemma keys of a GGUF (gemma_config.cpp); nothing for other families.
// `prefix`: "<arch>.". Needs the sizes and the rope already read.
Result<void> read_gguf_gemma(const GgufFile& g, const std::string& prefix,
                             const Architecture& arch, ModelConfig& c);

// The MoE keys (moe_config.cpp; see model_config.hpp): GGUF <arch>.expert_*
// (an Error when `arch` is an MoE family without experts), config.json's
// expert fields (nothing for dense families); validate_moe_fields checks
// them (the message only).
Result<void> read_gguf_moe(const GgufFile& g, const std::string& prefix, const Architecture& arch,
                           ModelConfig& c);
Result<void> read_hf_moe(const JsonFields& f, const Architecture& arch, ModelConfig& c);
Result<void> validate_moe_fields(const ModelConfig& c);

}  // namespace pagoda::model
