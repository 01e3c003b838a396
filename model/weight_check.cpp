#include "model/weight_check.hpp"

#include <cstring>

namespace pagoda::model {

namespace {

uint16_t load_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }

// IEEE half: exponent bits all ones means Inf or NaN.
bool f16_non_finite(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }
bool bf16_non_finite(uint16_t h) { return (h & 0x7F80u) == 0x7F80u; }

int64_t scan_f32(const uint8_t* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, data + 4 * i, 4);
    if ((u & 0x7F800000u) == 0x7F800000u) return i;
  }
  return -1;
}

int64_t scan_half(const uint8_t* data, int64_t n, bool bf16) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = load_u16(data + 2 * i);
    if (bf16 ? bf16_non_finite(h) : f16_non_finite(h)) return i;
  }
  return -1;
}

// Blocks whose fp16 scale fields lie at the offsets the type table lists.
int64_t scan_blocks(gpu::WeightFormat format, const uint8_t* data, int64_t blocks) {
  const gpu::WeightTypeTraits& t = gpu::traits(format);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = data + b * t.block_bytes;
    for (int s = 0; s < t.half_count; ++s) {
      if (f16_non_finite(load_u16(p + t.half_at[s]))) return b * t.block_elems;
    }
  }
  return -1;
}

}  // namespace

int64_t first_non_finite(gpu::WeightFormat format, const uint8_t* data, int64_t numel) {
  using gpu::WeightFormat;
  switch (format) {
    case WeightFormat::F32:
      return scan_f32(data, numel);
    case WeightFormat::F16:
      return scan_half(data, numel, false);
    case WeightFormat::BF16:
      return scan_half(data, numel, true);
    default:  // a block format: its scales (the quants are small integers)
      return scan_blocks(format, data, numel / gpu::block_elems(format));
  }
}

}  // namespace pagoda::model
