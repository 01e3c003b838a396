// WeightFormat: how a weight matrix is stored in memory (the GGUF tensor types
// the gpu layer understands), and LinearWeight: a non-owning view of one
// linear layer's weight W[N, K] (HF `[out, in]`) in one of those formats.
//
// Storage contract for LinearWeight::data (row-major over N, each row K
// elements, rows contiguous, no padding between rows):
//  - F32:  float[N*K]
//  - F16 / BF16: uint16_t[N*K] (IEEE binary16 / bfloat16 bit patterns)
//  - Q8_0 / Q4_0 / Q4_1: N*K/32 ggml blocks (see gpu/quant_format.hpp); each
//    row is K/32 consecutive blocks, exactly as in a GGUF file whose tensor
//    has ne0 = K, ne1 = N.
// The data must be aligned to at least 4 bytes for F32 and 2 bytes otherwise
// (GGUF aligns tensors to 32 bytes).
// The CPU backend may instead hold a block-quantized weight in the
// WeightLayout::kPacked16 layout (rows interleaved in groups of 16, see
// gpu/cpu/quant_packed.hpp); only its quantized matmul reads that layout. LinearWeight never owns the bytes: the
// caller (the model loader) keeps them alive as long as the view is used.
// Everything here is header-only and thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpu/result.hpp"

namespace pagoda::gpu {

// The values are the ggml type ids (ggml.h `enum ggml_type`).
enum class WeightFormat : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 8,
  BF16 = 30,
};

// Elements per block: 32 for the block-quantized formats, 1 otherwise.
constexpr int64_t block_elems(WeightFormat f) {
  switch (f) {
    case WeightFormat::Q4_0:
    case WeightFormat::Q4_1:
    case WeightFormat::Q8_0: return 32;
    default: return 1;
  }
}

// Bytes per block (static_assert'ed against the block structs in quant_format.hpp).
constexpr int64_t block_bytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return 4;
    case WeightFormat::F16: return 2;
    case WeightFormat::BF16: return 2;
    case WeightFormat::Q4_0: return 18;
    case WeightFormat::Q4_1: return 20;
    case WeightFormat::Q8_0: return 34;
  }
  return 0;
}

constexpr bool is_block_quantized(WeightFormat f) { return block_elems(f) > 1; }

// Bytes of n elements. Requires n % block_elems(f) == 0.
constexpr int64_t storage_bytes(WeightFormat f, int64_t n) {
  return n / block_elems(f) * block_bytes(f);
}

constexpr std::string_view format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return "F32";
    case WeightFormat::F16: return "F16";
    case WeightFormat::BF16: return "BF16";
    case WeightFormat::Q4_0: return "Q4_0";
    case WeightFormat::Q4_1: return "Q4_1";
    case WeightFormat::Q8_0: return "Q8_0";
  }
  return "?";
}

// Maps a ggml type id (as stored in a GGUF tensor info) to a WeightFormat;
// nullopt for types the gpu layer does not handle (K-quants, Q5_*, ...).
inline std::optional<WeightFormat> weight_format_from_ggml(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return WeightFormat::F32;
    case 1: return WeightFormat::F16;
    case 2: return WeightFormat::Q4_0;
    case 3: return WeightFormat::Q4_1;
    case 8: return WeightFormat::Q8_0;
    case 30: return WeightFormat::BF16;
    default: return std::nullopt;
  }
}

// How the rows of a LinearWeight lie in memory: kRows is the storage contract
// above (the file's layout); kPacked16 is the CPU matmul's interleaved layout
// of 16-row groups (gpu/cpu/quant_packed.hpp), for Q8_0 / Q4_0 / Q4_1 only.
enum class WeightLayout : uint8_t { kRows = 0, kPacked16 = 1 };

// A view of W[N, K]; see the storage contract above.
struct LinearWeight {
  WeightFormat format = WeightFormat::F32;
  int64_t n = 0;               // output features (rows of W)
  int64_t k = 0;               // input features (row length)
  const void* data = nullptr;  // not owned
  WeightLayout layout = WeightLayout::kRows;

  int64_t row_bytes() const { return storage_bytes(format, k); }  // kRows only
};

// Validates and builds a view: n, k > 0, k a multiple of the block size,
// data non-null. It does not check the byte count (the caller knows it).
inline Result<LinearWeight> make_linear_weight(WeightFormat f, int64_t n, int64_t k,
                                               const void* data) {
  if (n <= 0 || k <= 0) {
    return make_error("linear weight: bad shape N=" + std::to_string(n) +
                      " K=" + std::to_string(k));
  }
  if (k % block_elems(f) != 0) {
    return make_error("linear weight: K=" + std::to_string(k) + " is not a multiple of " +
                      std::to_string(block_elems(f)) + " for " +
                      std::string(format_name(f)));
  }
  if (data == nullptr) return make_error("linear weight: null data");
  return LinearWeight{f, n, k, data};
}

}  // namespace pagoda::gpu
