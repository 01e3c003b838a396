// WeightFormat: how a weight matrix is stored in memory (the GGUF tensor types
// the gpu layer understands), and LinearWeight: a non-owning view of one
// linear layer's weight W[N, K] (HF `[out, in]`) in one of those formats.
//
// Storage contract for LinearWeight::data (row-major over N, each row K
// elements, rows contiguous, no padding between rows):
//  - F32:  float[N*K]
//  - F16 / BF16: uint16_t[N*K] (IEEE binary16 / bfloat16 bit patterns)
//  - block-quantized formats (Q8_0, Q4_0, Q4_K, IQ4_XS, ...): N*K/B ggml
//    blocks of B = block_elems elements; each row is K/B consecutive blocks,
//    exactly as in a GGUF file whose tensor has ne0 = K, ne1 = N.
// The data must be aligned to at least 4 bytes for F32 and 2 bytes otherwise
// (GGUF aligns tensors to 32 bytes). The CPU matmul runs F32, the packed
// 16-bit layouts, Q8_0 / Q4_0 / Q4_1 and (packed only) Q5_0 / Q5_1 /
// IQ4_NL / IQ4_XS / Q2_K..Q6_K: every supported format
// (model/llama_weights.cpp converts what it cannot keep).
// The CPU backend may instead hold a block-quantized weight in the
// WeightLayout::kPacked16 layout (rows interleaved in groups of 16, see
// gpu/cpu/quant_packed.hpp); only its quantized matmul reads that layout. LinearWeight never owns the bytes: the
// caller (the model loader) keeps them alive as long as the view is used.
// Everything here is header-only and thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "gpu/result.hpp"

namespace pagoda::gpu {

// The values are the ggml type ids (ggml.h `enum ggml_type`). Every value
// has a row in kWeightTypes below; the block layouts are in
// gpu/quant_format.hpp (32-element formats) and gpu/quant_kquants.hpp
// (256-element K-quants, IQ4_XS).
enum class WeightFormat : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

// Converts n_blocks consecutive blocks at src (any alignment) to
// n_blocks * block_elems floats at dst (not overlapping src).
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n_blocks);

// The per-format dequantizers (quant_format.cpp, quant_kquants.cpp).
namespace dequant {
void f32(const void*, float*, int64_t);
void f16(const void*, float*, int64_t);
void bf16(const void*, float*, int64_t);
void q4_0(const void*, float*, int64_t);
void q4_1(const void*, float*, int64_t);
void q5_0(const void*, float*, int64_t);
void q5_1(const void*, float*, int64_t);
void q8_0(const void*, float*, int64_t);
void q2_k(const void*, float*, int64_t);
void q3_k(const void*, float*, int64_t);
void q4_k(const void*, float*, int64_t);
void q5_k(const void*, float*, int64_t);
void q6_k(const void*, float*, int64_t);
void iq4_nl(const void*, float*, int64_t);
void iq4_xs(const void*, float*, int64_t);
}  // namespace dequant

// One ggml tensor type: THE table of weight types (DESIGN.md §5). A type the
// loader supports has a dequantizer (and is a WeightFormat); the others are
// known by size only, so that files holding them can be opened, inspected and
// refused with a clear message. `half_at` lists the byte offsets of a block's
// fp16 scale fields (the loader checks them for Inf/NaN; random-block tests
// keep them finite).
struct WeightTypeTraits {
  uint32_t ggml_type;
  const char* name;
  int32_t block_elems;    // elements per block (1 for plain types)
  int32_t block_bytes;    // bytes per block
  DequantizeFn dequantize;  // nullptr: not supported
  int8_t half_count;      // fp16 scale fields per block (quantized types)
  uint8_t half_at[2];     // their byte offsets in the block
};

// Sizes and layouts as ggml defines them (ggml-common.h; QK_K = 256).
inline constexpr WeightTypeTraits kWeightTypes[] = {
    {0, "F32", 1, 4, dequant::f32, 0, {}},
    {1, "F16", 1, 2, dequant::f16, 0, {}},
    {2, "Q4_0", 32, 18, dequant::q4_0, 1, {0}},
    {3, "Q4_1", 32, 20, dequant::q4_1, 2, {0, 2}},
    {6, "Q5_0", 32, 22, dequant::q5_0, 1, {0}},
    {7, "Q5_1", 32, 24, dequant::q5_1, 2, {0, 2}},
    {8, "Q8_0", 32, 34, dequant::q8_0, 1, {0}},
    {10, "Q2_K", 256, 84, dequant::q2_k, 2, {80, 82}},
    {11, "Q3_K", 256, 110, dequant::q3_k, 1, {108}},
    {12, "Q4_K", 256, 144, dequant::q4_k, 2, {0, 2}},
    {13, "Q5_K", 256, 176, dequant::q5_k, 2, {0, 2}},
    {14, "Q6_K", 256, 210, dequant::q6_k, 1, {208}},
    {16, "IQ2_XXS", 256, 66, nullptr, 0, {}},
    {17, "IQ2_XS", 256, 74, nullptr, 0, {}},
    {18, "IQ3_XXS", 256, 98, nullptr, 0, {}},
    {19, "IQ1_S", 256, 50, nullptr, 0, {}},
    {20, "IQ4_NL", 32, 18, dequant::iq4_nl, 1, {0}},
    {21, "IQ3_S", 256, 110, nullptr, 0, {}},
    {22, "IQ2_S", 256, 82, nullptr, 0, {}},
    {23, "IQ4_XS", 256, 136, dequant::iq4_xs, 1, {0}},
    {24, "I8", 1, 1, nullptr, 0, {}},
    {25, "I16", 1, 2, nullptr, 0, {}},
    {26, "I32", 1, 4, nullptr, 0, {}},
    {27, "I64", 1, 8, nullptr, 0, {}},
    {28, "F64", 1, 8, nullptr, 0, {}},
    {29, "IQ1_M", 256, 56, nullptr, 0, {}},
    {30, "BF16", 1, 2, dequant::bf16, 0, {}},
    {34, "TQ1_0", 256, 54, nullptr, 0, {}},
    {35, "TQ2_0", 256, 66, nullptr, 0, {}},
    {39, "MXFP4", 32, 17, nullptr, 0, {}},
};

// The row index of a ggml type id in kWeightTypes; -1 when unknown. (The
// constexpr lookups go through indices, not pointers: GCC's constant
// evaluator rejects pointer-null comparisons under -fsanitize=undefined.)
constexpr int weight_type_index(uint32_t ggml_type) {
  for (int i = 0; i < int(std::size(kWeightTypes)); ++i) {
    if (kWeightTypes[i].ggml_type == ggml_type) return i;
  }
  return -1;
}

// nullptr when the ggml type id is unknown.
constexpr const WeightTypeTraits* weight_type_traits(uint32_t ggml_type) {
  const int i = weight_type_index(ggml_type);
  return i < 0 ? nullptr : &kWeightTypes[i];
}

// What traits() gives for a value that is not a WeightFormat (a cast from an
// unchecked id): no dequantizer, 0 bytes.
inline constexpr WeightTypeTraits kUnknownWeightType{UINT32_MAX, "?", 1, 0, nullptr, 0, {}};

// The row of a WeightFormat (every enumerator has one).
constexpr const WeightTypeTraits& traits(WeightFormat f) {
  const int i = weight_type_index(static_cast<uint32_t>(f));
  return i < 0 ? kUnknownWeightType : kWeightTypes[i];
}

// Elements per block: 32 or 256 for the block-quantized formats, 1 otherwise.
constexpr int64_t block_elems(WeightFormat f) { return traits(f).block_elems; }

// Bytes per block (static_assert'ed against the block structs).
constexpr int64_t block_bytes(WeightFormat f) { return traits(f).block_bytes; }

constexpr bool is_block_quantized(WeightFormat f) { return block_elems(f) > 1; }

// Bytes of n elements. Requires n % block_elems(f) == 0.
constexpr int64_t storage_bytes(WeightFormat f, int64_t n) {
  return n / block_elems(f) * block_bytes(f);
}

constexpr std::string_view format_name(WeightFormat f) { return traits(f).name; }

// Maps a ggml type id (as stored in a GGUF tensor info) to a WeightFormat;
// nullopt for types without a dequantizer in the table (IQ2/IQ3/IQ1, ...).
constexpr std::optional<WeightFormat> weight_format_from_ggml(uint32_t ggml_type) {
  const int i = weight_type_index(ggml_type);
  if (i < 0 || kWeightTypes[i].dequantize == nullptr) return std::nullopt;
  return static_cast<WeightFormat>(ggml_type);
}

// "F32, F16, BF16, Q8_0, ..." : the supported types, for error messages.
inline std::string supported_format_names() {
  std::string s;
  for (const WeightTypeTraits& t : kWeightTypes) {
    if (t.dequantize == nullptr) continue;
    s += (s.empty() ? "" : ", ") + std::string(t.name);
  }
  return s;
}

// How the rows of a LinearWeight lie in memory: kRows is the storage contract
// above (the file's layout); kPacked16 is the CPU matmul's interleaved layout
// of 16-row groups (gpu/cpu/quant_packed.hpp), for the block-quantized
// formats (Q8_0 .. Q6_K, IQ4_NL, IQ4_XS).
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
