#include "gpu/cpu/quant_packed.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpu/quant_format.hpp"
#include "gpu/quant_kquants.hpp"

namespace pagoda::gpu::cpu {

namespace {

static_assert([] {
  for (int i = 0; i < 16; ++i) {
    if (kIq4GridU8[i] != kIq4Grid[i] + 128) return false;
  }
  return true;
}());

// The file's qs[16] (nibbles) of a 4-bit or 5-bit block, and its offset fields.
const uint8_t* nibbles(WeightFormat f, const uint8_t* src) {
  switch (f) {
    case WeightFormat::Q4_1: return reinterpret_cast<const BlockQ4_1*>(src)->qs;
    case WeightFormat::Q5_0: return reinterpret_cast<const BlockQ5_0*>(src)->qs;
    case WeightFormat::Q5_1: return reinterpret_cast<const BlockQ5_1*>(src)->qs;
    case WeightFormat::IQ4_NL: return reinterpret_cast<const BlockIQ4_NL*>(src)->qs;
    default: return reinterpret_cast<const BlockQ4_0*>(src)->qs;
  }
}

// Q5_0 / Q5_1: the 32 high bits of the block (bit j: element j).
uint32_t high_bits(WeightFormat f, const uint8_t* src) {
  const uint8_t* qh = f == WeightFormat::Q5_0 ? reinterpret_cast<const BlockQ5_0*>(src)->qh
                                              : reinterpret_cast<const BlockQ5_1*>(src)->qh;
  return uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
}

// IQ4_XS: sub-block s (0..7) of a super-block at src into row r's tile.
void pack_iq4_xs(const uint8_t* src, int s, int r, uint8_t* tile) {
  const auto* b = reinterpret_cast<const BlockIQ4_XS*>(src);
  const int ls = ((b->scales_l[s / 2] >> 4 * (s % 2)) & 15) | ((b->scales_h >> 2 * s) & 3) << 4;
  const float d = fp16_to_fp32(b->d) * float(ls - 32);  // exact: 11 × 6 significant bits
  std::memcpy(tile + 4 * r, &d, 4);
  for (int c = 0; c < 4; ++c) std::memcpy(tile + 64 + 64 * c + 4 * r, b->qs + 16 * s + 4 * c, 4);
}

// Copies one source block (row r of a group) into the group's tile.
void pack_block(WeightFormat f, const uint8_t* src, int r, uint8_t* tile) {
  std::memcpy(tile + 2 * r, src, 2);  // d
  uint8_t* q = tile + packed_header_bytes(f);
  if (f == WeightFormat::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
    for (int c = 0; c < 8; ++c) {
      for (int t = 0; t < 4; ++t) q[64 * c + 4 * r + t] = uint8_t(int(b->qs[4 * c + t]) + 128);
    }
    return;
  }
  if (packed_has_offset(f)) std::memcpy(tile + 32 + 2 * r, src + 2, 2);  // m
  const uint8_t* qs = nibbles(f, src);
  for (int c = 0; c < 4; ++c) std::memcpy(q + 64 * c + 4 * r, qs + 4 * c, 4);
  if (!packed_five_bit(f)) return;
  const uint32_t qh = high_bits(f, src);
  uint8_t* plane = tile + packed_hibit_offset(f);
  for (int t = 0; t < 4; ++t) {
    uint8_t byte = 0;
    for (int j = 0; j < 8; ++j) byte |= uint8_t(((qh >> (4 * j + t)) & 1u) << j);
    plane[4 * r + t] = byte;
  }
}

// The integer weight of element j of row r in a packed tile (the q_w of the
// header comment: signed, or unsigned for the offset formats).
int packed_quant(WeightFormat f, const uint8_t* tile, int r, int j) {
  const uint8_t* q = tile + packed_header_bytes(f);
  if (f == WeightFormat::Q8_0) return int(q[64 * (j / 4) + 4 * r + j % 4]) - 128;
  const int e = j % 16;  // the nibble's byte: element e (low) and e + 16 (high)
  const uint8_t byte = q[64 * (e / 4) + 4 * r + e % 4];
  const int nib = j < 16 ? byte & 0xF : byte >> 4;
  switch (f) {
    case WeightFormat::Q4_0: return nib - 8;
    case WeightFormat::IQ4_NL:
    case WeightFormat::IQ4_XS: return kIq4Grid[nib];
    case WeightFormat::Q5_0:
    case WeightFormat::Q5_1: {
      const uint8_t plane = tile[packed_hibit_offset(f) + 4 * r + j % 4];
      const int v = nib | ((plane >> (j / 4)) & 1) << 4;
      return f == WeightFormat::Q5_0 ? v - 16 : v;
    }
    default: return nib;  // Q4_1
  }
}

// Exact integer dot of one packed row (group tile, row r) with an activation block.
int32_t packed_partial(WeightFormat f, const uint8_t* tile, int r, const detail::ActBlock& a) {
  int32_t p = 0;
  for (int j = 0; j < 32; ++j) p += packed_quant(f, tile, r, j) * a.qs[j];
  return p;
}

uint16_t load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Row r's scale d_w in a tile.
float row_scale(WeightFormat f, const uint8_t* tile, int r) {
  if (packed_f32_scales(f)) {
    float d;
    std::memcpy(&d, tile + 4 * r, 4);
    return d;
  }
  return fp16_to_fp32(load_half(tile + 2 * r));
}

}  // namespace

bool packed_layout_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("PAGODA_CPU_PACKED");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

Result<LinearWeight> pack_weight(const LinearWeight& w, std::vector<uint8_t>& out) {
  const int64_t T = packed_tile_bytes(w.format);
  if (T == 0 || w.layout != WeightLayout::kRows) {
    return make_error("pack_weight: " + std::string(format_name(w.format)) +
                      " weights in this layout cannot be packed");
  }
  if (w.k % block_elems(w.format) != 0 || w.n <= 0 || w.data == nullptr) {
    return make_error("pack_weight: bad weight shape");
  }
  const int64_t nb = w.k / kQuantBlock;
  out.assign(size_t(packed_bytes(w.format, w.n, w.k)), 0);  // padding rows: all zero
  if (packed_kquant(w.format)) {
    detail::pack_kquant(w, out.data());
    return LinearWeight{w.format, w.n, w.k, out.data(), WeightLayout::kPacked16};
  }
  const auto* src = static_cast<const uint8_t*>(w.data);
  const int64_t bb = block_bytes(w.format);
  for (int64_t n = 0; n < w.n; ++n) {
    const int64_t g = n / kPackRows;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* tile = out.data() + (g * nb + b) * T;  // not a K-quant: tiles back to back
      if (w.format == WeightFormat::IQ4_XS) {
        pack_iq4_xs(src + n * w.row_bytes() + b / 8 * bb, int(b % 8), int(n % kPackRows), tile);
      } else {
        pack_block(w.format, src + n * w.row_bytes() + b * bb, int(n % kPackRows), tile);
      }
    }
  }
  return LinearWeight{w.format, w.n, w.k, out.data(), WeightLayout::kPacked16};
}

namespace detail {

void packed_tile_scalar(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                        int64_t m1, int64_t g0, int64_t g1) {
  const int64_t nb = w.k / kQuantBlock, G = packed_group_bytes(w.format, w.k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const bool offset = packed_has_offset(w.format);
  for (int64_t m = m0; m < m1; ++m) {
    const ActBlock* a = act + m * nb;
    for (int64_t g = g0; g < g1; ++g) {
      for (int r = 0; r < kPackRows && g * kPackRows + r < w.n; ++r) {
        if (packed_kquant(w.format)) {
          y[m * w.n + g * kPackRows + r] = packed_kquant_dot(w.format, base + g * G, nb, r, a);
          continue;
        }
        float acc = 0.0f, macc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* tile = base + g * G + packed_tile_at(w.format, b);
          const float d = row_scale(w.format, tile, r) * a[b].d;
          acc = std::fma(d, float(packed_partial(w.format, tile, r, a[b])), acc);
          if (offset) macc = std::fma(fp16_to_fp32(load_half(tile + 32 + 2 * r)), a[b].s, macc);
        }
        y[m * w.n + g * kPackRows + r] = offset ? acc + macc : acc;
      }
    }
  }
}

PackedTileFn packed_tile_kernel(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::Avx2: return &packed_tile_avx2;
    case QuantIsa::AvxVnni: return &packed_tile_avxvnni;
    case QuantIsa::Avx512Bw: return &packed_tile_avx512bw;
    case QuantIsa::Avx512Vnni: return &packed_tile_avx512vnni;
    case QuantIsa::Scalar: break;
  }
  return &packed_tile_scalar;
}

}  // namespace detail

}  // namespace pagoda::gpu::cpu
