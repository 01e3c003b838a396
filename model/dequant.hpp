// ggml tensor types: sizes, names, and conversion of their data to float.
//
// Block layouts (little-endian, as in ggml's ggml-common.h / ggml-quants.c):
//   F32   1 element,  4 bytes
//   F16   1 element,  2 bytes  IEEE 754 binary16
//   BF16  1 element,  2 bytes  the upper 16 bits of an IEEE binary32
//   Q8_0  32 elements, 34 bytes {fp16 d; int8 qs[32]}:          x[i] = d * qs[i]
//   Q4_0  32 elements, 18 bytes {fp16 d; uint8 qs[16]}:
//           x[j] = ((qs[j] & 15) - 8) * d,  x[j+16] = ((qs[j] >> 4) - 8) * d
//   Q4_1  32 elements, 20 bytes {fp16 d; fp16 m; uint8 qs[16]}:
//           x[j] = (qs[j] & 15) * d + m,    x[j+16] = (qs[j] >> 4) * d + m
// Other common ggml types (Q5_x, K-quants, IQ-quants, integer types, F64) are
// known by size only, so files holding them can be opened and inspected;
// dequantize() rejects them.
//
// Thread-safety: every function here is pure and may be called concurrently.
#pragma once

#include <cstdint>
#include <string>

#include "gpu/quant_format.hpp"
#include "gpu/result.hpp"
#include "model/gguf_file.hpp"

namespace pagoda::model {

struct GgmlTypeTraits {
  uint32_t raw_type;     // the ggml type id
  const char* name;      // "F32", "Q4_1", ...
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
  bool dequantizable;    // dequantize() supports it
};

// nullptr when the size of raw_type is not known.
const GgmlTypeTraits* ggml_type_traits(uint32_t raw_type);

// "Q4_1", or "type 99" for an unknown id.
std::string ggml_type_name(uint32_t raw_type);

// Bytes occupied by n_elements of the type. Errors: unknown type, n_elements
// not a multiple of the block size, overflow of uint64.
Result<uint64_t> tensor_bytes(uint32_t raw_type, uint64_t n_elements);
Result<uint64_t> tensor_bytes(GgmlType type, uint64_t n_elements);

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
