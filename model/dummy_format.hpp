// LoadFormat and DummyDtype: how model weights come into being.
//  - LoadFormat::kAuto reads them from the model file (GGUF, safetensors).
//  - LoadFormat::kDummy makes random weights of the config.json's shape in
//    memory (model/dummy_weights.hpp; nothing is read but the config), as
//    vLLM's --load-format dummy: for measuring at a realistic size and for
//    CUDA-vs-CPU checks without a checkpoint.
// DummyDtype picks the stored format of the dummy linear weights:
//  - kAuto: BF16-representable values; BF16 on CUDA, fp32 on the CPU (so both
//    backends hold bitwise the same weights);
//  - kBf16 / kF32: the same values, stored as named;
//  - kQ8_0 / kQ4_0: random ggml blocks (needs WeightPrecision::kQuantized on
//    the CPU, where they stay blocks; CUDA converts them to BF16).
// Header-only, pure functions.
#pragma once

#include <optional>
#include <string_view>

namespace pagoda::model {

enum class LoadFormat { kAuto, kDummy };
enum class DummyDtype { kAuto, kBf16, kF32, kQ8_0, kQ4_0 };

inline std::optional<LoadFormat> parse_load_format(std::string_view s) {
  if (s == "auto") return LoadFormat::kAuto;
  if (s == "dummy") return LoadFormat::kDummy;
  return std::nullopt;
}

inline std::optional<DummyDtype> parse_dummy_dtype(std::string_view s) {
  if (s == "auto") return DummyDtype::kAuto;
  if (s == "bf16") return DummyDtype::kBf16;
  if (s == "f32") return DummyDtype::kF32;
  if (s == "q8_0") return DummyDtype::kQ8_0;
  if (s == "q4_0") return DummyDtype::kQ4_0;
  return std::nullopt;
}

constexpr std::string_view dummy_dtype_name(DummyDtype d) {
  switch (d) {
    case DummyDtype::kAuto: return "auto";
    case DummyDtype::kBf16: return "bf16";
    case DummyDtype::kF32: return "f32";
    case DummyDtype::kQ8_0: return "q8_0";
    case DummyDtype::kQ4_0: return "q4_0";
  }
  return "?";
}

}  // namespace pagoda::model
