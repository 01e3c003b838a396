// ggml tensor types: sizes, names, and conversion of their data to float,
// for the model layer. The types themselves are ONE table,
// gpu::kWeightTypes (gpu/weight_format.hpp): its rows give each type's block
// size and bytes and, for the types Pagoda loads (F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS), its dequantizer; the
// layouts are documented in gpu/quant_format.hpp and gpu/quant_kquants.hpp.
// Other common ggml types (IQ1/IQ2/IQ3, integer types, F64, ...) are known by
// size only, so files holding them can be opened and inspected; dequantize()
// rejects them with the list of supported types.
//
// Thread-safety: every function here is pure and may be called concurrently.
#pragma once

#include <cstdint>
#include <string>

#include "gpu/quant_format.hpp"
#include "gpu/result.hpp"
#include "model/gguf_file.hpp"

namespace pagoda::model {

using GgmlTypeTraits = gpu::WeightTypeTraits;

// nullptr when the size of raw_type is not known.
const GgmlTypeTraits* ggml_type_traits(uint32_t raw_type);

// "Q4_1", or "type 99" for an unknown id.
std::string ggml_type_name(uint32_t raw_type);

// Bytes occupied by n_elements of the type. Errors: unknown type, n_elements
// not a multiple of the block size, overflow of uint64.
Result<uint64_t> tensor_bytes(uint32_t raw_type, uint64_t n_elements);
Result<uint64_t> tensor_bytes(GgmlType type, uint64_t n_elements);

// "F32, F16, BF16, Q4_0, ...": the types dequantize() supports.
std::string supported_type_names();

// Converts n elements of type raw_type to float.
// Requires: src holds tensor_bytes(raw_type, n) bytes (no alignment needed);
// dst holds n floats. Errors (nothing written): unsupported type, n not a
// multiple of the block size.
Result<void> dequantize(uint32_t raw_type, const uint8_t* src, float* dst, uint64_t n);

// IEEE binary16 <-> binary32. fp16_to_float is exact (subnormals, +-inf, NaN
// payload kept). float_to_fp16 rounds to nearest even; overflow gives +-inf;
// NaN stays a (quiet) NaN.
inline float fp16_to_float(uint16_t h) { return gpu::fp16_to_fp32(h); }
inline uint16_t float_to_fp16(float f) { return gpu::fp32_to_fp16(f); }

// bfloat16 <-> binary32. bf16_to_float is exact; float_to_bf16 rounds to
// nearest even; NaN stays a (quiet) NaN.
inline float bf16_to_float(uint16_t b) { return gpu::bf16_to_fp32(b); }
inline uint16_t float_to_bf16(float f) { return gpu::fp32_to_bf16(f); }

}  // namespace pagoda::model
