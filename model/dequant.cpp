#include "model/dequant.hpp"

#include "gpu/quant_format.hpp"


namespace pagoda::model {

const GgmlTypeTraits* ggml_type_traits(uint32_t raw_type) {
  return gpu::weight_type_traits(raw_type);
}

std::string supported_type_names() { return gpu::supported_format_names(); }

std::string ggml_type_name(uint32_t raw_type) {
  const GgmlTypeTraits* t = ggml_type_traits(raw_type);
  return t ? std::string(t->name) : "type " + std::to_string(raw_type);
}

Result<uint64_t> tensor_bytes(uint32_t raw_type, uint64_t n_elements) {
  const GgmlTypeTraits* t = ggml_type_traits(raw_type);
  if (!t) return make_error("unknown ggml type id " + std::to_string(raw_type));
  const uint64_t block_elems = uint64_t(t->block_elems), block_bytes = uint64_t(t->block_bytes);
  if (n_elements % block_elems != 0) {
    return make_error("element count " + std::to_string(n_elements) + " is not a multiple of the " +
                      t->name + " block size " + std::to_string(t->block_elems));
  }
  const uint64_t blocks = n_elements / block_elems;
  if (blocks != 0 && block_bytes > UINT64_MAX / blocks) {
    return make_error("byte size of " + std::to_string(n_elements) + " " + t->name +
                      " elements overflows");
  }
  return blocks * block_bytes;
}

Result<uint64_t> tensor_bytes(GgmlType type, uint64_t n_elements) {
  return tensor_bytes(static_cast<uint32_t>(type), n_elements);
}

Result<void> dequantize(uint32_t raw_type, const uint8_t* src, float* dst, uint64_t n) {
  const GgmlTypeTraits* t = ggml_type_traits(raw_type);
  if (!t || t->dequantize == nullptr) {
    return make_error("cannot dequantize ggml type " + ggml_type_name(raw_type) +
                      " (supported: " + supported_type_names() + ")");
  }
  if (n % uint64_t(t->block_elems) != 0) {
    return make_error("element count " + std::to_string(n) + " is not a multiple of the " +
                      t->name + " block size " + std::to_string(t->block_elems));
  }
  // The block math lives in the gpu layer (the table's row), shared with the
  // CPU and CUDA weight preparation.
  t->dequantize(src, dst, static_cast<int64_t>(n / uint64_t(t->block_elems)));
  return {};
}

}  // namespace pagoda::model
