#include "model/dequant.hpp"

#include "gpu/quant_format.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>

namespace pagoda::model {

namespace {

// Sizes as in ggml (ggml.c type_traits; QK_K = 256).
constexpr std::array<GgmlTypeTraits, 30> kTraits = {{
    {0, "F32", 1, 4, true},          {1, "F16", 1, 2, true},
    {2, "Q4_0", 32, 18, true},       {3, "Q4_1", 32, 20, true},
    {6, "Q5_0", 32, 22, false},      {7, "Q5_1", 32, 24, false},
    {8, "Q8_0", 32, 34, true},       {10, "Q2_K", 256, 84, false},
    {11, "Q3_K", 256, 110, false},   {12, "Q4_K", 256, 144, false},
    {13, "Q5_K", 256, 176, false},   {14, "Q6_K", 256, 210, false},
    {16, "IQ2_XXS", 256, 66, false}, {17, "IQ2_XS", 256, 74, false},
    {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
    {20, "IQ4_NL", 32, 18, false},   {21, "IQ3_S", 256, 110, false},
    {22, "IQ2_S", 256, 82, false},   {23, "IQ4_XS", 256, 136, false},
    {24, "I8", 1, 1, false},         {25, "I16", 1, 2, false},
    {26, "I32", 1, 4, false},        {27, "I64", 1, 8, false},
    {28, "F64", 1, 8, false},        {29, "IQ1_M", 256, 56, false},
    {30, "BF16", 1, 2, true},        {34, "TQ1_0", 256, 54, false},
    {35, "TQ2_0", 256, 66, false},   {39, "MXFP4", 32, 17, false},
}};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t raw_type) {
  for (const auto& t : kTraits) {
    if (t.raw_type == raw_type) return &t;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t raw_type) {
  const GgmlTypeTraits* t = ggml_type_traits(raw_type);
  return t ? std::string(t->name) : "type " + std::to_string(raw_type);
}

Result<uint64_t> tensor_bytes(uint32_t raw_type, uint64_t n_elements) {
  const GgmlTypeTraits* t = ggml_type_traits(raw_type);
  if (!t) return make_error("unknown ggml type id " + std::to_string(raw_type));
  if (n_elements % t->block_elems != 0) {
    return make_error("element count " + std::to_string(n_elements) + " is not a multiple of the " +
                      t->name + " block size " + std::to_string(t->block_elems));
  }
  const uint64_t blocks = n_elements / t->block_elems;
  if (blocks != 0 && t->block_bytes > UINT64_MAX / blocks) {
    return make_error("byte size of " + std::to_string(n_elements) + " " + t->name +
                      " elements overflows");
  }
  return blocks * t->block_bytes;
}

Result<uint64_t> tensor_bytes(GgmlType type, uint64_t n_elements) {
  return tensor_bytes(static_cast<uint32_t>(type), n_elements);
}

Result<void> dequantize(uint32_t raw_type, const uint8_t* src, float* dst, uint64_t n) {
  const GgmlTypeTraits* t = ggml_type_traits(raw_type);
  if (!t || !t->dequantizable) {
    return make_error("cannot dequantize ggml type " + ggml_type_name(raw_type) +
                      " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)");
  }
  if (n % t->block_elems != 0) {
    return make_error("element count " + std::to_string(n) + " is not a multiple of the " +
                      t->name + " block size " + std::to_string(t->block_elems));
  }
  // The block math lives in the gpu layer (gpu/quant_format.hpp), shared with
  // the CPU matmul kernels; the traits check above guarantees the id is one
  // of the six formats it handles.
  gpu::dequantize_row(static_cast<gpu::WeightFormat>(raw_type), src, dst,
                      static_cast<int64_t>(n));
  return {};
}

}  // namespace pagoda::model
