// The K-quant tiles of the packed layout (Q2_K .. Q6_K; layout and math in
// gpu/cpu/quant_packed.hpp): packing from the file's super-blocks, and the
// scalar kernel's dot product that defines the bits every SIMD variant
// (quant_packed_kq_ymm.hpp, quant_packed_kq_zmm.hpp) reproduces.
// Pure functions over caller-owned memory.
#include <cmath>
#include <cstring>

#include "gpu/cpu/quant_packed.hpp"
#include "gpu/quant_format.hpp"
#include "gpu/quant_kquants.hpp"

namespace pagoda::gpu::cpu::detail {

namespace {

// Where some bits of element j (0..31) of row r lie in a tile.
struct BitPos {
  int64_t byte;
  int shift;
};

// The low 4 or 2 bits of element j (weight vector J = j / 4, lane byte 4r + t).
BitPos low_pos(WeightFormat f, int r, int j) {
  const int t = j % 4, J = j / 4;
  if (packed_k_low_bits(f) == 4) return {packed_k_header(f) + 64 * (J % 4) + 4 * r + t, 4 * (J / 4)};
  return {packed_k_header(f) + 64 * (J / 4) + 4 * r + t, 2 * (J % 4)};
}

// The high 1 or 2 bits of element j.
BitPos high_pos(WeightFormat f, int r, int j) {
  const int t = j % 4, J = j / 4;
  if (packed_k_high_bits(f) == 1) return {packed_k_high_at(f) + 4 * r + t, J};
  return {packed_k_high_at(f) + 64 * (J / 4) + 4 * r + t, 2 * (J % 4)};
}

void put_bits(uint8_t* tile, BitPos p, int bits, int v) {
  tile[p.byte] = uint8_t(tile[p.byte] | (v & ((1 << bits) - 1)) << p.shift);
}

int get_bits(const uint8_t* tile, BitPos p, int bits) {
  return tile[p.byte] >> p.shift & ((1 << bits) - 1);
}

// Sub-block s (elements 32s..32s+31) of a decoded super-block into row r of
// a zeroed tile (d and dmin go to the super-block's header: pack_kquant).
void pack_sub(WeightFormat f, const KQuantInts& k, int s, int r, uint8_t* tile) {
  const int64_t sc = packed_k_scale_at(f), mn = packed_k_min_at(f);
  for (int h = 0; h < (packed_k_sub16(f) ? 2 : 1); ++h) {
    tile[sc + 16 * h + r] = uint8_t(k.sc[2 * s + h]);
    if (packed_k_min(f)) tile[mn + 16 * h + r] = uint8_t(k.mn[2 * s + h]);
  }
  const int lo = packed_k_low_bits(f), hi = packed_k_high_bits(f);
  for (int j = 0; j < 32; ++j) {
    const int q = k.q[32 * s + j];
    put_bits(tile, low_pos(f, r, j), lo, q);
    if (hi > 0) put_bits(tile, high_pos(f, r, j), hi, q >> lo);
  }
}

int s8(const uint8_t* tile, int64_t at) { return int8_t(tile[at]); }

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

}  // namespace

void pack_kquant(const LinearWeight& w, uint8_t* out) {
  const WeightFormat f = w.format;
  const int64_t nb = w.k / kQuantBlock, bb = block_bytes(f);
  const auto* src = static_cast<const uint8_t*>(w.data);
  KQuantInts k;
  for (int64_t n = 0; n < w.n; ++n) {
    uint8_t* group = out + n / kPackRows * packed_group_bytes(f, w.k);
    const int r = int(n % kPackRows);
    for (int64_t sb = 0; sb < nb / 8; ++sb) {  // each super-block decoded once
      kquant_ints(f, src + n * w.row_bytes() + sb * bb, k);
      uint8_t* head = group + packed_k_super_at(f, 8 * sb);
      std::memcpy(head + 2 * r, &k.d, 2);
      if (packed_k_min(f)) std::memcpy(head + 32 + 2 * r, &k.dmin, 2);
      for (int s = 0; s < 8; ++s) pack_sub(f, k, s, r, group + packed_tile_at(f, 8 * sb + s));
    }
  }
}

float packed_kquant_dot(WeightFormat f, const uint8_t* group, int64_t nb, int r,
                        const ActBlock* a) {
  const int64_t sc_at = packed_k_scale_at(f), mn_at = packed_k_min_at(f);
  const int lo = packed_k_low_bits(f), hi = packed_k_high_bits(f), off = packed_k_offset(f);
  float acc = 0.0f, macc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* t = group + packed_tile_at(f, b);
    const uint8_t* head = group + packed_k_super_at(f, b);  // d[16], dmin[16]
    int32_t p[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      int q = get_bits(t, low_pos(f, r, j), lo);
      if (hi > 0) q |= get_bits(t, high_pos(f, r, j), hi) << lo;
      p[j / 16] += q * a[b].qs[j];
    }
    const float dw = half_at(head + 2 * r);
    const float dm = packed_k_min(f) ? half_at(head + 32 + 2 * r) : 0.0f;
    if (!packed_k_sub16(f)) {  // Q4_K, Q5_K: Q4_1's steps with the exact d·sc and dmin·mn
      acc = std::fma(dw * float(s8(t, sc_at + r)) * a[b].d, float(p[0] + p[1]), acc);
      macc = std::fma(dm * float(s8(t, mn_at + r)), a[b].s, macc);
      continue;
    }
    const int32_t s[2] = {a[b].sum_lo, a[b].sum - a[b].sum_lo};
    for (int h = 0; h < 2; ++h) {
      acc = std::fma(dw * float(s8(t, sc_at + 16 * h + r)) * a[b].d, float(p[h] - off * s[h]), acc);
    }
    if (packed_k_min(f)) {
      for (int h = 0; h < 2; ++h) {
        macc = std::fma(dm * float(s8(t, mn_at + 16 * h + r)), a[b].d * float(s[h]), macc);
      }
    }
  }
  return packed_k_min(f) ? acc - macc : acc;
}

}  // namespace pagoda::gpu::cpu::detail
